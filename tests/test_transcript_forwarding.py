"""The agent's transcription on its way to the output: segments in order, nothing running
between them, close and cancel. (The texts are already the transcription node's output: the
speech runs the node, see test_transcription_node_history.py.)"""

from __future__ import annotations

import trio
import trio.testing

from agents_trio.conversation import TranscriptForwarding


class Sink:
    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.log: list[tuple[str, float]] = []

    async def capture_text(self, text: str) -> None:
        await trio.sleep(self.delay)
        self.log.append((text, trio.current_time()))

    def flush(self) -> None:
        self.log.append(("|", trio.current_time()))


def _errors() -> tuple[list[Exception], object]:
    seen: list[Exception] = []
    return seen, lambda error, sink: seen.append(error)


async def test_segments_reach_the_output_in_order_and_nothing_runs_between_them(
        autojump_clock):
    sink = Sink(delay=1.0)  # the first segment is still being delivered when the second ends
    errors, on_error = _errors()
    async with trio.open_nursery() as nursery:
        forwarding = TranscriptForwarding(nursery, lambda: sink, on_error)
        assert nursery.child_tasks == frozenset()
        forwarding.send("one ", final=False)
        forwarding.send("two", final=True)
        forwarding.send("three", final=True)
        await forwarding.wait_delivered()
        assert [text for text, _ in sink.log] == ["one ", "two", "|", "three", "|"]
        await trio.testing.wait_all_tasks_blocked()
        assert nursery.child_tasks == frozenset()  # no task waits for the next text
    assert errors == []


async def test_a_segment_without_output_is_dropped(autojump_clock):
    sink = Sink()
    outputs: list[Sink | None] = [None, sink]
    errors, on_error = _errors()
    async with trio.open_nursery() as nursery:
        forwarding = TranscriptForwarding(nursery, lambda: outputs[0], on_error)
        forwarding.send("lost ", final=False)
        outputs[0] = sink  # an output appearing mid-segment does not take the rest of it
        forwarding.send("too", final=True)
        forwarding.send("kept", final=True)
        await forwarding.wait_delivered()
    assert [text for text, _ in sink.log] == ["kept", "|"]


async def test_close_ends_the_open_segment_and_ignores_later_texts(autojump_clock):
    sink = Sink()
    errors, on_error = _errors()
    async with trio.open_nursery() as nursery:
        forwarding = TranscriptForwarding(nursery, lambda: sink, on_error)
        forwarding.send("cut ", final=False)
        forwarding.close()
        forwarding.send("after", final=True)
        await forwarding.wait_delivered()
    assert [text for text, _ in sink.log] == ["cut ", "|"]


async def test_cancel_stops_the_deliveries_in_progress_and_later_ones(autojump_clock):
    sink = Sink(delay=10.0)
    errors, on_error = _errors()
    async with trio.open_nursery() as nursery:
        forwarding = TranscriptForwarding(nursery, lambda: sink, on_error)
        forwarding.send("slow", final=True)
        forwarding.send("queued", final=True)
        await trio.sleep(1)
        forwarding.cancel()
        forwarding.send("late", final=True)
        await forwarding.wait_delivered()
        assert trio.current_time() == 1
    assert sink.log == []
    assert errors == []


class FailingOnce(Sink):
    async def capture_text(self, text: str) -> None:
        if text == "broken":
            raise RuntimeError("output broke")
        await super().capture_text(text)


async def test_a_failing_output_loses_its_segment_only(autojump_clock):
    sink = FailingOnce()
    errors, on_error = _errors()
    async with trio.open_nursery() as nursery:
        forwarding = TranscriptForwarding(nursery, lambda: sink, on_error)
        forwarding.send("broken", final=True)
        forwarding.send("fine", final=True)
        await forwarding.wait_delivered()
    assert [text for text, _ in sink.log] == ["fine", "|"]
    assert [str(e) for e in errors] == ["output broke"]
