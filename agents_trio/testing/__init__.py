"""Public fakes and the scripted-timeline harness: test your agents with them.

Under ``trio.testing.MockClock(autojump_threshold=0)`` (pytest-trio's ``autojump_clock``) a
scripted conversation runs instantly and gives the same timeline every time.
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
