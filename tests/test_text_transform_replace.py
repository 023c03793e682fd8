"""``text_transforms.replace``: LiveKit's word-replacing TTS text transform, streaming (a key
split across chunks still matches), compared with LiveKit's own on every split of the text;
and a LiveKit-style stream transform in ``tts_text_transforms`` reaches the TTS."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

import pytest

from agents_trio import Agent, AgentSession, ModelSettings
from agents_trio.testing import FakeActions, FakeAudioOutput, FakeLLM, FakeTTS
from agents_trio.text_transforms import apply, replace, resolve

lk_transforms = pytest.importorskip("livekit.agents.voice.transcription.text_transforms")


async def _chunks(parts: list[str]) -> AsyncIterator[str]:
    for part in parts:
        yield part


async def _run(transform: object, parts: list[str]) -> str:
    return "".join([c async for c in transform(_chunks(parts))])  # type: ignore[operator]


def _splits(text: str) -> list[list[str]]:
    """The text whole, in single characters, and cut once at every position."""
    return ([[text], list(text)]
            + [[text[:i], text[i:]] for i in range(1, len(text))])


@pytest.mark.parametrize("replacements, case_sensitive, text", [
    ({"LiveKit": "Live Kit"}, False, "I love livekit and LIVEKIT."),
    ({"ai": "A.I.", "aim": "goal"}, False, "my aim is ai, not aimless"),
    ({"Dr.": "Doctor", "St.": "Street"}, True, "Dr. Who lives on St. Mark and dr. No"),
    ({"a": "b", "b": "a"}, False, "abba"),
    ({}, False, "nothing changes"),
    ({"km/h": "kilometres per hour"}, False, "going 50km/h, then 80 KM/H"),
])
async def test_replace_matches_livekits_on_every_split(replacements: dict[str, str],
                                                       case_sensitive: bool, text: str) -> None:
    ours = replace(replacements, case_sensitive=case_sensitive)
    theirs = lk_transforms.replace(replacements, case_sensitive=case_sensitive)
    expected = await _run(theirs, [text])
    for parts in _splits(text):
        assert await _run(ours, parts) == expected, parts


def test_replace_refuses_what_is_not_a_mapping_of_strings() -> None:
    with pytest.raises(TypeError, match="mapping of str"):
        replace({"a": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="mapping of str"):
        replace([("a", "b")])  # type: ignore[arg-type]


async def test_chunk_and_stream_transforms_compose_in_order() -> None:
    transforms = resolve([str.upper, replace({"HELLO": "bye"}), "filter_emoji"])
    out = [c async for c in apply(transforms, _chunks(["hel", "lo 🙂", " there"]))]
    assert "".join(out) == "bye  THERE"


class Recording(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")
        self.tts_text: list[str] = []

    async def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                       ) -> AsyncIterator[object]:
        async def seen() -> AsyncIterator[str]:
            async for chunk in text:
                self.tts_text.append(chunk)
                yield chunk
        async for frame in Agent.default.tts_node(self, seen(), model_settings):
            yield frame


async def test_a_replace_transform_reaches_the_tts_not_the_transcript(autojump_clock) -> None:
    a = FakeActions()
    a.add_llm("Welcome to LiveKit, the livekit way.", input="hi")
    a.add_tts(1.0, input="Welcome to Live Kit, the Live Kit way.")
    agent = Recording()
    session = AgentSession(llm=FakeLLM(a.llm_responses), tts=FakeTTS(a.tts_responses),
                           tts_text_transforms=[replace({"livekit": "Live Kit"})])
    session.output.audio = FakeAudioOutput()
    async with session:
        await session.start(agent)
        result = await session.run(user_input="hi")
    assert "".join(agent.tts_text) == "Welcome to Live Kit, the Live Kit way."
    msg = result.expect.next_event().is_message(role="assistant").event().item
    assert msg.text_content == "Welcome to LiveKit, the livekit way."


async def test_a_stream_transform_that_is_not_an_async_generator_function_is_named() -> None:
    def wrapped(text: AsyncIterable[str]) -> AsyncIterable[str]:
        return replace({"a": "b"})(text)

    with pytest.raises(TypeError, match="async generator function"):
        [c async for c in apply(resolve([wrapped]), _chunks(["abc"]))]
