"""The benchmark's Pipecat side runs the scripted conversation: one session on Pipecat's own
pipeline, on an asyncio loop whose clock is virtual (``bench.virtual_asyncio``), so nothing
waits on the wall clock. Skipped where pipecat-ai is not installed (it is in ``.[bench]``).

Speed is never asserted here; these check that the conversation happens as scripted: every
utterance transcribed and in the context, every reply asked for once and heard, and the story
interrupted by the utterance scripted to interrupt it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("pipecat")

from bench import analysis, core, virtual_asyncio  # noqa: E402
from bench import pipecat_side as side  # noqa: E402


def run_one(kind: str, *, transforms: bool, index: int = 1) -> tuple[core.Probe, Any]:
    """One session of the ``kind`` script; its probe and its LLM context's messages."""
    bots: list[side.Bot] = []

    async def main() -> core.Probe:
        side.quiet_logs()
        network = side.Network()
        net = asyncio.create_task(network.run())
        probe = core.Probe(index=index, script=core.build_script(index, kind=kind))
        try:
            await side.run_session(probe, network, transforms=transforms, on_bot=bots.append)
        finally:
            net.cancel()
        return probe

    probe = virtual_asyncio.run(main())
    return probe, bots[0].context.messages


def texts(messages: list[Any], role: str) -> list[str]:
    return [m["content"] for m in messages
            if isinstance(m, dict) and m.get("role") == role and isinstance(m.get("content"), str)]


@pytest.mark.parametrize(("kind", "transforms"), [("full", False), ("quick", True)])
def test_scripted_conversation_completes(kind: str, transforms: bool) -> None:
    probe, messages = run_one(kind, transforms=transforms)
    script = probe.script
    samples = analysis.session_samples(probe)
    assert probe.error is None
    assert samples["missing"] == []
    # every utterance transcribed, and the user turns in the context in script order
    assert sorted(probe.stt_final) == [u.index for u in script.utterances]
    assert texts(messages, "user") == [u.text for u in script.utterances]
    # every scripted reply asked for once, nothing else asked; every spoken one heard
    assert sorted(probe.llm_request) == [r.index for r in script.replies]
    assert probe.llm_other == []
    assert [t["reply"] for t in samples["turns"]] == [r.index for r in script.replies if r.text]
    assert set(probe.sink_first_frame) == {r.index for r in script.replies if r.text}
    # the replies nobody interrupted are in the context whole (Pipecat may re-space them)
    spoken = [" ".join(t.split()) for t in texts(messages, "assistant")]
    interrupted = {u.interrupts for u in script.utterances if u.interrupts is not None}
    for r in script.replies:
        if r.text and r.index not in interrupted:
            assert r.text in spoken


def test_the_story_is_interrupted_where_scripted() -> None:
    probe, messages = run_one("full", transforms=False)
    script = probe.script
    (stop,) = [u for u in script.utterances if u.interrupts is not None]
    story = stop.interrupts
    assert probe.t0 is not None
    # the VAD's start of speech comes on the frame that completes 3 speech frames
    nominal = probe.t0 + stop.start + core.VAD_START_FRAMES * core.FRAME
    threshold = probe.vad_threshold[stop.index]
    assert abs(threshold - nominal) < core.FRAME / 2
    # the output drops the story's audio at that point, and its LLM and TTS streams stop
    cleared = [(t, r) for t, r in probe.clears if t >= threshold]
    assert cleared and cleared[0][1] == story
    assert story in probe.llm_cancelled and story in probe.tts_cancelled
    assert len(analysis.session_samples(probe)["interrupts"]) == 1
    # only what was said before the interruption is in the context, not the whole story
    story_text = " ".join(script.replies[story].text.split())
    heard = [t for t in (" ".join(m.split()) for m in texts(messages, "assistant"))
             if story_text.startswith(t[:20])]
    assert heard and all(len(t) < len(story_text) for t in heard)
    # the reply that follows is answered, and no handoff is claimed (Pipecat has none)
    assert stop.reply is not None and stop.reply in probe.sink_first_frame
    assert probe.on_enter_new is None and not probe.handoff_supported
