"""A place to wait until something changes, which holds nothing until a task waits there."""

from __future__ import annotations

import trio

__all__ = ["Wakeup"]


class Wakeup:
    """Tasks wait in :meth:`wait` until the next :meth:`notify`, then look again at what they
    wait for.

    A ``trio.lowlevel.ParkingLot`` made by the first wait: an object that is rarely waited on
    (most of a session's are, and every object a session holds is walked by each full garbage
    collection) holds none until then.
    """

    __slots__ = ("_lot",)

    def __init__(self) -> None:
        self._lot: trio.lowlevel.ParkingLot | None = None

    async def wait(self) -> None:
        """Wait for the next :meth:`notify`.

        Cancellation: a checkpoint; a cancelled wait changes nothing.
        """
        if self._lot is None:
            self._lot = trio.lowlevel.ParkingLot()
        await self._lot.park()

    def notify(self) -> None:
        """Wake every waiting task. Not a checkpoint."""
        if self._lot:
            self._lot.unpark_all()
