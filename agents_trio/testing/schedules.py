"""Conversation schedules: a whole adversarial conversation as plain data.

A :class:`Schedule` says what the user does and when (speech, typed text, ``session.run``,
interruptions), what the LLM answers to each input (text, tool calls, and how each call of
*your* tools behaves: latency, failure, hang), which model faults happen (LLM, TTS, STT, VAD,
audio output), and when the session is closed. :func:`~agents_trio.testing.run_conversation`
plays it against an agent on Trio's virtual clock, and
:func:`~agents_trio.testing.check_conversation` checks the invariants afterwards. Hypothesis
strategies that draw schedules live in :mod:`agents_trio.testing.strategies`.

Times are seconds from the moment the agent started (``session.start`` returned).
"""

from __future__ import annotations

from typing import Literal, Union

import msgspec

FaultKind = Literal["error", "api_error", "recoverable_api_error", "hang"]
"""``error``: a ``RuntimeError``; ``api_error``: an unrecoverable ``APIError``;
``recoverable_api_error``: a recoverable ``APIError``; ``hang``: the call never returns (until
it is cancelled)."""

ToolOutcomeKind = Literal["ok", "raise_before", "raise_after", "tool_error", "hang"]
"""What happens around one execution of your tool: ``ok`` runs it; ``raise_before`` raises a
``RuntimeError`` instead of running it; ``raise_after`` runs it, then raises (the side effect
happened, the answer was lost); ``tool_error`` raises ``ToolError`` instead of running it;
``hang`` waits forever instead of running it (cancelled by close)."""


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    """A model failure at the ``at``-th chunk (LLM: text chunk; TTS: audio frame)."""

    kind: FaultKind
    at: int = 0


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A call of one of the agent's tools, made by the LLM, and how its execution behaves.

    Attributes:
        name: The tool's name (a name the agent lacks gets the runtime's error output).
        arguments: The call's arguments, a JSON object.
        latency: Seconds before the tool runs (a slow network in front of your tool).
        outcome: See :data:`ToolOutcomeKind`.
        shield: Seconds the execution then spends shielded from cancellation (a tool that
            protects a commit); close waits for it.
        reply: What the LLM answers to this call's output (None: a short default reply).
    """

    name: str
    arguments: str = "{}"
    latency: float = 0.0
    outcome: ToolOutcomeKind = "ok"
    shield: float = 0.0
    reply: Reply | None = None


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """What the LLM streams for one request, and how the TTS speaks it.

    The streamed text is ``"r<n> " + text`` where ``<n>`` numbers the LLM requests of the run,
    so every assistant message in the history says which request produced it.

    Attributes:
        text: The words of the reply.
        ttft: Seconds to the first text chunk.
        duration: Seconds to the end of the stream (tool calls come at the end).
        calls: Tool calls made at the end of the stream.
        audio: Seconds of speech the TTS makes of the text.
        tts_ttfb: Seconds from the end of the text to the first audio frame.
        llm_fault: The LLM stream fails at this chunk.
        tts_fault: The TTS stream fails at this frame.
    """

    text: str = "okay."
    ttft: float = 0.1
    duration: float = 0.3
    calls: tuple[ToolCall, ...] = ()
    audio: float = 1.0
    tts_ttfb: float = 0.1
    llm_fault: Fault | None = None
    tts_fault: Fault | None = None


DEFAULT_REPLY = Reply()


class UserSpeech(msgspec.Struct, frozen=True, kw_only=True, tag="speech"):
    """The user speaks from ``at`` for ``duration`` seconds. The VAD hears it; the STT gives a
    final ``transcript`` ``stt_delay`` after it ends ("" is noise that only the VAD hears)."""

    at: float
    duration: float
    transcript: str = ""
    stt_delay: float = 0.2
    reply: Reply = DEFAULT_REPLY


class TextInput(msgspec.Struct, frozen=True, kw_only=True, tag="text"):
    """The user types ``text`` at ``at``: ``session.interrupt()`` (as LiveKit's text input
    does), then ``session.generate_reply(user_input=text)``."""

    at: float
    text: str
    reply: Reply = DEFAULT_REPLY


class RunInput(msgspec.Struct, frozen=True, kw_only=True, tag="run"):
    """A test driver calls ``await session.run(user_input=text)`` at ``at``."""

    at: float
    text: str
    reply: Reply = DEFAULT_REPLY


class Interrupt(msgspec.Struct, frozen=True, kw_only=True, tag="interrupt"):
    """``session.interrupt(force=force)`` at ``at``."""

    at: float
    force: bool = False


Action = Union[UserSpeech, TextInput, RunInput, Interrupt]


class StreamFault(msgspec.Struct, frozen=True, kw_only=True, tag="stream"):
    """The ``model``'s stream (``"stt"`` or ``"vad"``) raises while it is read, at ``at``."""

    model: Literal["stt", "vad"]
    at: float
    kind: FaultKind = "api_error"


class PushFault(msgspec.Struct, frozen=True, kw_only=True, tag="push"):
    """``push_frame`` of the ``model``'s stream raises for the first frame pushed at or after
    ``at`` (the runner pushes a frame at ``at``)."""

    model: Literal["stt", "vad"]
    at: float
    kind: FaultKind = "error"


class OutputFault(msgspec.Struct, frozen=True, kw_only=True, tag="output"):
    """The audio output's ``capture_frame`` fails (or blocks, for ``hang``) for the first
    frame captured at or after ``at``."""

    at: float
    kind: FaultKind = "hang"


InputFault = Union[StreamFault, PushFault, OutputFault]


class Schedule(msgspec.Struct, frozen=True, kw_only=True):
    """One conversation: the user's actions, input-side faults, and the close.

    Attributes:
        actions: What the user (or a test driver) does, in time order.
        faults: STT, VAD and audio-output faults.
        close_at: When ``session.aclose()`` is called.
        greeting: What the LLM answers to requests that are not a user input or a tool
            output (``generate_reply(instructions=...)`` in ``on_enter``, for example).
        audio_output: The agent speaks through an audio output (False: text only, the
            reply is "played" as its text streams).
        can_pause_audio: The audio output can pause (false-interruption resume is on).
        preemptive: Preemptive generation is on.
        close_grace: The session's ``close_grace``.
        goodbye: What the LLM answers to ``generate_reply(instructions=...)`` whose
            instructions mention "goodbye" (an agent's farewell in ``on_exit``); None: the
            ``greeting``.
    """

    actions: tuple[Action, ...] = ()
    faults: tuple[InputFault, ...] = ()
    close_at: float = 10.0
    greeting: Reply = DEFAULT_REPLY
    audio_output: bool = True
    can_pause_audio: bool = False
    preemptive: bool = True
    close_grace: float = 5.0
    goodbye: Reply | None = None

    def __post_init__(self) -> None:
        times = [a.at for a in self.actions]
        if times != sorted(times):
            raise ValueError("schedule actions must be in time order")
        if any(t < 0 for t in times) or self.close_at < 0:
            raise ValueError("schedule times are seconds from the start, not negative")
        if times and self.close_at < times[-1]:
            raise ValueError(f"close_at={self.close_at} is before the last action "
                             f"(at {times[-1]})")
        for a in self.actions:
            if isinstance(a, UserSpeech) and a.duration <= 0:
                raise ValueError(f"a user speech must last more than 0 s: {a!r}")

    def inputs(self) -> list[UserSpeech | TextInput | RunInput]:
        """The actions that carry words (speech with a transcript, text, runs)."""
        return [a for a in self.actions if isinstance(a, (TextInput, RunInput))
                or (isinstance(a, UserSpeech) and a.transcript)]

    def reply_for(self, text: str) -> Reply | None:
        """The planned reply to the user input whose words are exactly ``text``."""
        for a in self.inputs():
            words = a.transcript if isinstance(a, UserSpeech) else a.text
            if words.strip() == text.strip():
                return a.reply
        return None

    def describe(self) -> str:
        """One line per action and fault, by time: for failure messages."""
        rows: list[tuple[float, str]] = [(a.at, _describe(a)) for a in self.actions]
        rows += [(f.at, repr(f)) for f in self.faults]
        rows.append((self.close_at, "close"))
        if self.goodbye is not None:
            rows.append((self.close_at, f"(goodbye reply: {_describe_reply(self.goodbye)})"))
        return "\n".join(f"{t:7.2f} {text}" for t, text in sorted(rows, key=lambda r: r[0]))


def _describe(action: Action) -> str:
    if isinstance(action, UserSpeech):
        what = repr(action.transcript) if action.transcript else "noise"
        return f"user speaks {what} for {action.duration:g} s ({_describe_reply(action.reply)})"
    if isinstance(action, (TextInput, RunInput)):
        verb = "types" if isinstance(action, TextInput) else "runs"
        return f"user {verb} {action.text!r} ({_describe_reply(action.reply)})"
    return f"interrupt(force={action.force})"


def _describe_reply(reply: Reply) -> str:
    parts = [f"reply {reply.text!r}"]
    for call in reply.calls:
        extra = [f"+{call.latency:g}s"] if call.latency else []
        if call.outcome != "ok":
            extra.append(call.outcome)
        if call.shield:
            extra.append(f"shield {call.shield:g}s")
        parts.append(f"calls {call.name}({call.arguments}) {' '.join(extra)}".rstrip())
    if reply.llm_fault is not None:
        parts.append(f"LLM {reply.llm_fault.kind} at chunk {reply.llm_fault.at}")
    if reply.tts_fault is not None:
        parts.append(f"TTS {reply.tts_fault.kind} at frame {reply.tts_fault.at}")
    return ", ".join(parts)
