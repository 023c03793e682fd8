"""``@function_tool(on_duplicate=..., duplicate_scope=...)``: what a call does while another
call of the same tool runs (LiveKit's semantics; see agents_trio.tool_calls)."""

from __future__ import annotations

import json

import trio

from agents_trio import Agent, AgentSession, FunctionToolCall, ToolFlag, function_tool
from agents_trio.testing import FakeActions, FakeLLM


class Shop(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You run a shop.")
        self.ran: list[str] = []
        self.finished: list[str] = []

    async def _work(self, label: str) -> str:
        self.ran.append(label)
        await trio.sleep(1)
        self.finished.append(label)
        return f"done {label}"

    @function_tool(on_duplicate="reject")
    async def check_stock(self, item: str) -> str:
        """Check the stock.

        Args:
            item: The item
        """
        return await self._work(f"stock:{item}")

    @function_tool(on_duplicate="reject", duplicate_scope="name_and_args")
    async def check_order(self, order_id: str, verbose: bool = False) -> str:
        """Check an order.

        Args:
            order_id: The order
            verbose: More detail
        """
        return await self._work(f"order:{order_id}")

    @function_tool(on_duplicate="confirm")
    async def charge(self, amount: int) -> str:
        """Charge the card.

        Args:
            amount: The amount
        """
        return await self._work(f"charge:{amount}")

    @function_tool(on_duplicate="replace", flags=ToolFlag.CANCELLABLE)
    async def search(self, query: str) -> str:
        """Search.

        Args:
            query: The query
        """
        return await self._work(f"search:{query}")

    @function_tool(on_duplicate="replace")
    async def ship(self, order_id: str) -> str:
        """Ship an order (not cancellable).

        Args:
            order_id: The order
        """
        return await self._work(f"ship:{order_id}")

    @function_tool
    async def ping(self, n: int) -> str:
        """Ping (duplicates allowed).

        Args:
            n: A number
        """
        return await self._work(f"ping:{n}")


def _call(name: str, call_id: str, **arguments: object) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=json.dumps(arguments), call_id=call_id)


async def _step(*calls: FunctionToolCall) -> tuple[Shop, dict[str, tuple[str, bool, bool]]]:
    """One LLM step making ``calls``; the outputs by call id: (text, is_error, reply)."""
    a = FakeActions()
    a.add_llm("", tool_calls=list(calls), input="go")
    agent = Shop()
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with trio.fail_after(30):
            result = await session.run(user_input="go")
    outputs = {e.item.call_id: (e.item.output, e.item.is_error, e.item.reply_required)
               for e in result.events if e.type == "function_call_output"}
    return agent, outputs


async def test_reject_answers_the_duplicate_without_running_it(autojump_clock):
    agent, out = await _step(_call("check_stock", "c1", item="tea"),
                             _call("check_stock", "c2", item="milk"))
    assert agent.ran == ["stock:tea"]
    assert out["c1"] == ("done stock:tea", False, True)
    text, is_error, reply = out["c2"]
    assert text.startswith("Same tool `check_stock` is already running:\n")
    assert '"call_id":"c1"' in text and "lk_agents_cancel_task" in text
    assert (is_error, reply) == (False, True)


async def test_name_and_args_compares_validated_arguments(autojump_clock):
    agent, out = await _step(_call("check_order", "c1", order_id="7"),
                             _call("check_order", "c2", order_id="8"),
                             _call("check_order", "c3", order_id="7", verbose=False))
    assert agent.ran == ["order:7", "order:8"]
    assert out["c3"][0].startswith("Same tool `check_order` is already running:")
    assert '"call_id":"c1"' in out["c3"][0] and '"call_id":"c2"' not in out["c3"][0]


async def test_confirm_runs_a_duplicate_only_when_confirmed(autojump_clock):
    assert "lk_agents_confirm_duplicate" in Shop().charge.parameters_schema["properties"]
    agent, out = await _step(_call("charge", "c1", amount=5),
                             _call("charge", "c2", amount=5),
                             _call("charge", "c3", amount=5, lk_agents_confirm_duplicate=True))
    assert agent.ran == ["charge:5", "charge:5"]
    assert out["c2"][0].startswith("Same tool `charge` is already running:")
    assert "Re-call with confirm duplicate True" in out["c2"][0]
    assert out["c3"] == ("done charge:5", False, True)


async def test_replace_cancels_the_running_call_and_runs_the_new_one(autojump_clock):
    agent, out = await _step(_call("search", "c1", query="a"), _call("search", "c2", query="b"))
    assert agent.ran == ["search:a", "search:b"]
    assert agent.finished == ["search:b"]
    assert out["c1"] == ("", False, False)
    assert out["c2"] == ("done search:b", False, True)


async def test_replace_of_a_call_that_cannot_be_cancelled_fails(autojump_clock):
    agent, out = await _step(_call("ship", "c1", order_id="1"), _call("ship", "c2", order_id="2"))
    assert agent.ran == ["ship:1"]
    assert out["c2"] == ("cannot replace duplicate call of `ship`: running call is not "
                         "cancellable (allow_cancellation=False)", True, True)


async def test_allow_runs_every_call(autojump_clock):
    agent, out = await _step(_call("ping", "c1", n=1), _call("ping", "c2", n=1))
    assert sorted(agent.ran) == ["ping:1", "ping:1"]
    assert out["c1"][0] == out["c2"][0] == "done ping:1"
