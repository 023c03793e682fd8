"""The bridge a session opens when an adapted plugin finds none: opened once, on first use,
owned by the nursery it was given, closed by ``close()``; ``find_bridge`` prefers the
adapter's own bridge, then the current one."""

from __future__ import annotations

import pytest
import trio
import trio.testing

pytest.importorskip("trio_asyncio")

from agents_trio import AgentSession, BridgeError, open_bridge
from agents_trio.io.bridge_on_demand import BridgeOnDemand, find_bridge
from agents_trio.testing import FakeLLM, FakeLLMResponse


async def test_opened_once_on_first_use_and_closed_by_close(
        autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        on_demand = BridgeOnDemand(nursery)
        token = on_demand.install()
        try:
            assert not on_demand.opened
            found: list[object] = []

            async def ask() -> None:
                found.append(await find_bridge())

            async with trio.open_nursery() as askers:  # concurrent first uses share one
                for _ in range(3):
                    askers.start_soon(ask)
            assert on_demand.opened and len({id(b) for b in found}) == 1
            bridge = await find_bridge()
            assert bridge is found[0] and await bridge.run_sync(lambda: 7) == 7
            on_demand.close()
        finally:
            on_demand.uninstall(token)
    assert bridge.closed  # the owner task closed it before the nursery ended
    with pytest.raises(BridgeError, match="closed"):
        await on_demand.get()


async def test_find_bridge_prefers_the_given_then_the_current_bridge() -> None:
    with pytest.raises(BridgeError, match="no asyncio bridge is open"):
        await find_bridge()
    async with open_bridge() as outer, trio.open_nursery() as nursery:
        on_demand = BridgeOnDemand(nursery)
        token = on_demand.install()
        try:
            assert await find_bridge() is outer
            async with open_bridge() as inner:
                assert await find_bridge(outer) is outer
                assert await find_bridge() is inner
            assert not on_demand.opened
        finally:
            on_demand.uninstall(token)
            on_demand.close()


async def test_a_session_of_trio_models_opens_no_bridge(
        autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch) -> None:
    from agents_trio import Agent
    from agents_trio.io import bridge_on_demand

    def no_bridge(**kwargs: object) -> object:
        raise AssertionError("a session of Trio models opened a bridge")

    monkeypatch.setattr(bridge_on_demand, "open_bridge", no_bridge)
    llm = FakeLLM([FakeLLMResponse(input="hello", content="Hi there.")])
    async with AgentSession(llm=llm) as session:
        await session.start(Agent(instructions="hi"))
        result = await session.run(user_input="hello")
    result.expect.next_event().is_message(role="assistant")
