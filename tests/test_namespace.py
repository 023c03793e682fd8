"""LiveKit's names at LiveKit's paths: ``livekit.agents.X`` is ``agents_trio.X``.

Driven by the contract, ``livekit-api-surface.md`` (a copy is kept in ``tests/data`` so the
suite runs anywhere): every name listed there either resolves at its mapped path (and at
every "also at" path) or is in ``MISSING``; every constructor or function that resolves
accepts LiveKit's parameter names (compared with ``inspect.signature`` against the installed
livekit-agents) or its gap is in ``PARAMETER_GAPS``; enums have LiveKit's members and values;
events and chat items have LiveKit's ``type``. The two lists are exact: implementing a name
makes the test fail until the name leaves the list (and docs/livekit-names.md).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import re
import typing
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
import trio

import agents_trio
from agents_trio import (Agent, AgentSession, AgentTask, APIConnectionError, APIError,
                         APIStatusError, APITimeoutError, CloseReason, FunctionToolCall,
                         RunContext, function_tool, get_job_context)
from agents_trio.testing import FakeActions, FakeLLM, open_fake_room

lk_agents = pytest.importorskip("livekit.agents")

ROOT = Path(__file__).resolve().parent.parent
SURFACE = Path(__file__).resolve().parent / "data" / "livekit-api-surface.md"
DOCS = ROOT / "docs" / "livekit-names.md"


@dataclass(frozen=True)
class Entry:
    path: str          # "" for the top level, ".llm", ".beta.workflows", …
    name: str
    kind: str          # class, function, dataclass, pydantic, enum, typeddict, alias, module…
    received_only: bool  # built by the library: constructor parameters not specified
    type_value: str | None
    also_at: tuple[tuple[str, str], ...]


def _entries() -> list[Entry]:
    text = SURFACE.read_text().split("## Also in the contract")[0]
    parts = re.split(r"^## `livekit\.agents(\S*?)` → .*$", text, flags=re.M)
    entries = []
    for path, body in zip(parts[1::2], parts[2::2]):
        for m in re.finditer(r"^- \*\*(\w+)\*\* \(([^)]*)\)(.*)$", body, re.M):
            name, kind, rest = m.groups()
            also = (tuple(re.findall(r"`livekit\.agents(\.[\w.]+)\.(\w+)`",
                                     rest.split("also at", 1)[1]))
                    if "also at" in rest else ())
            type_value = re.search(r"`type` = `(\w+)`", rest)
            entries.append(Entry(path, name, kind.split(",")[0], "handed to you" in rest,
                                 type_value.group(1) if type_value else None, also))
    return entries


ENTRIES = _entries()

#: names of the contract absent here, as "path:name" ("" path = top level). Exact.
MISSING = frozenset({
    # top level and voice
    # llm
    # metrics
    # stt, tts, tokenize, utils
})

#: the protocols a model author implements: Trio-native, so LiveKit's constructor parameters
#: (``capabilities=`` …) do not apply
PROTOCOLS = frozenset({".llm:LLM", ".llm:RealtimeModel", ".stt:STT", ".tts:TTS", ".vad:VAD"})

#: LiveKit parameter names (or enum members) not accepted yet, per "path:name". Exact.
PARAMETER_GAPS: dict[str, list[str]] = {
    ":Agent": ["expressive"],
    ":AgentSession": [
        "expressive", "video_sampler", "ivr_detection", "conn_options", "loop"],
    ":RoomIO": ["agent_session", "participant", "input_options", "output_options"],
}


#: LiveKit methods (``name()``) and fields of a resolving class absent here. Exact. Not
#: compared: the protocols (what a model author implements is Trio-native), instance
#: attributes of plain classes, and the parameters of methods.
MEMBER_GAPS: dict[str, list[str]] = {
    ":AgentServer": ["run()", "aclose()"],
    ":RoomIO": ["start()", "aclose()", "set_participant()", "unset_participant()",
                "wait_for_ready()"],
    ".stt:FallbackAdapter": ["recognize()"],
    ".tts:FallbackAdapter": ["synthesize()"],
    ".tts:StreamAdapter": ["synthesize()", "aclose()", "once()", "on()", "off()"],
    ".stt:StreamAdapter": ["aclose()", "once()", "on()", "off()"],
    ".inference:LLM": ["update_options()", "once()", "on()", "off()"],
    ".inference:STT": ["update_options()", "recognize()", "once()", "on()", "off()"],
    ".inference:TTS": ["update_options()", "synthesize()", "once()", "on()", "off()"],
    ".inference:VAD": ["update_options()", "once()", "on()", "off()"],
    ".inference:TurnDetector": ["once()", "on()", "off()"],
}


def _members() -> dict[str, tuple[list[str], list[str]]]:
    """"path:name" → (LiveKit's listed methods, its listed fields), from the surface file."""
    text = SURFACE.read_text().split("## Also in the contract")[0]
    parts = re.split(r"^## `livekit\.agents(\S*?)` → .*$", text, flags=re.M)
    members = {}
    for section, body in zip(parts[1::2], parts[2::2]):
        for block in re.split(r"^(?=- \*\*)", body, flags=re.M):
            m = re.match(r"- \*\*(\w+)\*\*", block)
            if not m:
                continue
            methods = re.search(r"^  - methods: (.*)$", block, re.M)
            fields = re.search(r"^  - fields: (.*)$", block, re.M)
            members[_key(section, m.group(1))] = (
                re.findall(r"(?:^|; )(?:async |node )?(\w+)\(", methods.group(1))
                if methods else [],
                fields.group(1).split(", ") if fields else [])
    return members


def _ours(path: str, name: str) -> object | None:
    try:
        module = importlib.import_module("agents_trio" + path)
    except ImportError:
        return None
    return getattr(module, name, None)


def _theirs(path: str, name: str) -> object:
    obj: object = lk_agents
    for part in filter(None, path.split(".")):
        module_name = f"{getattr(obj, '__name__', '')}.{part}"
        obj = getattr(obj, part, None) or importlib.import_module(module_name)
    return getattr(obj, name)


def _key(path: str, name: str) -> str:
    return f"{path}:{name}"


def _parameter_gap(entry: Entry) -> list[str] | None:
    """LiveKit's parameter names (enum members) the object here does not accept; None when
    not compared (a protocol, a type alias, a module, an object the library builds)."""
    key = _key(entry.path, entry.name)
    ours = _ours(entry.path, entry.name)
    if (ours is None or key in PROTOCOLS or entry.received_only
            or entry.kind in ("alias", "module", "typeddict")):
        return None
    theirs = _theirs(entry.path, entry.name)
    if isinstance(theirs, type) and issubclass(theirs, enum.Enum):
        assert isinstance(ours, type) and issubclass(ours, enum.Enum), key
        mine = {m.name: m.value for m in ours}
        return [m.name for m in theirs if mine.get(m.name) != m.value]
    assert callable(ours), key
    fields = getattr(theirs, "model_fields", None)
    if isinstance(fields, dict):  # a pydantic model: its signature is built lazily (**data)
        wanted = list(fields)
    else:
        wanted = [n for n, p in inspect.signature(theirs).parameters.items()
                  if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    try:
        accepted = inspect.signature(ours).parameters
    except ValueError:  # an exception class without __init__ of its own: Exception(*args)
        return wanted
    if any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        return []
    return [n for n in wanted if n not in accepted]


def test_the_surface_copy_is_parsed() -> None:
    assert len(ENTRIES) > 150
    assert Entry("", "CloseReason", "enum", False, None,
                 ((".voice", "CloseReason"),)) in ENTRIES


def test_every_name_resolves_at_its_livekit_path_or_is_listed_missing() -> None:
    absent = {_key(p, n) for e in ENTRIES
              for p, n in ((e.path, e.name), *e.also_at) if _ours(p, n) is None}
    assert sorted(absent - MISSING) == [], "not exported (or add to MISSING and the docs)"
    assert sorted(MISSING - absent) == [], "exported now: remove from MISSING and the docs"


def test_also_at_paths_are_the_same_object() -> None:
    for e in ENTRIES:
        first = _ours(e.path, e.name)
        for p, n in e.also_at:
            other = _ours(p, n)
            if first is not None and other is not None:
                assert other is first, _key(p, n)


def test_livekit_parameter_names_are_accepted_or_listed() -> None:
    gaps = {}
    for e in ENTRIES:
        gap = _parameter_gap(e)
        if gap:
            gaps[_key(e.path, e.name)] = gap
    assert gaps == PARAMETER_GAPS


def test_livekit_methods_and_fields_are_present_or_listed() -> None:
    gaps = {}
    for key, (methods, fields) in _members().items():
        path, name = key.split(":")
        ours = _ours(path, name)
        if not isinstance(ours, type) or key in PROTOCOLS:
            continue
        struct_fields: set[str] | None = None
        if issubclass(ours, msgspec.Struct):
            struct_fields = set(ours.__struct_fields__)
        elif dataclasses.is_dataclass(ours):
            struct_fields = {f.name for f in dataclasses.fields(ours)}
        missing = [f"{m}()" for m in methods if not hasattr(ours, m)]
        if struct_fields is not None:
            missing += [f for f in fields if f not in struct_fields and not hasattr(ours, f)]
        if missing:
            gaps[key] = missing
    assert gaps == MEMBER_GAPS


def test_the_base_classes_of_model_authors_are_trio_native_protocols() -> None:
    for key in PROTOCOLS:
        path, name = key.split(":")
        ours = _ours(path, name)
        assert getattr(ours, "_is_protocol", False), key


def test_events_and_items_have_livekits_type() -> None:
    for e in ENTRIES:
        ours = _ours(e.path, e.name)
        if e.type_value is None or ours is None:
            continue
        param = inspect.signature(ours).parameters.get("type")  # type: ignore[arg-type]
        assert param is not None and param.default == e.type_value, _key(e.path, e.name)


def test_metrics_base_and_the_namespaces_are_importable() -> None:
    from agents_trio.metrics import base
    for name in ("LLMMetrics", "STTMetrics", "TTSMetrics", "EOUMetrics", "VADMetrics"):
        assert getattr(base, name) is getattr(agents_trio.metrics, name)
        assert name in base.__all__
    for module in ("llm", "voice", "metrics", "room_io", "stt", "tts", "vad", "beta",
                   "beta.workflows", "job"):
        imported = importlib.import_module(f"agents_trio.{module}")
        for name in getattr(imported, "__all__", ()):
            assert hasattr(imported, name), f"agents_trio.{module}.{name}"


#: what the page's list says once nothing is absent
NONE_ABSENT = "None: every name of the contract is here."


def absent_names_markdown() -> str:
    """The page's list of absent names, one bullet per module path, made from ``MISSING``."""
    by_path: dict[str, list[str]] = {}
    for key in MISSING:
        path, name = key.split(":")
        by_path.setdefault(path, []).append(name)
    order = sorted(by_path, key=lambda p: (p != "", p))
    return "\n".join(f"- `agents_trio{p}`: " + ", ".join(f"`{n}`" for n in sorted(by_path[p]))
                     for p in order)


def test_the_docs_page_lists_exactly_the_absent_names() -> None:
    page = DOCS.read_text()
    block = page.split("Absent names", 1)[1].split("\n\n", 2)[1]
    expected = absent_names_markdown() or NONE_ABSENT
    assert block == expected, (
        "docs/livekit-names.md's absent names are not MISSING's: replace the list with\n"
        + absent_names_markdown())


def test_the_docs_page_names_every_missing_name_and_gap() -> None:
    page = DOCS.read_text()
    for key in MISSING:
        path, name = key.split(":")
        assert f"`{name}`" in page, key
    for key, params in (*PARAMETER_GAPS.items(), *MEMBER_GAPS.items()):
        for param in params:
            assert f"`{param}`" in page, (key, param)


# -- CloseReason and the APIError family ------------------------------------------------------

def test_close_reason_is_livekits_enum() -> None:
    from livekit.agents.voice.events import CloseReason as LKCloseReason
    assert [(m.name, m.value) for m in CloseReason] == [(m.name, m.value) for m in LKCloseReason]
    assert CloseReason.ERROR == "error" and f"{CloseReason.ERROR}" == "error"
    assert str(CloseReason.USER_INITIATED) == "user_initiated"


@pytest.mark.parametrize("args, kwargs", [
    (("bad request",), {"status_code": 400, "request_id": "r1", "body": {"e": 1}}),
    (("overloaded",), {"status_code": 429}),
    (("server",), {"status_code": 503, "retryable": False}),
    (("forbidden",), {"status_code": 403, "retryable": True}),
    (("plain",), {}),
])
def test_api_status_error_behaves_as_livekits(args: tuple[str], kwargs: dict[str, object]
                                              ) -> None:
    ours, theirs = APIStatusError(*args, **kwargs), lk_agents.APIStatusError(*args, **kwargs)
    for attr in ("message", "status_code", "request_id", "body", "retryable"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert str(ours) == str(theirs)
    assert isinstance(ours, APIError)


def test_connection_and_timeout_errors_behave_as_livekits() -> None:
    for ours_cls, theirs_cls in ((APIConnectionError, lk_agents.APIConnectionError),
                                 (APITimeoutError, lk_agents.APITimeoutError)):
        ours, theirs = ours_cls(), theirs_cls()
        assert (ours.message, ours.body, ours.retryable) == (theirs.message, theirs.body,
                                                             theirs.retryable)
        assert ours_cls("x", retryable=False).retryable is False
    assert issubclass(APITimeoutError, APIConnectionError)


def test_api_error_takes_livekits_parameters_and_keeps_recoverable() -> None:
    error = APIError("down", body={"code": 1}, retryable=True)
    assert (error.message, error.body, error.retryable, error.recoverable) == (
        "down", {"code": 1}, True, True)
    assert APIError("down").retryable is False  # this runtime's default: see the docs
    assert APIError("busy", recoverable=True).retryable is True


def test_api_connect_options_are_livekits() -> None:
    from agents_trio import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
    theirs = lk_agents.APIConnectOptions()
    assert (DEFAULT_API_CONNECT_OPTIONS.max_retry, DEFAULT_API_CONNECT_OPTIONS.retry_interval,
            DEFAULT_API_CONNECT_OPTIONS.timeout) == (theirs.max_retry, theirs.retry_interval,
                                                     theirs.timeout)
    assert APIConnectOptions(max_retry=0, retry_interval=0.5, timeout=3).timeout == 3
    with pytest.raises(ValueError):
        APIConnectOptions(timeout=-1)


# -- generics ---------------------------------------------------------------------------------

@dataclass
class UserData:
    name: str
    visits: int = 0


class Greeter(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Greet the user by name.")

    @function_tool
    async def remember_visit(self, ctx: RunContext[UserData]) -> str:
        """Count this visit."""
        ctx.userdata.visits += 1
        return f"{ctx.userdata.name} visited {ctx.userdata.visits} time(s)"


def test_generic_classes_can_be_parametrised() -> None:
    session = AgentSession[UserData](userdata=UserData(name="Ada"))
    assert session.userdata.name == "Ada"
    assert typing.get_origin(AgentSession[UserData]) is AgentSession
    assert typing.get_origin(RunContext[UserData]) is RunContext
    assert typing.get_origin(AgentTask[int]) is AgentTask


async def test_a_tool_annotated_run_context_of_t_gets_the_sessions_userdata(
        autojump_clock: object) -> None:
    actions = FakeActions()
    actions.add_llm("", tool_calls=[FunctionToolCall(name="remember_visit", arguments="{}",
                                                     call_id="c1")], input="hi")
    actions.add_llm("Hello Ada!", input="Ada visited 1 time(s)")
    async with AgentSession[UserData](llm=FakeLLM(actions.llm_responses),
                                      userdata=UserData(name="Ada")) as session:
        await session.start(Greeter())
        with trio.fail_after(10):
            result = await session.run(user_input="hi")
        result.expect.next_event().is_function_call(name="remember_visit")
        result.expect.next_event().is_function_call_output(output="Ada visited 1 time(s)")
        result.expect.next_event().is_message(role="assistant")
        assert session.userdata.visits == 1


# -- session.on and get_job_context -----------------------------------------------------------

def test_session_on_accepts_livekits_event_names_and_rejects_unknown_ones() -> None:
    text = SURFACE.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("Session event names"))
    names = re.findall(r"`(\w+)`", line.split(":", 1)[1])
    assert len(names) == 15
    session = AgentSession()
    for name in names:
        session.on(name, print)
        session.off(name, print)
    with pytest.raises(ValueError, match="unknown session event 'user_speech_committed'"):
        session.on("user_speech_committed", print)
    with pytest.raises(ValueError):
        session.on("agent_state_change")(print)


async def test_get_job_context_inside_and_outside_a_job() -> None:
    with pytest.raises(RuntimeError, match="no job context"):
        get_job_context()
    assert get_job_context(required=False) is None
    seen: list[object] = []

    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        seen.append(get_job_context())

        async def child() -> None:
            seen.append(get_job_context(required=False))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)

    await agents_trio.run_job(entrypoint, url="wss://fake", token="t",
                              open_room_fn=open_fake_room)
    assert len(seen) == 2 and seen[0] is seen[1] and seen[0] is not None
    assert get_job_context(required=False) is None
