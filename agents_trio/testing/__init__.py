"""Public fakes and the scripted-timeline harness: test your agents with them.

Under ``trio.testing.MockClock(autojump_threshold=0)`` (pytest-trio's ``autojump_clock``) a
scripted conversation runs instantly and gives the same timeline every time.

Adversarial testing: a :class:`Schedule` describes a whole conversation (user speech and text
at any time, interruptions, tool latencies and failures around your tools, model faults, the
close); :func:`check_conversation` plays it against your agent and checks the invariants
(``DEFAULT_INVARIANTS`` plus your own). Hypothesis strategies drawing schedules are in
``agents_trio.testing.strategies`` (the only module here that imports ``hypothesis``).

Fake provider plugins on LiveKit Agents' own base classes (scripted LLM replies and tool calls,
STT, TTS, VAD, a realtime model), which run on LiveKit's ``AgentSession`` and, given as they
are, on this one: ``agents_trio.testing.livekit_fakes`` (needs livekit-agents).
"""

from .actions import FakeActions, FakeLLMResponse, FakeTTSResponse, FakeUserSpeech
from .fake_io import FakeAudioInput, FakeAudioOutput, FakeTextOutput
from .fake_models import FakeLLM, FakeSTT, FakeTTS, FakeVAD
from .fake_realtime import FakeRealtimeModel, FakeRealtimeResponse, FakeRealtimeSession
from .harness import create_session, run_session

__all__ = [
    "FakeActions", "FakeAudioInput", "FakeAudioOutput", "FakeLLM", "FakeLLMResponse",
    "FakeRealtimeModel", "FakeRealtimeResponse", "FakeRealtimeSession", "FakeSTT",
    "FakeTTS", "FakeTTSResponse", "FakeTextOutput", "FakeUserSpeech", "FakeVAD",
    "create_session", "run_session",
]

# A LiveKit room without a server (RoomIO, JobContext and worker tests)
from .fake_room import FakeRemoteParticipant, FakeRoom, open_fake_room  # noqa: E402

__all__ += ["FakeRemoteParticipant", "FakeRoom", "open_fake_room"]

# Adversarial conversations: schedules as data, the runner and the invariants
from .conversation import (ActionOutcome, ConversationRecord, HookCall,  # noqa: E402
                           ToolExecution, live_tasks, run_conversation, watch_session)
from .invariants import (DEFAULT_INVARIANTS, ConversationViolation, Invariant,  # noqa: E402
                         check_conversation, violations)
from .schedules import (Fault, Interrupt, OutputFault, PushFault, Reply,  # noqa: E402
                        RunInput, Schedule, StreamFault, TextInput, ToolCall, UserSpeech)
from .scripted_models import LLMRequest  # noqa: E402

__all__ += ["ActionOutcome", "ConversationRecord", "ConversationViolation", "DEFAULT_INVARIANTS",
            "Fault", "HookCall", "Interrupt", "Invariant", "LLMRequest", "OutputFault",
            "PushFault", "Reply", "RunInput", "Schedule", "StreamFault", "TextInput",
            "ToolCall", "ToolExecution", "UserSpeech", "check_conversation", "live_tasks",
            "run_conversation", "violations", "watch_session"]

# The expect DSL (what ``result.expect`` returns)
from .expect import (AgentHandoffAssert, ChatMessageAssert, EventAssert,  # noqa: E402
                     EventRangeAssert, FunctionCallAssert, FunctionCallOutputAssert, RunAssert,
                     format_events, judge_chat_context, judge_request_text, judge_verdict)

__all__ += ["AgentHandoffAssert", "ChatMessageAssert", "EventAssert", "EventRangeAssert",
            "FunctionCallAssert", "FunctionCallOutputAssert", "RunAssert", "format_events",
            "judge_chat_context", "judge_request_text", "judge_verdict"]
