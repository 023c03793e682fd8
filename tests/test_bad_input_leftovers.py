"""What the bad-input sweep left, each checked against LiveKit and fixed where it was real.

- ``RoomOptions(audio_input=0)`` turned audio input on (only ``False`` turns a part off) and
  ``close_on_disconnect="no"`` was true; a number given as a str (``input_frame_ms="5"``)
  failed with ``'>' not supported``, or only when the options were read. LiveKit types them
  as bools or option objects: anything else is refused, naming the option.
- ``AgentSession(tts_text_transforms="filter_emoji")`` iterated the string ("unknown text
  transform 'f'"); LiveKit takes a sequence of names or callables.
- ``AgentSession(max_unrecoverable_errors=0)``: accepted, as LiveKit (the first
  unrecoverable error of a kind closes the session, as there).
- Tool names no provider accepts (a space, ``<lambda>``, non-ASCII, over 128 characters)
  made every LLM request fail: refused when the tool is built.
- ``mock_tools(Agent, 5)`` raised ``AttributeError``; LiveKit fails on it at the tool call.
  A mock of a name the agent class does not define is accepted, as LiveKit (the agent may
  get the tool per instance or later).
- Prebuilt tasks read truthy strings as ``True`` (``require_confirmation="no"`` asked for a
  confirmation) and ignored wrong types (``name_format=5``, ``tools=(tool,)`` dropped).
- ``BackgroundAudioPlayer.play("nope.wav")``: as LiveKit, the missing file is logged when
  the sound is read, and its handle ends; not refused at the call.
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agents_trio import (Agent, AgentSession, BackgroundAudioPlayer, FunctionToolCall,
                         RunContext, function_tool, mock_tools)
from agents_trio._errors import APIError
from agents_trio.beta import EndCallTool
from agents_trio.io.room_options import (AudioInputOptions, AudioOutputOptions,
                                         RoomInputOptions, RoomOptions, RoomOutputOptions,
                                         TextInputOptions, TextOutputOptions)
from agents_trio.prebuilt import (GetAddressTask, GetCreditCardTask, GetDOBTask, GetDtmfTask,
                                  GetEmailTask, GetNameTask, GetPhoneNumberTask)
from agents_trio.prebuilt.credit_card import (GetCardNumberTask, GetExpirationDateTask,
                                              GetSecurityCodeTask)
from agents_trio.prebuilt.warm_transfer import WarmTransferTask
from agents_trio.testing import FakeActions, FakeLLM

sys.path.insert(0, str(Path(__file__).parent))
from test_background_audio import Sink  # noqa: E402


def _refused(make: Any, error: type[Exception], word: str) -> None:  # noqa: ANN401
    with pytest.raises(error, match=word):
        make()


# -- 1. room options ------------------------------------------------------------------------
BAD_ROOM_OPTIONS: dict[str, tuple[Any, type[Exception], str]] = {
    "audio_input=0": (lambda: RoomOptions(audio_input=0), TypeError, "audio_input"),
    "text_input='no'": (lambda: RoomOptions(text_input="no"), TypeError, "text_input"),
    "audio_output=1": (lambda: RoomOptions(audio_output=1), TypeError, "audio_output"),
    "text_output='off'": (lambda: RoomOptions(text_output="off"), TypeError, "text_output"),
    "video_input=0": (lambda: RoomOptions(video_input=0), TypeError, "video_input"),
    "audio_input=AudioOutputOptions()": (lambda: RoomOptions(audio_input=AudioOutputOptions()),
                                         TypeError, "audio_input"),
    "close_on_disconnect='no'": (lambda: RoomOptions(close_on_disconnect="no"), TypeError,
                                 "close_on_disconnect"),
    "delete_room_on_close=1": (lambda: RoomOptions(delete_room_on_close=1), TypeError,
                               "delete_room_on_close"),
    "transcription='no'": (lambda: RoomOptions(transcription="no"), TypeError,
                           "transcription"),
    "agent_state=0": (lambda: RoomOptions(agent_state=0), TypeError, "agent_state"),
    "input_frame_ms='5'": (lambda: RoomOptions(input_frame_ms="5"), TypeError,
                           "input_frame_ms"),
    "input_sample_rate=0": (lambda: RoomOptions(input_sample_rate=0), ValueError,
                            "input_sample_rate"),
    "output_num_channels=nan": (lambda: RoomOptions(output_num_channels=math.nan), ValueError,
                                "output_num_channels"),
    "output_queue_ms='200'": (lambda: RoomOptions(output_queue_ms="200"), TypeError,
                              "output_queue_ms"),
    "track_name=5": (lambda: RoomOptions(track_name=5), TypeError, "track_name"),
    "AudioInputOptions(sample_rate='24000')": (lambda: AudioInputOptions(sample_rate="24000"),
                                               TypeError, "sample_rate"),
    "AudioInputOptions(pre_connect_audio='no')": (
        lambda: AudioInputOptions(pre_connect_audio="no"), TypeError, "pre_connect_audio"),
    "AudioInputOptions(auto_gain_control='no')": (
        lambda: AudioInputOptions(auto_gain_control="no"), TypeError, "auto_gain_control"),
    "AudioOutputOptions(track_name=5)": (lambda: AudioOutputOptions(track_name=5), TypeError,
                                         "track_name"),
    "TextOutputOptions(sync_transcription='no')": (
        lambda: TextOutputOptions(sync_transcription="no"), TypeError, "sync_transcription"),
    "TextOutputOptions(json_format='no')": (lambda: TextOutputOptions(json_format="no"),
                                            TypeError, "json_format"),
    "RoomInputOptions(audio_enabled=0)": (lambda: RoomInputOptions(audio_enabled=0), TypeError,
                                          "audio_enabled"),
    "RoomInputOptions(close_on_disconnect='no')": (
        lambda: RoomInputOptions(close_on_disconnect="no"), TypeError, "close_on_disconnect"),
    "RoomOutputOptions(transcription_enabled=0)": (
        lambda: RoomOutputOptions(transcription_enabled=0), TypeError,
        "transcription_enabled"),
}


@pytest.mark.parametrize("name", list(BAD_ROOM_OPTIONS))
def test_a_room_option_of_the_wrong_type_is_refused(name):
    _refused(*BAD_ROOM_OPTIONS[name])


def test_the_room_options_livekit_takes_are_accepted():
    from agents_trio import NOT_GIVEN
    on = RoomOptions(text_input=True, audio_input=AudioInputOptions(), audio_output=None,
                     text_output=TextOutputOptions(sync_transcription=None),
                     video_input=False, close_on_disconnect=False, delete_room_on_close=True)
    assert on.get_audio_input_options() is not None
    off = RoomOptions(audio_input=False, text_input=TextInputOptions(), text_output=False,
                      audio_output=AudioOutputOptions(track_name="voice"))
    assert off.get_audio_input_options() is None and off.get_text_output_options() is None
    # LiveKit's default of these fields, given explicitly: the default
    assert RoomOptions(audio_input=NOT_GIVEN).get_audio_input_options() is not None
    RoomInputOptions(audio_enabled=False, text_enabled=None)
    RoomOutputOptions(transcription_enabled=True, sync_transcription=False)


# -- 2. tts_text_transforms -----------------------------------------------------------------
@pytest.mark.parametrize("transforms,error", [("filter_emoji", TypeError), (5, TypeError),
                                              (["filter_emojis"], ValueError)])
def test_tts_text_transforms_must_be_a_list_of_names_or_callables(transforms, error):
    with pytest.raises(error, match="tts_text_transforms") as info:
        AgentSession(tts_text_transforms=transforms)
    assert "'f'" not in str(info.value)


def test_tts_text_transforms_in_the_forms_livekit_takes():
    assert len(AgentSession(tts_text_transforms=("filter_emoji", str.upper))
               .tts_text_transforms) == 2
    assert AgentSession(tts_text_transforms=None).tts_text_transforms == []


# -- 3. max_unrecoverable_errors=0: LiveKit's meaning, kept --------------------------------
async def test_no_unrecoverable_error_tolerated_closes_at_the_first(autojump_clock):
    # LiveKit closes when the count of a kind exceeds max_unrecoverable_errors: 0 means the
    # first unrecoverable error closes the session; it does here too
    a = FakeActions()
    a.add_llm_error(APIError("the model is down"), input="hello")
    async with AgentSession(llm=FakeLLM(a.llm_responses),
                            max_unrecoverable_errors=0) as session:
        closes: list[Any] = []
        session.on("close", closes.append)
        await session.start(Agent(instructions="x"))
        with trio.fail_after(10), pytest.raises(APIError):
            await session.run(user_input="hello")
        with trio.fail_after(10):
            await trio.sleep(1)
        assert [(c.reason, str(c.error)) for c in closes] == [("error", "the model is down")]


# -- 4. tool names ---------------------------------------------------------------------------
async def _noop() -> None:
    pass


def _raw(name: object) -> Any:  # noqa: ANN401
    return function_tool(lambda raw_arguments: None,
                         raw_schema={"name": name, "description": "d", "parameters": {}})


@pytest.mark.parametrize("make", [
    lambda: function_tool(_noop, name="get weather"),
    lambda: function_tool(name="look/up")(_noop),
    lambda: function_tool(_noop, name="café"),
    lambda: function_tool(_noop, name="a" * 129),
    lambda: function_tool(lambda: None),  # named "<lambda>"
    lambda: _raw("get weather"),
    lambda: function_tool(lambda raw_arguments: None, name="x y",
                          raw_schema={"name": "ok", "parameters": {}}),
], ids=["space", "slash", "non-ascii", "too long", "lambda", "raw space", "raw name="])
def test_a_tool_name_no_provider_accepts_is_refused(make):
    with pytest.raises(ValueError, match="tool name"):
        make()


def test_tool_names_some_provider_accepts_are_kept():
    # OpenAI and Anthropic: [a-zA-Z0-9_-]; Gemini adds '.' and ':'; up to 128 (Anthropic)
    for name in ("get_weather", "get-weather", "GetWeather2", "weather.get", "ns:get",
                 "a" * 128, "9lives"):
        assert function_tool(_noop, name=name).name == name
        assert _raw(name).name == name


# -- 5. mock_tools ---------------------------------------------------------------------------
class _Weather(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")

    @function_tool
    async def lookup(self, ctx: RunContext, city: str) -> str:
        """Look it up."""
        return "real"


@pytest.mark.parametrize("mocks", [5, "lookup", [("lookup", lambda: 1)], {5: lambda: 1}],
                         ids=["int", "str", "list of pairs", "int key"])
@pytest.mark.parametrize("with_session", [False, True])
def test_mock_tools_takes_a_dict_of_tool_names(mocks, with_session):
    kwargs = {"session": AgentSession()} if with_session else {}
    with pytest.raises(TypeError, match="mocks"):
        mock_tools(_Weather, mocks, **kwargs)


async def test_a_mock_of_a_tool_the_class_does_not_define_is_accepted(autojump_clock):
    # as LiveKit: the agent may get the tool per instance (tools=[...]) or later
    @function_tool
    async def extra(city: str) -> str:
        """Extra."""
        return "real"

    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="extra", arguments='{"city": "Oslo"}',
                                               call_id="c1")], input="go")
    a.add_llm("done", input="mocked")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Agent(instructions="x", tools=[extra]))
        with mock_tools(Agent, {"extra": lambda city: f"mocked {city}", "absent": lambda: 1}):
            with trio.fail_after(10):
                result = await session.run(user_input="go")
    result.expect.next_event().is_function_call(name="extra")
    result.expect.next_event().is_function_call_output(output="mocked Oslo")


# -- 6. prebuilt tasks -----------------------------------------------------------------------
_TOOL = function_tool(_noop, name="noop")

BAD_TASKS: dict[str, tuple[Any, type[Exception], str]] = {
    "GetEmailTask(require_confirmation='no')": (
        lambda: GetEmailTask(require_confirmation="no"), TypeError, "require_confirmation"),
    "GetEmailTask(verify_spelling=1)": (lambda: GetEmailTask(verify_spelling=1), TypeError,
                                        "verify_spelling"),
    "GetEmailTask(instructions=5)": (lambda: GetEmailTask(instructions=5), TypeError,
                                     "instructions"),
    "GetEmailTask(extra_instructions=5)": (lambda: GetEmailTask(extra_instructions=5),
                                           TypeError, "extra_instructions"),
    "GetEmailTask(require_explicit_ask='no')": (
        lambda: GetEmailTask(require_explicit_ask="no"), TypeError, "require_explicit_ask"),
    "GetEmailTask(tools=_TOOL)": (lambda: GetEmailTask(tools=_TOOL), TypeError, "tools"),
    "GetDOBTask(include_time='no')": (lambda: GetDOBTask(include_time="no"), TypeError,
                                      "include_time"),
    "GetDOBTask(require_confirmation=None)": (lambda: GetDOBTask(require_confirmation=None),
                                              TypeError, "require_confirmation"),
    "GetNameTask(name_format=5)": (lambda: GetNameTask(name_format=5), TypeError,
                                   "name_format"),
    "GetNameTask(last_name='no')": (lambda: GetNameTask(last_name="no"), TypeError,
                                    "last_name"),
    "GetNameTask(first_name=0)": (lambda: GetNameTask(first_name=0, last_name=True),
                                  TypeError, "first_name"),
    "GetAddressTask(require_confirmation='no')": (
        lambda: GetAddressTask(require_confirmation="no"), TypeError, "require_confirmation"),
    "GetAddressTask(instructions=5)": (lambda: GetAddressTask(instructions=5), TypeError,
                                       "instructions"),
    "GetPhoneNumberTask(extra_instructions=5)": (
        lambda: GetPhoneNumberTask(extra_instructions=5), TypeError, "extra_instructions"),
    "GetPhoneNumberTask(require_explicit_ask='yes')": (
        lambda: GetPhoneNumberTask(require_explicit_ask="yes"), TypeError,
        "require_explicit_ask"),
    "GetCreditCardTask(require_confirmation='no')": (
        lambda: GetCreditCardTask(require_confirmation="no"), TypeError,
        "require_confirmation"),
    "GetCreditCardTask(extra_instructions=5)": (
        lambda: GetCreditCardTask(extra_instructions=5), TypeError, "extra_instructions"),
    "GetCardNumberTask(require_explicit_ask='no')": (
        lambda: GetCardNumberTask(require_explicit_ask="no"), TypeError,
        "require_explicit_ask"),
    "GetSecurityCodeTask(require_confirmation=1)": (
        lambda: GetSecurityCodeTask(require_confirmation=1), TypeError,
        "require_confirmation"),
    "GetExpirationDateTask(extra_instructions=5)": (
        lambda: GetExpirationDateTask(extra_instructions=5), TypeError, "extra_instructions"),
    "GetDtmfTask(ask_for_confirmation='no')": (
        lambda: GetDtmfTask(num_digits=4, ask_for_confirmation="no"), TypeError,
        "ask_for_confirmation"),
    "GetDtmfTask(extra_instructions=5)": (
        lambda: GetDtmfTask(num_digits=4, extra_instructions=5), TypeError,
        "extra_instructions"),
    "EndCallTool(delete_room='no')": (lambda: EndCallTool(delete_room="no"), TypeError,
                                      "delete_room"),
    "EndCallTool(ignore_on_enter='no')": (lambda: EndCallTool(ignore_on_enter="no"),
                                          TypeError, "ignore_on_enter"),
    "WarmTransferTask(sip_call_to=5)": (
        lambda: WarmTransferTask(5, sip_trunk_id="t"), TypeError, "sip_call_to"),
    "WarmTransferTask(extra_instructions=5)": (
        lambda: WarmTransferTask("+1555", sip_trunk_id="t", extra_instructions=5), TypeError,
        "extra_instructions"),
    "WarmTransferTask(ringing_timeout='5')": (
        lambda: WarmTransferTask("+1555", sip_trunk_id="t", ringing_timeout="5"), ValueError,
        "ringing_timeout"),
    "WarmTransferTask(sip_number=5)": (
        lambda: WarmTransferTask("+1555", sip_trunk_id="t", sip_number=5), TypeError,
        "sip_number"),
    "WarmTransferTask(dtmf=5)": (
        lambda: WarmTransferTask("+1555", sip_trunk_id="t", dtmf=5), TypeError, "dtmf"),
}


@pytest.mark.parametrize("name", list(BAD_TASKS))
def test_a_prebuilt_task_argument_of_the_wrong_type_is_refused(name):
    _refused(*BAD_TASKS[name])


@pytest.mark.parametrize("make", [GetEmailTask, GetAddressTask, GetPhoneNumberTask, GetDOBTask,
                                  GetNameTask, GetCreditCardTask])
def test_a_prebuilt_task_keeps_tools_given_as_a_tuple(make):
    # LiveKit builds the task's tools as [*(tools or []), ...]: a tuple is kept there
    task = make(tools=(_TOOL,))
    assert "noop" in [t.name for t in task.tools]
    assert "noop" not in [t.name for t in make(tools=None).tools]


def test_the_prebuilt_task_arguments_livekit_takes_are_accepted():
    from agents_trio import NOT_GIVEN
    GetEmailTask(require_confirmation=False, verify_spelling=True, extra_instructions="x",
                 instructions=NOT_GIVEN, tools=[_TOOL], require_explicit_ask=True)
    GetDOBTask(include_time=True, require_confirmation=True)
    GetNameTask(first_name=True, last_name=True, name_format="{last_name}, {first_name}")
    GetAddressTask(instructions="custom")
    GetCreditCardTask(require_confirmation=NOT_GIVEN, extra_instructions="")
    GetDtmfTask(num_digits=4, ask_for_confirmation=True, extra_instructions="x")
    EndCallTool(delete_room=False, ignore_on_enter=True)
    WarmTransferTask("+1555", sip_trunk_id="t", dtmf=None, ringing_timeout=None,
                     sip_number="+1444", extra_instructions="x")


# -- 7. background audio: a missing file is logged when read, as in LiveKit ---------------
async def test_playing_a_missing_file_is_logged_and_its_handle_ends(caplog):
    async with BackgroundAudioPlayer() as player:
        await player.start(output=Sink())
        with caplog.at_level(logging.ERROR, logger="agents_trio"):
            handle = player.play("definitely-missing.wav")
            with trio.fail_after(5):
                await handle.wait_for_playout()
    assert handle.done()
    assert "definitely-missing.wav" in caplog.text
