import gc

import pytest
import trio
import trio.testing

from agents_trio.nurseries import EndOfInput


async def test_the_iteration_yields_nothing_and_ends_with_the_input(autojump_clock):
    end = EndOfInput()
    seen: list[object] = []
    finished_at: list[float] = []

    async def consume() -> None:
        async for item in end:
            seen.append(item)
        finished_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.sleep(5)
        assert not finished_at
        end.end()
    assert seen == [] and finished_at == [5]
    assert end.ended


async def test_an_ended_iteration_still_checkpoints():
    end = EndOfInput()
    end.end()
    end.end()   # idempotent
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await end.__anext__()
    with trio.testing.assert_checkpoints():
        with pytest.raises(StopAsyncIteration):
            await end.__anext__()


async def test_a_cancelled_wait_changes_nothing(autojump_clock):
    end = EndOfInput()
    with trio.move_on_after(1):
        await end.__anext__()
    assert not end.ended
    async with trio.open_nursery() as nursery:
        done: list[bool] = []

        async def consume() -> None:
            async for _ in end:
                pass
            done.append(True)

        nursery.start_soon(consume)
        await trio.sleep(1)
        end.end()
    assert done == [True]


async def test_a_second_consumer_is_refused(autojump_clock):
    end = EndOfInput()
    async def consume() -> None:
        async for _ in end:
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.sleep(1)
        with pytest.raises(trio.BusyResourceError):
            await end.__anext__()
        end.end()


async def test_waiting_holds_fewer_objects_than_a_closed_channel_would(autojump_clock):
    # the reason it exists: a VAD stream's iteration waits for a whole session

    async def count(make) -> int:
        async with trio.open_nursery() as nursery:
            iterables = []
            gc.collect()
            before = len(gc.get_objects())
            for _ in range(100):
                it, stop = make()
                iterables.append(stop)

                async def consume(it=it) -> None:
                    async for _ in it:
                        pass
                nursery.start_soon(consume)
            await trio.sleep(1)
            gc.collect()
            held = len(gc.get_objects()) - before
            for stop in iterables:
                stop()
        return held

    def channel():
        send, receive = trio.open_memory_channel[object](0)
        return receive, send.close

    def end_of_input():
        end = EndOfInput()
        return end, end.end

    assert await count(end_of_input) < await count(channel) - 500
