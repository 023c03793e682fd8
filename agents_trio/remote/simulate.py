"""Simulation: play scenario files (user turns and expected outcomes) against an agent.

A scenario file is JSON::

    {"scenarios": [
      {"name": "weather in Lisbon",
       "turns": [
         {"user": "What's the weather in Lisbon?",
          "expect": [
            {"type": "message", "contains": "check"},
            {"type": "function_call", "name": "get_weather", "arguments": {"location": "Lisbon"}},
            {"type": "function_call_output", "contains": "sunny"},
            {"type": "message", "contains": "sunny"}]},
         {"user": "break", "expect_error": "unavailable"},
         {"user": "shh", "expect": []}],
       "expect_agent": "weather_agent"}]}

A turn's ``expect`` lists the items the turn must produce, in order; with ``"match":
"in_order"`` other items may come between them, with ``"match": "exact"`` (the default) they
may not. Without ``expect`` any reply passes. ``expect_error`` asks for a failed turn whose
error contains the text. A scenario stops at its first failing turn.

Scenarios run through a :class:`Driver`: :class:`LkRemoteDriver` (a LiveKit-protocol
``agents_trio.remote.lk.RemoteSession``, to our host or LiveKit's: every scenario talks to the
same running session, so state carries over; each scenario ends with a ``finalize_simulation``
that hands the agent the verdict and records the agent's own, as LiveKit's simulator does),
:class:`RemoteDriver` (the msgpack ``RemoteSession``), or :class:`LocalDriver` (an in-process
session; :func:`run_scenarios` makes a fresh one per scenario).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec
import trio

from .._errors import AgentsTrioError
from ..chat import AgentHandoff, ChatItem, ChatMessage, FunctionCall, FunctionCallOutput
from .client import RemoteSession
from .errors import RemoteConnectionError, RemoteSessionClosedError, RemoteSessionError

if TYPE_CHECKING:
    from ..session import AgentSession
    from .lk.client import RemoteSession as LkRemoteSession

ItemType = Literal["message", "function_call", "function_call_output", "agent_handoff"]


class ScenarioError(AgentsTrioError):
    """A scenario file that cannot be read or does not follow the schema."""


class ExpectedItem(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One expected item; every field given must match.

    Attributes:
        type: The item type.
        role: A message's role (default: any).
        text: The exact message text or tool output.
        contains: Text (case-insensitive) in the message, tool output, or call arguments.
        name: The tool name of a call or output.
        arguments: Arguments the call must have (others may be present too).
        is_error: Whether a tool output is an error.
        new_agent: The id of the agent a handoff goes to.
    """

    type: ItemType
    role: str | None = None
    text: str | None = None
    contains: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None
    is_error: bool | None = None
    new_agent: str | None = None


class Turn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    user: str
    expect: list[ExpectedItem] | None = None
    match: Literal["exact", "in_order"] = "exact"
    expect_error: str | None = None


class Scenario(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str
    turns: list[Turn]
    description: str = ""
    expect_agent: str | None = None


class _ScenarioFile(msgspec.Struct, forbid_unknown_fields=True):
    scenarios: list[Scenario]
    agent: str | None = None   # an agent file, relative to the scenario file


class _AgentKey(msgspec.Struct):
    agent: str | None = None


def scenario_file_agent(path: str | os.PathLike[str]) -> str | None:
    """The ``"agent"`` of a scenario file (the agent file to play it against), as a path
    relative to the current directory, or None.

    Raises:
        ScenarioError: unreadable or not JSON, or ``agent`` is not a string.
    """
    where = os.fspath(path)
    try:
        with open(where, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ScenarioError(f"cannot read {where}: {e.strerror or e}") from e
    if data.lstrip()[:1] != b"{":
        return None
    try:
        agent = msgspec.json.decode(data, type=_AgentKey).agent
    except msgspec.DecodeError as e:
        raise ScenarioError(f"{where}: {e}") from None
    return None if agent is None else os.path.join(os.path.dirname(where), agent)


def load_scenarios(source: str | os.PathLike[str] | bytes) -> list[Scenario]:
    """Read scenarios from a JSON file path, or from JSON text/bytes (a ``{"scenarios":
    [...]}`` object or a bare list).

    Raises:
        ScenarioError: unreadable, not JSON, or not the schema (the message names the field).
    """
    if isinstance(source, bytes) or (isinstance(source, str) and source.lstrip()[:1] in "[{"):
        data = source if isinstance(source, bytes) else source.encode()
        where = "scenario text"
    else:
        where = os.fspath(source)
        try:
            with open(where, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ScenarioError(f"cannot read {where}: {e.strerror or e}") from e
    try:
        if data.lstrip()[:1] == b"[":
            return msgspec.json.decode(data, type=list[Scenario])
        return msgspec.json.decode(data, type=_ScenarioFile).scenarios
    except msgspec.DecodeError as e:
        raise ScenarioError(f"{where}: {e}") from None


# --------------------------------------------------------------------------------------------
# Drivers


@dataclass
class TurnOutcome:
    """What a turn produced: its items, or the error it failed with."""

    items: list[ChatItem] = field(default_factory=list)
    error: str | None = None


class Driver(Protocol):
    """What a scenario is played through: a remote session, or an in-process one."""

    async def run(self, text: str) -> TurnOutcome:
        """Send ``text`` as a user turn; its outcome once it settled.

        Cancellation: the turn is withdrawn (remote) or cancelled (in-process).
        """
        ...

    async def agent_id(self) -> str:
        """The current agent's id.

        Cancellation: a checkpoint; nothing else happens.
        """
        ...


class LkRemoteDriver:
    """Drives the session behind a LiveKit-protocol ``RemoteSession``.

    Cancellation: a cancelled turn is only forgotten by the client (LiveKit's protocol has no
    cancel): the host still plays it.
    """

    def __init__(self, remote: LkRemoteSession, *, turn_timeout: float = 60.0) -> None:
        self.remote = remote
        self.turn_timeout = turn_timeout

    async def run(self, text: str) -> TurnOutcome:
        """Cancellation: cancelling it forgets the turn's answer; the host may still run the turn.
        """
        from .lk.convert import decode_chat_items

        try:
            result = await self.remote.run(text, timeout=self.turn_timeout)
        except (RemoteConnectionError, RemoteSessionClosedError):
            raise
        except RemoteSessionError as e:
            prefix = "session request run_input failed: "
            return TurnOutcome(error=e.message.removeprefix(prefix))
        return TurnOutcome(items=decode_chat_items(result.items))

    async def agent_id(self) -> str:
        """Cancellation: as :meth:`RemoteSession.ping`."""
        return str((await self.remote.get_agent_info()).id)

    async def finalize(self, result: ScenarioResult) -> None:
        """Tell the agent how the scenario went; record its own verdict, if it gives one.

        Cancellation: cancelling it records no verdict; the host may still finalize.
        """
        try:
            answer = await self.remote.finalize_simulation(
                provisional_success=result.passed, provisional_reason=result.failure or "")
        except (RemoteConnectionError, RemoteSessionClosedError):
            raise
        except RemoteSessionError as e:
            result.agent_error = e.message
            return
        if answer.HasField("user_verdict"):
            result.agent_verdict = (answer.user_verdict.success, answer.user_verdict.reason)


class RemoteDriver:
    """Drives the session behind a ``RemoteSession``."""

    def __init__(self, remote: RemoteSession) -> None:
        self.remote = remote

    async def run(self, text: str) -> TurnOutcome:
        """See :meth:`Driver.run` (cancelling it withdraws the turn on the host)."""
        try:
            result = await self.remote.run(text)
        except RemoteConnectionError:
            raise
        except RemoteSessionError as e:
            return TurnOutcome(error=e.message)
        return TurnOutcome(items=[ev.item for ev in result.events])

    async def agent_id(self) -> str:
        """See :meth:`Driver.agent_id` (cancelling it withdraws the request)."""
        return (await self.remote.get_agent_info()).id


class LocalDriver:
    """Drives an in-process ``AgentSession``."""

    def __init__(self, session: AgentSession) -> None:
        self.session = session

    async def run(self, text: str) -> TurnOutcome:
        """See :meth:`Driver.run` (cancelling it cancels ``session.run``)."""
        try:
            result = await self.session.run(user_input=text)
        except Exception as e:  # noqa: BLE001 - a failed turn is an outcome to score
            return TurnOutcome(error=str(e) or type(e).__name__)
        return TurnOutcome(items=[ev.item for ev in result.events])

    async def agent_id(self) -> str:
        """See :meth:`Driver.agent_id` (not a checkpoint: the id is at hand)."""
        return str(self.session.current_agent.id)


# --------------------------------------------------------------------------------------------
# Matching


def _describe(item: ChatItem) -> str:
    if isinstance(item, ChatMessage):
        return f"message {item.role} {json.dumps(item.text_content or '')[:80]}"
    if isinstance(item, FunctionCall):
        return f"function_call {item.name}({item.arguments})"
    if isinstance(item, FunctionCallOutput):
        return f"function_call_output {item.name} {json.dumps(item.output)[:80]}"
    if isinstance(item, AgentHandoff):
        return f"agent_handoff -> {item.new_agent_id}"
    return item.type


def _expected(exp: ExpectedItem) -> str:
    parts = [exp.type] + [f"{k}={v!r}" for k, v in msgspec.structs.asdict(exp).items()
                          if k != "type" and v is not None]
    return " ".join(parts)


def mismatch(exp: ExpectedItem, item: ChatItem) -> str | None:
    """Why ``item`` does not match ``exp`` (None when it does)."""
    if item.type != exp.type:
        return f"it is a {item.type}"
    if isinstance(item, ChatMessage):
        body = item.text_content or ""
        if exp.role is not None and item.role != exp.role:
            return f"its role is {item.role}"
    elif isinstance(item, FunctionCall):
        body = item.arguments
        if exp.arguments is not None:
            try:
                args = json.loads(item.arguments or "{}")
            except ValueError:
                return "its arguments are not JSON"
            wrong = {k: v for k, v in exp.arguments.items() if args.get(k, ...) != v}
            if wrong:
                return f"its arguments {item.arguments} lack {json.dumps(wrong)}"
    elif isinstance(item, FunctionCallOutput):
        body = item.output
        if exp.is_error is not None and item.is_error != exp.is_error:
            return f"its is_error is {item.is_error}"
    elif isinstance(item, AgentHandoff):
        body = ""
        if exp.new_agent is not None and item.new_agent_id != exp.new_agent:
            return f"it goes to {item.new_agent_id}"
    else:
        body = ""
    if exp.name is not None and getattr(item, "name", None) != exp.name:
        return f"its name is {getattr(item, 'name', None)}"
    if exp.text is not None and body != exp.text:
        return f"its text is {json.dumps(body)[:80]}"
    if exp.contains is not None and exp.contains.lower() not in body.lower():
        return f"its text {json.dumps(body)[:80]} lacks {exp.contains!r}"
    return None


def check_turn(turn: Turn, outcome: TurnOutcome) -> str | None:
    """Why ``outcome`` fails ``turn`` (None when it passes)."""
    if turn.expect_error is not None:
        if outcome.error is None:
            return (f"expected an error containing {turn.expect_error!r}, got "
                    f"{len(outcome.items)} item(s)")
        if turn.expect_error.lower() not in outcome.error.lower():
            return f"error {outcome.error!r} lacks {turn.expect_error!r}"
        return None
    if outcome.error is not None:
        return f"failed: {outcome.error}"
    if turn.expect is None:
        return None
    items = outcome.items
    if turn.match == "exact":
        for i, exp in enumerate(turn.expect):
            if i >= len(items):
                return f"item {i + 1}: expected {_expected(exp)}, got no more items"
            why = mismatch(exp, items[i])
            if why is not None:
                return f"item {i + 1}: expected {_expected(exp)}, but {why}"
        if len(items) > len(turn.expect):
            extra = ", ".join(_describe(it) for it in items[len(turn.expect):])
            return f"{len(items) - len(turn.expect)} unexpected item(s): {extra}"
        return None
    position = 0
    for exp in turn.expect:
        start = position
        while position < len(items) and mismatch(exp, items[position]) is not None:
            position += 1
        if position == len(items):
            same_type = [it for it in items[start:] if it.type == exp.type]
            if same_type:  # the nearest candidate says most about what went wrong
                return (f"expected {_expected(exp)} in order, but in the next {exp.type} "
                        f"{mismatch(exp, same_type[0])}")
            got = "; ".join(_describe(it) for it in items[start:]) or "no items"
            return f"expected {_expected(exp)} in order; got {got}"
        position += 1
    return None


# --------------------------------------------------------------------------------------------
# Running


@dataclass
class ScenarioResult:
    """How a scenario went: turns passed, the first failure, Trio time taken."""

    name: str
    turns: int
    turns_passed: int = 0
    failure: str | None = None
    duration: float = 0.0
    agent_verdict: tuple[bool, str] | None = None
    """The agent's own verdict from ``finalize_simulation`` (LiveKit protocol), if any."""
    agent_error: str | None = None
    """The error ``finalize_simulation`` answered with (the agent's end-of-simulation hook
    failed), if any."""

    @property
    def passed(self) -> bool:
        return self.failure is None


async def run_scenario(scenario: Scenario, driver: Driver) -> ScenarioResult:
    """Play one scenario through ``driver``; stops at the first failing turn.

    Cancellation: cancelling it cancels the turn in flight (a remote one is withdrawn).
    """
    started = trio.current_time()
    result = ScenarioResult(name=scenario.name, turns=len(scenario.turns))
    for number, turn in enumerate(scenario.turns, 1):
        why = check_turn(turn, await driver.run(turn.user))
        if why is not None:
            result.failure = f"turn {number}: {why}"
            break
        result.turns_passed += 1
    if result.failure is None and scenario.expect_agent is not None:
        agent = await driver.agent_id()
        if agent != scenario.expect_agent:
            result.failure = f"ended with agent {agent}, expected {scenario.expect_agent}"
    result.duration = trio.current_time() - started
    return result


SessionFactory = Callable[[], Any]
"""Returns ``(session, agent)``: a fresh, unentered AgentSession and the agent to start."""


@asynccontextmanager
async def local_driver(factory: SessionFactory) -> AsyncIterator[LocalDriver]:
    """A fresh in-process session from ``factory``, started, closed on exit.

    Cancellation: cancelling the block closes the session (as leaving ``async with session``).
    """
    session, agent = factory()
    async with session:
        await session.start(agent)
        yield LocalDriver(session)


async def run_scenarios(scenarios: Sequence[Scenario], *,
                        remote: RemoteSession | LkRemoteSession | None = None,
                        factory: SessionFactory | None = None) -> list[ScenarioResult]:
    """Play ``scenarios`` against a remote session (LiveKit's protocol or msgpack), or
    in-process against a fresh session from ``factory`` for each.

    Cancellation: cancelling it stops at the scenario in flight (see :func:`run_scenario`);
    the results so far are lost.
    """
    if (remote is None) == (factory is None):
        raise ValueError("give exactly one of remote= or factory=")
    results = []
    for scenario in scenarios:
        if isinstance(remote, RemoteSession):
            results.append(await run_scenario(scenario, RemoteDriver(remote)))
            continue
        if remote is not None:
            lk_driver = LkRemoteDriver(remote)
            result = await run_scenario(scenario, lk_driver)
            await lk_driver.finalize(result)
            results.append(result)
            continue
        assert factory is not None
        async with local_driver(factory) as driver:
            results.append(await run_scenario(scenario, driver))
    return results


def format_results(results: Sequence[ScenarioResult]) -> str:
    """A pass/fail table, one row per scenario, and a summary line."""
    width = max([len("scenario"), *(len(r.name) for r in results)])
    lines = [f"{'scenario':<{width}}  result  turns  detail"]
    for r in results:
        status = "PASS" if r.passed else "FAIL"
        detail = r.failure or ""
        if r.agent_verdict is not None:
            verdict = "success" if r.agent_verdict[0] else "failure"
            detail += (" " if detail else "") + f"(agent's verdict: {verdict}" + \
                (f": {r.agent_verdict[1]})" if r.agent_verdict[1] else ")")
        if r.agent_error is not None:
            detail += (" " if detail else "") + f"(agent's end-of-simulation hook: " \
                f"{r.agent_error})"
        lines.append(f"{r.name:<{width}}  {status:<6}  {r.turns_passed:>2}/{r.turns:<2}  "
                     f"{detail}".rstrip())
    passed = sum(r.passed for r in results)
    lines.append(f"{passed}/{len(results)} scenarios passed")
    return "\n".join(lines)
