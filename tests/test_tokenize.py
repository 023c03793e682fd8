"""``tokenize.basic.SentenceTokenizer``: the sentences LiveKit's rule-based tokenizer finds,
whole and streamed in chunks (LiveKit's stream run on asyncio for the comparison)."""

from __future__ import annotations

import asyncio

import pytest
import trio

from agents_trio.tokenize import TokenData, basic

lk_basic = pytest.importorskip("livekit.agents.tokenize.basic")

TEXTS = [
    "Hello there. How are you doing today? I am fine, thanks!",
    "Dr. Smith went to Washington. He met Mr. Jones at 3.30 p.m. in the U.S. capitol building.",
    "Short. Also short. This one is a much longer sentence that goes on. End.",
    "Wait... what? That is 3.14159 and the site example.com is down. Okay!",
    "这是第一句。这是第二句！这是第三句？",
    "No stop at the end",
    "",
    "She said \"Stop.\" Then she left the room quickly. And she never came back home.",
    "Line one.\nLine two is here.\n\nLine three ends the text here.",
    "Hi!  Two  spaces inside here. Yes.",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("min_len", [0, 5, 20])
def test_tokenize_finds_livekits_sentences(text: str, min_len: int) -> None:
    ours = basic.SentenceTokenizer(min_sentence_len=min_len).tokenize(text)
    assert ours == lk_basic.SentenceTokenizer(min_sentence_len=min_len).tokenize(text)


def _chunked(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _livekit_stream(chunks: list[str], flush_after: int | None) -> list[tuple[int, str]]:
    async def run() -> list[tuple[int, str]]:
        stream = lk_basic.SentenceTokenizer().stream()
        for i, chunk in enumerate(chunks):
            stream.push_text(chunk)
            if i == flush_after:
                stream.flush()
        stream.end_input()
        return [(0, t.token) for t in [t async for t in stream]]
    return asyncio.run(run())


async def _our_stream(chunks: list[str], flush_after: int | None) -> list[TokenData]:
    stream = basic.SentenceTokenizer().stream()
    for i, chunk in enumerate(chunks):
        stream.push_text(chunk)
        if i == flush_after:
            stream.flush()
    stream.end_input()
    return [t async for t in stream]


@pytest.mark.parametrize("text", [t for t in TEXTS if t])
@pytest.mark.parametrize("size", [1, 4, 17])
def test_a_stream_sends_livekits_sentences(text: str, size: int) -> None:
    chunks = _chunked(text, size)
    flush_after = None   # a flush inside a word splits it differently (garbage in, out)
    ours = trio.run(_our_stream, chunks, flush_after)
    theirs = _livekit_stream(chunks, flush_after)
    assert [t.token for t in ours] == [token for _, token in theirs]
    segments = [t.segment_id for t in ours]
    assert len(set(segments)) <= 2 and segments == sorted(segments, key=segments.index)


async def test_flush_ends_a_segment_and_sends_what_is_held() -> None:
    stream = basic.SentenceTokenizer(min_sentence_len=0).stream()
    stream.push_text("One sentence here. And a half")
    stream.flush()
    stream.push_text("New segment text. More")
    stream.end_input()
    tokens = [t async for t in stream]
    assert [t.token for t in tokens] == ["One sentence here.", "And a half",
                                         "New segment text.", "More"]
    assert len({t.segment_id for t in tokens[:2]}) == 1
    assert tokens[1].segment_id != tokens[2].segment_id


async def test_a_sentence_is_sent_once_the_next_one_began() -> None:
    stream = basic.SentenceTokenizer(min_sentence_len=0).stream()
    stream.push_text("The first sentence is here.")
    with pytest.raises(trio.WouldBlock):
        stream._recv.receive_nowait()
    stream.push_text(" And a second")
    assert (await stream.__anext__()).token == "The first sentence is here."
    stream.end_input()
    assert [t.token async for t in stream] == ["And a second"]
    with pytest.raises(RuntimeError, match="ended"):
        stream.push_text("more")
