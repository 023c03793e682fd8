"""``agents_trio.beta.workflows``: LiveKit's ``livekit.agents.beta.workflows`` names."""

from __future__ import annotations

from ..prebuilt import (GetAddressResult, GetAddressTask, GetCreditCardResult,
                        GetCreditCardTask, GetDOBResult, GetDOBTask, GetDtmfResult, GetDtmfTask,
                        GetEmailResult, GetEmailTask, GetNameResult, GetNameTask,
                        GetPhoneNumberResult, GetPhoneNumberTask, WarmTransferResult,
                        WarmTransferTask)
from ..workflows import TaskCompletedEvent, TaskGroup, TaskGroupResult

__all__ = [
    "GetAddressResult", "GetAddressTask", "GetCreditCardResult", "GetCreditCardTask",
    "GetDOBResult", "GetDOBTask", "GetDtmfResult", "GetDtmfTask", "GetEmailResult",
    "GetEmailTask", "GetNameResult", "GetNameTask", "GetPhoneNumberResult",
    "GetPhoneNumberTask", "TaskCompletedEvent", "TaskGroup", "TaskGroupResult",
    "WarmTransferResult", "WarmTransferTask",
]
