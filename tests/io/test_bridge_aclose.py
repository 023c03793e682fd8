"""AsyncioBridge.aclose(): closing a bridge before its block ends."""

from __future__ import annotations

import asyncio

import pytest
import trio
import trio.testing

from agents_trio.io.bridge import BridgeError, open_bridge


async def test_aclose_early_cancels_the_tasks_and_refuses_new_calls(
        autojump_clock: trio.testing.MockClock) -> None:
    cancelled: list[bool] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    errors: list[BaseException] = []

    async def call() -> None:
        try:
            await bridge.run(forever)
        except BridgeError as e:  # cancelled by the bridge, not by Trio
            errors.append(e)

    async with open_bridge() as bridge:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.sleep(1)
            await bridge.aclose()
        assert bridge.closed and cancelled == [True] and len(errors) == 1
        assert bridge.statistics().asyncio_tasks == 0
        with pytest.raises(BridgeError, match="closed"):
            await bridge.run(asyncio.sleep, 0)
        await bridge.aclose()  # idempotent; leaving the block closes nothing twice
