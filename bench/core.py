"""What both runtimes share: the scripted conversation, the timings, and the fake models' logic.

Nothing here imports Trio, asyncio or either runtime. The per-runtime fakes (``trio_side`` and
``asyncio_side``) are thin shells around these classes, so both runtimes run the same
per-frame work, the same script and the same timings.

Speech is encoded in the audio samples: a user frame whose first sample is 0 is silence, and
``1000 + k`` is the k-th utterance of the script. The VAD and the STT derive their events from
the samples alone (frame counts, no timers). Agent audio carries ``2000 + r`` for reply r, so
the sink knows which reply its first frame belongs to.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

# -- timings (seconds) ------------------------------------------------------------------------
FRAME = 0.02                 # 20 ms frames in and out
IN_RATE = 16000
IN_SAMPLES = 320             # 20 ms at 16 kHz
OUT_RATE = 24000
OUT_SAMPLES = 480            # 20 ms at 24 kHz

VAD_START_FRAMES = 3         # 0.06 s of speech >= 0.05 s: start of speech
VAD_END_FRAMES = 15          # 0.30 s of silence: end of speech
STT_FINAL_FRAMES = 10        # final transcript 0.2 s after the speech ends

LLM_TTFT = 0.2               # time to first token
TOKEN_INTERVAL = 0.02        # then a token every 20 ms
TOKEN_CHARS = 4              # 4 characters per token
TTS_TTFB = 0.1               # first audio 0.1 s after the first text
FRAMES_PER_CHAR = 2.5        # 50 ms of audio per character (a 4-char token = 10 frames)
TTS_SPEED = float(os.environ.get("BENCH_TTS_SPEED", "2.0"))   # synthesis: 2× real time …
TTS_CHUNK_FRAMES = 5         # … delivered in 100 ms chunks

MIN_DELAY = 0.5              # endpointing
MAX_DELAY = 3.0
INTERRUPT_MIN_DURATION = 0.05

SPEECH_BASE = 1000           # user sample value = SPEECH_BASE + utterance index
REPLY_BASE = 2000            # agent sample value = REPLY_BASE + reply index

TRANSFER_TOOL = "transfer_to_billing"


@dataclass(frozen=True)
class Utterance:
    index: int
    start: float             # seconds from the input's first frame (a multiple of FRAME)
    end: float
    text: str
    reply: int | None        # the reply it asks for (None: no reply expected)
    interrupts: int | None = None   # the reply this utterance interrupts


@dataclass(frozen=True)
class Reply:
    index: int
    text: str
    tool: str | None = None  # a tool call after the text


@dataclass(frozen=True)
class Script:
    utterances: tuple[Utterance, ...]
    replies: tuple[Reply, ...]
    close_at: float          # seconds from the input's first frame
    handoff_by_update: bool  # the tool calls update_agent (else it returns the Agent)

    def reply_for(self, user_text: str) -> Reply | None:
        for u in self.utterances:
            if u.text == user_text and u.reply is not None:
                return self.replies[u.reply]
        return None

    def transcript(self, utterance: int) -> str:
        return self.utterances[utterance].text


def _q(t: float) -> float:
    """Round to a frame boundary."""
    return round(round(t / FRAME) * FRAME, 6)


def reply_audio(text: str) -> float:
    return int(len(text) * FRAMES_PER_CHAR) * FRAME


def reply_text_time(text: str) -> float:
    tokens = (len(text) + TOKEN_CHARS - 1) // TOKEN_CHARS
    return LLM_TTFT + (tokens - 1) * TOKEN_INTERVAL


STORY = (
    "Once upon a time, in a small village by the sea, there lived an old fisherman who "
    "went out every morning before dawn. One day his net came up heavy with something "
    "that was not a fish at all: a bottle, sealed with wax, with a map rolled up inside. "
    "The map showed an island that no sailor in the village had ever heard of, far past "
    "the lighthouse and the reefs, where the water turns from green to a deep dark blue."
)

_SHORT = [
    "Hi! I am the front desk. How can I help?",
    "We open at nine and close at five pm.",
    "Sure. A fox met a crow; they became friends.",
    "Your balance is forty two dollars, friend.",
]


def build_script(session_index: int, *, kind: str = "full") -> Script:
    """The conversation of one session (~21 s for ``full``, ~7 s for ``quick``).

    ``full``: two short Q&A turns, a long story interrupted 0.8-1.4 s into its audio, the
    reply to the interruption, a handoff by tool (even sessions call ``update_agent``, odd
    ones return the Agent), one turn with the new agent, close. ``quick``: one Q&A turn and
    the interrupted story.
    """
    # where the story's interruption lands, 0.8..1.4 s into its audio, spread over sessions
    frac = (session_index * 0.6180339887) % 1.0
    into_audio = _q(0.8 + 0.6 * frac)
    gap = 0.6               # silence after a reply's expected end before the user speaks again
    utts: list[Utterance] = []
    replies: list[Reply] = []

    def reply_end(end: float, text: str) -> float:
        return end + MIN_DELAY + LLM_TTFT + TTS_TTFB + reply_audio(text)

    t = 0.4
    # Q&A 1
    r0 = Reply(0, _SHORT[0])
    utts.append(Utterance(0, _q(t), _q(t + 0.8), "Hello, who am I talking to?", reply=0))
    replies.append(r0)
    t = reply_end(utts[-1].end, r0.text) + gap
    if kind == "full":
        r1 = Reply(1, _SHORT[1])
        utts.append(Utterance(1, _q(t), _q(t + 0.8), "When are you open?", reply=1))
        replies.append(r1)
        t = reply_end(utts[-1].end, r1.text) + gap
    # the story, interrupted
    story = Reply(len(replies), STORY)
    utts.append(Utterance(len(utts), _q(t), _q(t + 0.8), "Tell me a long story.",
                          reply=story.index))
    replies.append(story)
    audio_starts = utts[-1].end + MIN_DELAY + LLM_TTFT + TTS_TTFB
    t = audio_starts + into_audio
    short = Reply(len(replies), _SHORT[2])
    utts.append(Utterance(len(utts), _q(t), _q(t + 0.8), "Stop. Just the short version.",
                          reply=short.index, interrupts=story.index))
    replies.append(short)
    t = reply_end(utts[-1].end, short.text) + gap
    if kind == "full":
        transfer = Reply(len(replies), "", tool=TRANSFER_TOOL)
        utts.append(Utterance(len(utts), _q(t), _q(t + 0.8), "Please transfer me to billing.",
                              reply=transfer.index))
        replies.append(transfer)
        t = utts[-1].end + MIN_DELAY + LLM_TTFT + 0.7
        bal = Reply(len(replies), _SHORT[3])
        utts.append(Utterance(len(utts), _q(t), _q(t + 0.8), "What is my balance?",
                              reply=bal.index))
        replies.append(bal)
        t = reply_end(utts[-1].end, bal.text) + 0.4
    return Script(tuple(utts), tuple(replies), close_at=_q(t),
                  handoff_by_update=(session_index % 2 == 0))


def warmup_script() -> Script:
    """One short turn, run once per process before measuring (imports, caches)."""
    r = Reply(0, "Hi there.")
    u = Utterance(0, 0.2, 0.6, "Hello?", reply=0)
    return Script((u,), (r,), close_at=_q(0.6 + MIN_DELAY + LLM_TTFT + TTS_TTFB + 0.7),
                  handoff_by_update=True)


def listening_script(duration: float) -> Script:
    """Silence only: the per-frame cost of a session that listens (profiling)."""
    return Script((), (), close_at=_q(duration), handoff_by_update=True)


# -- samples -----------------------------------------------------------------------------------
_IN_BYTES: dict[int, bytes] = {}
_OUT_BYTES: dict[int, bytes] = {}


def _samples(value: int, n: int) -> bytes:
    return int(value).to_bytes(2, "little", signed=True) * n


def in_bytes(value: int) -> bytes:
    b = _IN_BYTES.get(value)
    if b is None:
        b = _IN_BYTES[value] = _samples(value, IN_SAMPLES)
    return b


def out_bytes(value: int) -> bytes:
    b = _OUT_BYTES.get(value)
    if b is None:
        b = _OUT_BYTES[value] = _samples(value, OUT_SAMPLES)
    return b


def frame_values(script: Script) -> list[tuple[int, int, int]]:
    """(first frame, end frame, sample value) of each utterance."""
    return [(round(u.start / FRAME), round(u.end / FRAME), SPEECH_BASE + u.index)
            for u in script.utterances]


TICK = 0.001                 # the fake network delivers due frames every millisecond


class InputFrames:
    """Which frame the input hands out next, and how late the frames that matter came.

    Frame k covers [k·20 ms, (k+1)·20 ms) of the script and is due at ``t0 + (k+1)·20 ms``.
    The frames that decide something (the one that crosses the interruption threshold, the
    one that completes end of speech) record how late the fake network delivered them, so
    the fakes' own timer lateness can be told apart from the runtime's.
    """

    __slots__ = ("_keys", "_span", "_spans", "k", "probe")

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.k = 0
        self._spans = frame_values(probe.script)
        self._span = 0
        keys: dict[int, str] = {}
        for first, end, value in self._spans:
            u = value - SPEECH_BASE
            keys[first + VAD_START_FRAMES - 1] = f"threshold:{u}"
            keys[end + VAD_END_FRAMES - 1] = f"end:{u}"
        self._keys = keys

    def next_value(self, t: float) -> int:
        """The sample value of the next frame; ``t`` is when it is handed out."""
        k = self.k
        self.k = k + 1
        key = self._keys.get(k)
        if key is not None:
            self.probe.frame_late[key] = t - (self.probe.t0 + (k + 1) * FRAME)
        spans = self._spans
        while self._span < len(spans) and k >= spans[self._span][1]:
            self._span += 1
        if self._span < len(spans) and k >= spans[self._span][0]:
            return spans[self._span][2]
        return 0

    def due(self) -> float:
        return self.probe.t0 + (self.k + 1) * FRAME



def frame_phase(offset: float) -> float:
    """The phase in the frame period of a session scheduled to start ``offset`` seconds after
    the first (whole microseconds, so 40 ms is phase 0 exactly)."""
    return (round(offset * 1e6) % round(FRAME * 1e6)) / 1e6


# -- the probe: what the fakes record ----------------------------------------------------------
@dataclass
class Probe:
    """Timestamps recorded by one session's fakes, on that runtime's clock."""

    index: int
    script: Script
    t0: float | None = None                       # the input's stream time 0
    # where in the 20 ms frame period its frames come, from its scheduled start (seconds in
    # [0, FRAME)): the network puts time 0 on that phase of its grid (``Network.time_zero``)
    frame_phase: float = 0.0
    frame_late: dict[str, float] = field(default_factory=dict)  # key frames' delivery lateness
    vad_threshold: dict[int, float] = field(default_factory=dict)    # utterance → time
    vad_end: dict[int, float] = field(default_factory=dict)
    stt_final: dict[int, float] = field(default_factory=dict)
    llm_request: dict[int, float] = field(default_factory=dict)      # reply → time
    llm_first_token: dict[int, float] = field(default_factory=dict)
    llm_cancelled: dict[int, float] = field(default_factory=dict)
    llm_other: list[str] = field(default_factory=list)              # unexpected requests
    tts_first_text: dict[int, float] = field(default_factory=dict)
    tts_first_audio: dict[int, float] = field(default_factory=dict)
    tts_cancelled: dict[int, float] = field(default_factory=dict)
    sink_first_frame: dict[int, float] = field(default_factory=dict)
    frames_out: int = 0                                             # frames the sink captured
    clears: list[tuple[float, int]] = field(default_factory=list)     # (time, reply)
    current_reply: int = -1
    tool_return: float | None = None
    on_enter_new: float | None = None
    start_latency: float | None = None
    close_latency: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    error: str | None = None
    handoff_supported: bool = True                # False: the runtime has no agent handoff

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "script"}


class VadCore:
    """Voice activity from the samples: an inference per frame, start after 3 speech frames
    (0.06 s >= 0.05 s), end after 15 silence frames (0.30 s)."""

    __slots__ = ("n", "now", "probe", "silence", "speaking", "speech", "utterance")

    def __init__(self, probe: Probe, now) -> None:
        self.n = 0               # frames processed
        self.speech = 0          # speech frames of the current speech
        self.silence = 0         # silence frames since the last speech frame
        self.speaking = False
        self.utterance = -1
        self.probe = probe
        self.now = now

    def process(self, value: int) -> tuple[int, bool, int, int]:
        """One frame → (event, speaking, speech frames, silence frames).

        ``event``: 0 inference only, 1 inference then start of speech, 2 inference then end of
        speech. The caller emits the INFERENCE_DONE event, then the start/end event.
        """
        event = 0
        self.n += 1
        if value:
            self.speech += 1
            self.silence = 0
            self.utterance = value - SPEECH_BASE
            if not self.speaking and self.speech >= VAD_START_FRAMES:
                self.speaking = True
                event = 1
        elif self.speaking:
            self.silence += 1
            if self.silence >= VAD_END_FRAMES:
                event = 2
        else:
            self.speech = 0
            self.silence += 1
        return event, self.speaking, self.speech, self.silence

    def threshold_emitted(self) -> None:
        """The inference event whose speech duration first reaches min_duration was emitted."""
        u = self.utterance
        probe = self.probe
        if u not in probe.vad_threshold:
            probe.vad_threshold[u] = self.now()

    def ended(self) -> None:
        self.probe.vad_end[self.utterance] = self.now()
        self.speaking = False
        self.speech = 0


class SttCore:
    """Final transcript 10 frames (0.2 s) after the speech ends; the text comes from the
    session script by the utterance index in the samples."""

    __slots__ = ("now", "probe", "silence", "utterance")

    def __init__(self, probe: Probe, now) -> None:
        self.utterance = -1
        self.silence = 0
        self.probe = probe
        self.now = now

    def process(self, value: int) -> str | None:
        if value:
            self.utterance = value - SPEECH_BASE
            self.silence = 0
            return None
        if self.utterance < 0:
            return None
        self.silence += 1
        if self.silence == STT_FINAL_FRAMES:
            u, self.utterance = self.utterance, -1
            self.probe.stt_final[u] = self.now()
            return self.probe.script.transcript(u)
        return None


def last_user_text(items) -> tuple[str | None, bool]:
    """(text of the last user message, whether a tool output follows it)."""
    tool_after = False
    for item in reversed(items):
        kind = getattr(item, "type", None)
        if kind == "function_call_output":
            tool_after = True
        if kind == "message" and getattr(item, "role", None) == "user":
            return item.text_content, tool_after
    return None, tool_after


def tokens(text: str) -> list[str]:
    return [text[i:i + TOKEN_CHARS] for i in range(0, len(text), TOKEN_CHARS)]


class TtsCore:
    """Audio for text: 2.5 frames per character (counted so that rounding never drifts),
    synthesized at ``TTS_SPEED`` × real time in chunks of ``TTS_CHUNK_FRAMES`` frames: the
    chunk that starts at frame j is ready at ``first_audio + j·20 ms / TTS_SPEED``."""

    __slots__ = ("chars", "emitted", "first_audio", "frames")

    def __init__(self) -> None:
        self.chars = 0
        self.frames = 0          # frames the text so far is worth
        self.emitted = 0         # frames handed out
        self.first_audio = 0.0

    def add_text(self, text: str) -> None:
        self.chars += len(text)
        self.frames = int(self.chars * FRAMES_PER_CHAR)

    def next_chunk(self) -> tuple[int, float]:
        """(frames in the next chunk, when it is ready); (0, 0.0) when the text is used up."""
        n = min(self.frames - self.emitted, TTS_CHUNK_FRAMES - self.emitted % TTS_CHUNK_FRAMES)
        if n <= 0:
            return 0, 0.0
        start = self.emitted - self.emitted % TTS_CHUNK_FRAMES
        return n, self.first_audio + start * FRAME / TTS_SPEED


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)
