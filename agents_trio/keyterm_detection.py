"""The session's STT context at work: keyterms applied to the STT, found by an LLM as the
conversation goes, and conversation turns forwarded to an STT that reads them.

:class:`STTContext` belongs to the session and outlives handoffs: each activity binds its
STT with :meth:`STTContext.bind`, and the effective keyterms (static ones, then confirmed
detected ones) are applied to it at once. With detection on, every ``turn_interval``-th
non-empty user message starts a pass over a snapshot of the history; the pass asks the
detection LLM for one ``record_keyterms`` call listing terms to hold ``pending``, to
``confirm`` (applied) and to ``remove``. Only confirmed terms reach the STT; a pending term
not confirmed within three passes is forgotten, and beyond ``max_keyterms`` the oldest
confirmed terms go first — LiveKit's rules.

One pass at a time, structurally: passes are handed over an unbuffered channel to the one
task that runs them (:meth:`STTContext.run`, in the session's nursery), so a turn that comes
while a pass is running finds no taker and starts none. A pass taking longer than
``timeout`` is dropped; one that fails is logged; either way the terms stay as they were.
Closing the session cancels the pass in progress.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import trio

from .chat import ChatContext, ChatMessage
from .events import ConversationItemAddedEvent, LLMMetrics
from .model_resolution import resolve_model
from .models import LLM, CompletionUsage, FunctionToolCall
from .stt_context import ResolvedSTTContext, accepts_keyterms, reads_conversation
from .tools import function_tool
from .usage import model_label, model_metadata

__all__ = ["DEFAULT_DETECTION_MODEL", "STTContext", "apply_pass", "detect_keyterms"]

logger = logging.getLogger("agents_trio")

#: the model LiveKit's detection uses when ``keyterm_detection`` names none (its gateway)
DEFAULT_DETECTION_MODEL = "google/gemma-4-31b-it"
#: passes a pending term may wait for confirmation
PENDING_PASSES = 3
#: the most recent user/assistant messages a pass reads
TRANSCRIPT_MESSAGES = 12

DETECTION_INSTRUCTIONS = """\
You keep a short list of keyterms for a speech recognizer. A keyterm is an unusual word \
whose spelling the recognizer should prefer: a person's or company's name, a place, a \
product, a piece of jargon. Every turn you answer with exactly one `record_keyterms` call.

Be conservative. A misspelled keyterm makes recognition worse for the rest of the call and \
cannot be taken back, so add nothing you are not sure of; an empty call is a good answer.

How to read the transcript: USER lines come from the recognizer and are often wrong, and the \
same mistake tends to come back, so seeing a spelling twice proves nothing. ASSISTANT lines \
were written by the agent: its confident use of its own names (its company, colleagues, \
places) is reliable, but repeating what the user seemed to say, or sounding unsure, is not.

- `pending`: new distinctive terms you noticed but cannot vouch for yet.
- `confirm`: pending terms that are now backed by one of: the user spelling the word letter \
by letter and the assistant accepting it without doubt (confirm exactly those letters); \
the assistant using that exact spelling confidently itself; the user explicitly correcting \
a spelling ("not X, it is Y"). If the assistant says it may have the spelling wrong, keep \
the term pending even if the user agrees.
- `remove`: only a spelling the user has just corrected. Applied terms otherwise stay.

Never list ordinary words, filler, half words cut off by an interruption, a name with a \
common word stuck to it, or a word that merely sounds like a term already applied. Report \
changes only: do not repeat terms that are already applied."""


@function_tool(name="record_keyterms")
async def _record_keyterms(pending: list[str], confirm: list[str], remove: list[str]) -> None:
    """Record this turn's changes to the recognizer's keyterms.

    Args:
        pending: Distinctive terms noticed but not yet trustworthy (kept, not applied).
        confirm: Pending terms the conversation now backs up (applied to the recognizer).
        remove: Spellings the user has just corrected (no longer applied).
    """
    # the tool only gives the model a schema to answer with; it is never executed


class STTContext:
    """The keyterm state of one session and what feeds it (see the module docstring).

    Args:
        options: The session's resolved ``stt_context_options``.
        history: The session's conversation history (read when a pass starts).
        emit_metrics: Where each finished pass's ``LLMMetrics`` go (the session's
            ``metrics_collected`` and usage, as LiveKit forwards the detection LLM's).

    Raises:
        TypeError, ValueError: ``keyterm_detection``'s ``llm`` is not an LLM (as
            ``AgentSession(llm=...)``).
    """

    def __init__(self, options: ResolvedSTTContext, history: Callable[[], ChatContext],
                 emit_metrics: Callable[[LLMMetrics], object] | None = None) -> None:
        detection = options.detection
        self.options = options
        self._history = history
        self._emit_metrics = emit_metrics
        self._static = list(options.keyterms)
        self._detected: list[str] = []  # confirmed, oldest first
        self._pending: dict[str, int] = {}  # term -> the pass that first saw it
        self._passes = 0
        self._llm: LLM | None = resolve_model(  # type: ignore[assignment]
            "AgentSession(stt_context_options['keyterm_detection'])", "llm", detection.llm)
        self._instructions = detection.instructions or DETECTION_INSTRUCTIONS
        self._stt: object = None
        self._detecting = False
        self._turns = 0
        self._unsupported_warned = False
        # made by run(), which a session starts only when detection is enabled
        self._pass_send: trio.MemorySendChannel[ChatContext] | None = None

    @property
    def keyterms(self) -> list[str]:
        """What the STT is biased with: the static terms, then the confirmed detected ones."""
        return list(dict.fromkeys([*self._static, *self._detected]))

    @property
    def pending_keyterms(self) -> list[str]:
        """Detected terms waiting for confirmation (not applied)."""
        return list(self._pending)

    def set_static_keyterms(self, terms: list[str]) -> None:
        """Replace the static terms (``session.update_options(keyterms=...)``); detected terms
        stay. Applied to the bound STT at once."""
        self._static = list(dict.fromkeys(term for term in terms if term))
        self._apply()

    def bind(self, stt: object) -> None:
        """Make ``stt`` (the starting activity's) the one that gets keyterms and turns, and
        apply the current keyterms to it. Detection runs for it when enabled and it accepts
        keyterms; the user-turn count starts over, as in LiveKit."""
        changed = stt is not self._stt
        self._stt = stt
        if changed and self.keyterms:
            self._apply()
        self._turns = 0
        self._detecting = False
        if not self.options.detection.enabled or stt is None:
            return
        if not accepts_keyterms(stt):
            logger.warning("keyterm detection is enabled but the STT %r does not accept "
                           "keyterms; detection is off for it", stt)
            return
        if self._llm is None:
            self._llm = _default_detection_llm()
            if self._llm is None:
                return
        self._detecting = True

    def swap_stt(self, stt: object) -> None:
        """The running agent changed its STT: the current keyterms go to ``stt``, and
        detection, turn count included, carries on (LiveKit's ``swap_stt``)."""
        if stt is self._stt:
            return
        self._stt = stt
        if stt is not None and self.keyterms:
            self._apply()

    def on_item_added(self, event: ConversationItemAddedEvent) -> None:
        """The session's ``conversation_item_added`` listener: forwards the turn to an STT
        that reads turns, and starts a detection pass every ``turn_interval`` user turns
        unless one is running."""
        if self.options.forward_chat_context and reads_conversation(self._stt):
            try:
                self._stt.push_conversation_item(event)  # type: ignore[attr-defined]
            except Exception:
                logger.exception("the STT failed to take a conversation item")
        item = event.item
        if not (self._detecting and isinstance(item, ChatMessage) and item.role == "user"
                and item.text_content):
            return
        self._turns += 1
        if self._turns % self.options.detection.turn_interval or self._pass_send is None:
            return  # not this turn, or the runner is not started
        snapshot = self._history().copy(  # later turns must not change what the pass reads
            exclude_config_update=True, exclude_function_call=True, exclude_handoff=True,
            exclude_empty_message=True)
        try:
            self._pass_send.send_nowait(snapshot)
        except trio.WouldBlock:
            pass  # a pass is running: this turn starts none

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Run the detection passes handed over by :meth:`on_item_added`, one at a time.

        Cancellation: stops the pass in progress (the keyterms stay as they were) and ends.
        """
        self._pass_send, passes = trio.open_memory_channel[ChatContext](0)
        task_status.started()
        try:
            async for history in passes:
                await self._one_pass(history)
        finally:
            self._pass_send = None

    async def _one_pass(self, history: ChatContext) -> None:
        llm = self._llm
        if llm is None:
            return
        timeout = self.options.detection.timeout
        current = ([(term, True) for term in self.keyterms]
                   + [(term, False) for term in self._pending])
        result: tuple[list[str], list[str], list[str]] | None = None
        try:
            with trio.move_on_after(timeout):
                result = await detect_keyterms(llm, history, current,
                                               instructions=self._instructions,
                                               on_metrics=self._emit_metrics)
        except Exception:
            logger.exception("keyterm detection failed; the keyterms are unchanged")
            return
        if result is None:
            logger.warning("keyterm detection took more than %ss; pass dropped", timeout)
            return
        before = self.keyterms
        self._passes = apply_pass(self._static, self._detected, self._pending, self._passes,
                                  *result, max_keyterms=self.options.detection.max_keyterms)
        if self.keyterms != before:
            self._apply()

    def _apply(self) -> None:
        stt = self._stt
        terms = self.keyterms
        if stt is None:
            return
        if not accepts_keyterms(stt):
            if not self._unsupported_warned:
                self._unsupported_warned = True
                logger.warning("the STT %r does not accept keyterms; ignoring them", stt)
            return
        try:
            stt.update_session_keyterms(terms)  # type: ignore[attr-defined]
        except Exception:
            logger.exception("the STT failed to take the keyterms")


def apply_pass(static: list[str], detected: list[str], pending: dict[str, int],
               passes: int, new_pending: list[str], confirm: list[str], remove: list[str],
               *, max_keyterms: int | None) -> int:
    """One pass's answer folded into the state (in place); returns the new pass count.

    Removed terms leave both lists; a new pending term is remembered with this pass's number
    (static, confirmed and already pending terms are ignored); a confirmed term moves from
    pending to the end of ``detected``; pending terms older than :data:`PENDING_PASSES`
    passes are forgotten; then the oldest detected terms go while over ``max_keyterms``.
    """
    passes += 1
    for term in remove:
        pending.pop(term, None)
        if term in detected:
            detected.remove(term)
    for term in new_pending:
        if term and term not in static and term not in detected and term not in pending:
            pending[term] = passes
    for term in confirm:
        if term and term not in static:
            pending.pop(term, None)
            if term not in detected:
                detected.append(term)
    for term in [t for t, seen in pending.items() if passes - seen >= PENDING_PASSES]:
        del pending[term]
    if max_keyterms is not None:
        del detected[:max(0, len(detected) - max_keyterms)]
    return passes


async def detect_keyterms(llm: LLM, history: ChatContext, current: list[tuple[str, bool]], *,
                          instructions: str = DETECTION_INSTRUCTIONS,
                          on_metrics: Callable[[LLMMetrics], object] | None = None
                          ) -> tuple[list[str], list[str], list[str]]:
    """One detection request: ``(pending, confirm, remove)`` from the model's
    ``record_keyterms`` call (all empty when it made none or it was malformed, or when
    ``history`` has no text yet). ``current`` is each known term with whether it is applied.
    ``on_metrics`` gets the request's ``LLMMetrics`` once its stream has ended.

    Cancellation: cancels the LLM request; nothing is changed.
    """
    prompt = detection_prompt(history, current)
    if prompt is None:
        return [], [], []
    request = ChatContext.empty()
    request.add_message(role="system", content=instructions)
    request.add_message(role="user", content=prompt)
    calls: list[FunctionToolCall] = []
    started = trio.current_time()
    first: float | None = None
    usage: CompletionUsage | None = None
    request_id = ""
    async with llm.chat(chat_ctx=request, tools=[_record_keyterms],
                        tool_choice="required") as stream:
        async for chunk in stream:
            if first is None and chunk.has_response():
                first = trio.current_time()
            usage = chunk.usage or usage
            request_id = chunk.id or request_id
            calls.extend(chunk.tool_calls)
    if on_metrics is not None:
        on_metrics(_pass_metrics(llm, started, first, usage, request_id))
    return parse_record_keyterms(calls)


def _pass_metrics(llm: LLM, started: float, first: float | None,
                  usage: CompletionUsage | None, request_id: str) -> LLMMetrics:
    duration = trio.current_time() - started
    usage = usage or CompletionUsage()
    return LLMMetrics(
        timestamp=started, label=model_label(llm), request_id=request_id,
        ttft=-1.0 if first is None else first - started, duration=duration,
        completion_tokens=usage.completion_tokens, prompt_tokens=usage.prompt_tokens,
        prompt_cached_tokens=usage.prompt_cached_tokens,
        cache_creation_tokens=usage.cache_creation_tokens,
        reasoning_tokens=usage.reasoning_tokens, total_tokens=usage.total_tokens,
        tokens_per_second=usage.completion_tokens / duration if duration > 0 else 0.0,
        metadata=model_metadata(llm))


def detection_prompt(history: ChatContext, current: list[tuple[str, bool]]) -> str | None:
    """The request's user message: the latest turns and the known terms, or None when the
    history has no user or assistant text."""
    lines: list[str] = []
    for item in reversed(history.items):
        if not isinstance(item, ChatMessage) or item.role not in ("user", "assistant"):
            continue
        text = item.text_content
        if text:
            body = "\n".join(line for line in text.splitlines() if line.strip())
            lines.append(f"{item.role.upper()}: {body}")
            if len(lines) >= TRANSCRIPT_MESSAGES:
                break
    if not lines:
        return None
    applied = ", ".join(term for term, on in current if on) or "(none)"
    waiting = ", ".join(term for term, on in current if not on) or "(none)"
    return "\n\n".join([
        "## Conversation (USER: recognizer output, may be misspelled; ASSISTANT: written "
        "by the agent)\n" + "\n\n".join(reversed(lines)),
        "## Keyterms applied now\n" + applied,
        "## Keyterms pending\n" + waiting,
        "Call `record_keyterms` once with the changes the latest turns justify."])


def parse_record_keyterms(calls: list[FunctionToolCall]
                          ) -> tuple[list[str], list[str], list[str]]:
    """``(pending, confirm, remove)`` from the first ``record_keyterms`` call; a missing or
    malformed call, or a key that is not a list, counts as empty."""
    call = next((c for c in calls if c.name == "record_keyterms"), None)
    if call is None:
        return [], [], []
    try:
        data = json.loads(call.arguments or "{}")
    except ValueError:
        return [], [], []
    if not isinstance(data, dict):
        return [], [], []

    def terms(key: str) -> list[str]:
        value = data.get(key)
        if not isinstance(value, list):
            return []
        return [t for t in value if isinstance(t, str) and t.strip()]

    return terms("pending"), terms("confirm"), terms("remove")


def _default_detection_llm() -> Any:  # noqa: ANN401 - an adapted gateway LLM
    try:
        return resolve_model("keyterm_detection", "llm", DEFAULT_DETECTION_MODEL)
    except Exception as e:  # noqa: BLE001 - detection must never break the session
        logger.warning("keyterm detection: no detection LLM (%s: %s); detection is off",
                       DEFAULT_DETECTION_MODEL, e)
        return None
