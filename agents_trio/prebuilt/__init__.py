"""The prebuilt workflow tasks (LiveKit's ``beta.workflows``) and ``EndCallTool``; their
LiveKit paths are ``agents_trio.beta.workflows`` and ``agents_trio.beta``."""

from __future__ import annotations

from .address import GetAddressResult, GetAddressTask
from .credit_card import (CardCaptureDeclinedError, CardCollectionRestartError,
                          GetCardNumberResult, GetCardNumberTask, GetCreditCardResult,
                          GetCreditCardTask, GetExpirationDateResult, GetExpirationDateTask,
                          GetSecurityCodeResult, GetSecurityCodeTask)
from .dob import GetDOBResult, GetDOBTask
from .dtmf import DtmfEvent, GetDtmfResult, GetDtmfTask, dtmf_event_to_code, format_dtmf
from .email import GetEmailResult, GetEmailTask
from .end_call import EndCallTool
from .name import GetNameResult, GetNameTask
from .phone import GetPhoneNumberResult, GetPhoneNumberTask
from .warm_transfer import WarmTransferResult, WarmTransferTask

__all__ = [
    "CardCaptureDeclinedError", "CardCollectionRestartError", "DtmfEvent", "EndCallTool",
    "GetAddressResult", "GetAddressTask", "GetCardNumberResult", "GetCardNumberTask",
    "GetCreditCardResult", "GetCreditCardTask", "GetDOBResult", "GetDOBTask", "GetDtmfResult",
    "GetDtmfTask", "GetEmailResult", "GetEmailTask", "GetExpirationDateResult",
    "GetExpirationDateTask", "GetNameResult", "GetNameTask", "GetPhoneNumberResult",
    "GetPhoneNumberTask", "GetSecurityCodeResult", "GetSecurityCodeTask", "WarmTransferResult",
    "WarmTransferTask", "dtmf_event_to_code", "format_dtmf",
]
