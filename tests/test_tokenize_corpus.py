"""The sentence tokenizer against LiveKit's ``tokenize.basic.SentenceTokenizer`` on a corpus of
tricky text: whole texts at several ``min_sentence_len`` (with and without ``retain_format``),
and streams whose pushes split the text at arbitrary points, with and without a flush."""

from __future__ import annotations

import asyncio
import random

import pytest
import trio

from agents_trio.tokenize import basic

lk_basic = pytest.importorskip("livekit.agents.tokenize.basic")

CORPUS = [
    # abbreviations, titles, initials, acronyms, company suffixes
    "Dr. Smith met Mrs. Jones and Mr. Brown at St. Mary's. Prof. Lee was late.",
    "J. R. R. Tolkien wrote it. I met J. Doe there.",
    "He moved to the U.S. He liked it. Then the U.K. However it rained.",
    "Acme Inc. They make anvils. Acme Ltd. is another one. Bob Jr. said hi.",
    "She has a Ph.D. in physics. He does not.",
    "We use e.g. this and i.e. that. Also a.k.a. the other one.",
    "Call me at 5 p.m. Tomorrow works too.",
    # decimals, versions, numbers
    "Pi is 3.14159 roughly. Version 1.2.3 shipped. The IP is 192.168.1.1 today.",
    "It costs $4.50. That is cheap. 2. Second item. 3. Third item.",
    # web addresses
    "Visit example.com for more. Or mail me at a@b.org please. The site.io is down.",
    "Go to www.livekit.io now. It is great.",
    # ellipses
    "Wait... what? Hmm.... Okay then... fine.",
    "So..., anyway. And then.. nothing.",
    # quotes
    "She said \"Stop.\" Then she left. He asked \"Why?\" and nobody answered.",
    "“Run!” he cried. ‘Fine.’ she said. \"Is it?\"",
    "He wrote 'done.' and left. Next line.",
    # repeated marks
    "Really?! Yes!! No?? Maybe!?",
    "Hello!How are you?Fine.Thanks.",
    # scripts
    "这是第一句。这是第二句！这是第三句？好。",
    "مرحبا؟ كيف حالك۔ ठीक है। बहुत अच्छा॥ done.",
    # white space and line breaks
    "Line one.\nLine two is here.\n\nLine three ends the text here.",
    "Hi!  Two  spaces inside here. Yes.\tA tab. \r\nWindows line.",
    "List:\n- first item\n- second item\nEnd of list.",
    "   leading space. trailing space.   ",
    "No stop at the end",
    "",
    ".",
    "A. B. C. D.",
    "x y. z. End of the text here.",
]


@pytest.mark.parametrize("retain_format", [False, True])
@pytest.mark.parametrize("min_len", [0, 1, 5, 20, 40])
def test_whole_texts_give_livekits_sentences(min_len: int, retain_format: bool) -> None:
    ours = basic.SentenceTokenizer(min_sentence_len=min_len, retain_format=retain_format)
    theirs = lk_basic.SentenceTokenizer(min_sentence_len=min_len, retain_format=retain_format)
    for text in CORPUS:
        assert ours.tokenize(text) == theirs.tokenize(text), text


def test_offsets_are_livekits() -> None:
    from livekit.agents.tokenize import _basic_sent

    for text in CORPUS:
        for retain_format in (False, True):
            assert basic.split_sentences(text, 0, retain_format) == \
                _basic_sent.split_sentences(text, 0, retain_format), text


def _random_chunks(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 12))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def _livekit_tokens(options: dict[str, int], chunks: list[str], flush_after: int | None
                    ) -> list[str]:
    async def run() -> list[str]:
        stream = lk_basic.SentenceTokenizer(**options).stream()
        for i, chunk in enumerate(chunks):
            stream.push_text(chunk)
            if i == flush_after:
                stream.flush()
        stream.end_input()
        return [t.token async for t in stream]
    return asyncio.run(run())


async def _our_tokens(options: dict[str, int], chunks: list[str], flush_after: int | None
                      ) -> list[str]:
    stream = basic.SentenceTokenizer(**options).stream()
    for i, chunk in enumerate(chunks):
        stream.push_text(chunk)
        if i == flush_after:
            stream.flush()
    stream.end_input()
    return [t.token async for t in stream]


@pytest.mark.parametrize("seed", range(6))
def test_streams_split_anywhere_give_livekits_sentences(seed: int) -> None:
    rng = random.Random(seed)
    for text in CORPUS:
        if len(text) < 2:
            continue
        options = {"min_sentence_len": rng.choice([0, 5, 20]),
                   "stream_context_len": rng.choice([0, 1, 10, 30])}
        chunks = _random_chunks(text, rng)
        flush_after = rng.choice([None, rng.randrange(len(chunks))])
        ours = trio.run(_our_tokens, options, chunks, flush_after)
        assert ours == _livekit_tokens(options, chunks, flush_after), (text, chunks, options)
