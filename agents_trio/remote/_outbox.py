"""The frames queued for one remote client: bounded in number and in bytes, written by one
writer that batches what is waiting. Shared by both protocols' host connections."""

from __future__ import annotations

import trio


class Outbox:
    """Frames on their way to one client.

    ``put`` never waits: a client that does not read fills the outbox, and the connection
    decides what that means (drop an event, or close on a reply). ``write_to`` is the one
    writer; ``drained`` is set once it has written everything up to :meth:`close`, or stopped.
    """

    def __init__(self, *, max_frames: int, max_bytes: int) -> None:
        self._send, self._recv = trio.open_memory_channel[bytes](max_frames)
        self._bytes = 0
        self._max_bytes = max_bytes
        self.drained = trio.Event()

    def put(self, frame: bytes) -> None:
        """Queue ``frame``.

        Raises:
            trio.WouldBlock: the outbox is full (in frames or in bytes).
            trio.ClosedResourceError, trio.BrokenResourceError: it is closed.
        """
        if self._bytes and self._bytes + len(frame) > self._max_bytes:
            raise trio.WouldBlock
        self._send.send_nowait(frame)
        self._bytes += len(frame)

    def close(self) -> None:
        """No more frames: the writer ends once it has written the ones queued."""
        self._send.close()

    async def write_to(self, stream: trio.abc.SendStream) -> None:
        """Write the frames to ``stream`` until :meth:`close`, up to 64 per write.

        Raises:
            trio.BrokenResourceError, trio.ClosedResourceError: the client is gone.

        Cancellation: cancelling it drops what is still queued (a frame being written may be
        cut short: the connection is over then anyway).
        """
        try:
            async for frame in self._recv:
                frames = [frame]
                while len(frames) < 64:
                    try:
                        frames.append(self._recv.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                data = b"".join(frames)
                await stream.send_all(data)
                self._bytes -= len(data)
        finally:
            self._recv.close()
            self.drained.set()
