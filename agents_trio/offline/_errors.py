from __future__ import annotations

from .._errors import AgentsTrioError

VOICE_EXTRA = "pip install -e '.[voice]'"


class MissingDependency(AgentsTrioError):
    """Something the offline voice models need is not installed; the message says how to
    install it."""
