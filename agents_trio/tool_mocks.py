"""LiveKit's ``mock_tools``: replace what some tools of an agent class do, for tests.

A mock replaces a tool's execution only: the LLM still sees the real tool (its name, schema
and description). The mock is called with the parameters of the real call it declares (a
subset of the tool's, the ``RunContext`` parameter included; with ``**kwargs``, all), and may
be sync or async; what it returns or raises is the tool's result or error.

Two forms, as LiveKit's:

- ``with mock_tools(MyAgent, {"lookup": fake_lookup}):`` the mocks live in a context variable
  set for the block, as LiveKit's: they reach the replies asked for inside it (``session.run``,
  ``generate_reply``, ``say``: a speech's task, and its tools' tasks, start with a copy of the
  context of the code that asked for it), not other tasks or sessions running meanwhile; blocks
  nest, the innermost wins for its class.
- ``mock_tools(MyAgent, {...}, session=session)``: the mocks of ``MyAgent`` on that session
  from now on (``{}`` removes them). The block form wins over it.

Mocks apply to agents of exactly that class (``type(agent) is MyAgent``), as in LiveKit.
"""

from __future__ import annotations

import contextvars
import inspect
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

__all__ = ["find_mock", "mock_tools", "run_mock"]

Mocks = dict[str, Callable[..., Any]]

#: the mocks of the enclosing blocks, by agent class (a new dict per block)
_scoped: contextvars.ContextVar[dict[type, Mocks]] = contextvars.ContextVar(
    "agents_trio_mock_tools")
_by_session: weakref.WeakKeyDictionary[Any, dict[type, Mocks]] = weakref.WeakKeyDictionary()


def mock_tools(agent: type, mocks: Mapping[str, Callable[..., Any]], *,
               session: object | None = None) -> AbstractContextManager[None] | None:
    """Mock tools of the agent class ``agent`` by name (see the module).

    Returns:
        Without ``session``, a context manager whose block the mocks apply in; with it, None.

    A name the class does not define is accepted, as in LiveKit: the agent may get the
    tool per instance (``tools=[...]``) or later (``update_tools``).

    Raises:
        TypeError: ``agent`` is not a class, ``mocks`` is not a dict of tool names, or a
            mock is not callable (LiveKit fails at the tool's call on the first two).
    """
    if not isinstance(agent, type):
        raise TypeError(f"mock_tools takes the agent's class, got {agent!r}")
    if not isinstance(mocks, Mapping):
        raise TypeError("mock_tools: mocks must be a dict of tool names to callables, got "
                        f"{mocks!r}")
    for name, mock in mocks.items():
        if not isinstance(name, str):
            raise TypeError(f"mock_tools: mocks must be keyed by tool name (a str), got "
                            f"{name!r}")
        if not callable(mock):
            raise TypeError(f"the mock of {name!r} is not callable: {mock!r}")
    if session is not None:
        _by_session.setdefault(session, {})[agent] = dict(mocks)
        return None
    return _scope(agent, dict(mocks))


@contextmanager
def _scope(agent: type, mocks: Mocks) -> Iterator[None]:
    token = _scoped.set({**_scoped.get({}), agent: mocks})
    try:
        yield
    finally:
        _scoped.reset(token)


def find_mock(session: object, agent: object, tool_name: str) -> Callable[..., Any] | None:
    """The mock of ``tool_name`` for ``agent`` (an instance) in ``session``, or None: the
    enclosing block's (in the calling task's context) first, then the session's."""
    agent_type = type(agent)
    scoped = _scoped.get({}).get(agent_type, {})
    if tool_name in scoped:
        return scoped[tool_name]
    return _by_session.get(session, {}).get(agent_type, {}).get(tool_name)


async def run_mock(mock: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:  # noqa: ANN401
    """Call ``mock`` with the arguments of ``kwargs`` it declares; await what it returns if
    it is awaitable.

    Cancellation: cancels the mock (as the tool it stands for).
    """
    params = inspect.signature(mock).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        given = dict(kwargs)
    else:
        names = {p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                       inspect.Parameter.POSITIONAL_OR_KEYWORD)}
        given = {k: v for k, v in kwargs.items() if k in names}
    result = mock(**given)
    if inspect.isawaitable(result):
        result = await result
    return result
