"""Our LiveKit-protocol RemoteSession against our host (memory streams, virtual time) and
against a misbehaving peer: events by callback and by iterator, errors, timeouts, a broken
frame, unknown response ids, a bounded event queue, the pending-request limit."""

from __future__ import annotations

import pytest
import trio
import trio.testing

pytest.importorskip("livekit.protocol")

from agents_trio.chat import ChatMessage, FunctionCall  # noqa: E402
from agents_trio.remote import lk  # noqa: E402
from agents_trio.remote.errors import (RemoteSessionClosedError,  # noqa: E402
                                       RemoteSessionError)
from agents_trio.remote.lk.codec import LkFrameReader, encode_message, pb  # noqa: E402
from lk_helpers import lk_attach, lk_hosted  # noqa: E402


async def test_our_client_against_our_host(autojump_clock) -> None:
    async with lk_hosted() as host, trio.open_nursery() as nursery:
        async with lk.open_remote_session(lk_attach(host, nursery)) as remote:
            states: list[int] = []
            remote.on("agent_state_changed",
                      lambda ev: states.append(ev.agent_state_changed.new_state))
            await remote.wait_for_ready()
            ran = await remote.run("weather in Paris?")
            items = lk.decode_chat_items(ran.items)
            assert [type(i).__name__ for i in items] == [
                "ChatMessage", "FunctionCall", "FunctionCallOutput", "ChatMessage"]
            assert isinstance(items[1], FunctionCall) and items[1].arguments == \
                '{"location": "Paris"}'
            with pytest.raises(RemoteSessionError, match="the model is down"):
                await remote.run("boom")
            history = lk.decode_chat_items((await remote.get_chat_history()).items)
            assert [i.text_content for i in history if isinstance(i, ChatMessage)][:2] == [
                "weather in Paris?", "Let me look."]
            assert (await remote.get_framework_info()).sdk == "python"
            usage = (await remote.get_session_usage()).usage
            llm_usage = [u.llm for u in usage.model_usage if u.HasField("llm")]
            assert len(llm_usage) == 1 and llm_usage[0].provider == "FakeLLM"
            await remote.ping()
            assert pb.AS_THINKING in states
            names = []
            while True:
                try:
                    names.append(remote.events().receive_nowait().WhichOneof("event"))
                except trio.WouldBlock:
                    break
            assert "conversation_item_added" in names and "function_tools_executed" in names
            assert "session_usage_updated" in names
        nursery.cancel_scope.cancel()


async def _fake_host(stream: trio.abc.Stream, behaviour: str) -> None:
    reader = LkFrameReader(stream)
    while (message := await reader.receive()) is not None:
        rid = message.request.request_id
        if behaviour == "unknown_id":
            await stream.send_all(encode_message(pb.AgentSessionMessage(
                response=pb.SessionResponse(request_id="nobody", pong=pb.SessionResponse.Pong()))))
            await stream.send_all(encode_message(pb.AgentSessionMessage(
                response=pb.SessionResponse(request_id=rid, pong=pb.SessionResponse.Pong()))))
        elif behaviour == "oversized":
            await stream.send_all((1 << 30).to_bytes(4, "big"))
        elif behaviour == "events":
            for _ in range(20):
                await stream.send_all(encode_message(pb.AgentSessionMessage(
                    event=pb.AgentSessionEvent(error=pb.AgentSessionEvent.Error(message="x")))))
            await stream.send_all(encode_message(pb.AgentSessionMessage(
                response=pb.SessionResponse(request_id=rid, pong=pb.SessionResponse.Pong()))))
        # "silent": never answers


@pytest.mark.parametrize("behaviour", ["unknown_id", "oversized", "events", "silent"])
async def test_our_client_against_a_misbehaving_host(behaviour: str, autojump_clock) -> None:
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_fake_host, server, behaviour)
        async with lk.open_remote_session(client, max_events=5) as remote:
            if behaviour == "oversized":
                with pytest.raises(RemoteSessionClosedError, match="broken frame"):
                    await remote.ping()
                with pytest.raises(RemoteSessionClosedError):
                    await remote.ping()
            elif behaviour == "silent":
                start = trio.current_time()
                with pytest.raises(TimeoutError):
                    await remote.ping(timeout=3)
                assert trio.current_time() - start == pytest.approx(3)
                with pytest.raises(TimeoutError):
                    await remote.wait_for_ready(timeout=2, retry_interval=0.5)
            else:
                await remote.ping()
                if behaviour == "events":
                    assert remote.events_dropped == 15
        nursery.cancel_scope.cancel()


async def test_the_client_limits_its_pending_requests(autojump_clock) -> None:
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_fake_host, server, "silent")
        async with lk.open_remote_session(client, max_pending_requests=2) as remote:
            closed = []

            async def ping_until_closed() -> None:
                with pytest.raises(RemoteSessionClosedError) as info:
                    await remote.ping(timeout=100)
                closed.append(info.value)

            async with trio.open_nursery() as pings:
                for _ in range(2):
                    pings.start_soon(ping_until_closed)
                await trio.testing.wait_all_tasks_blocked()
                with pytest.raises(RemoteSessionError, match="too many pending requests"):
                    await remote.ping()
                await remote.aclose()  # the two waiting are told the connection closed
            assert len(closed) == 2
        nursery.cancel_scope.cancel()


async def test_a_request_cancelled_mid_frame_ends_the_connection_instead_of_corrupting_it(
) -> None:
    """A host that reads slowly: a request cancelled while its frame is half written must not
    leave the half frame on the stream for the next request to follow."""
    from trio.testing import lockstep_stream_pair

    from agents_trio.remote.lk.client import RemoteSession

    client_side, host_side = lockstep_stream_pair()
    remote = RemoteSession(client_side)
    with trio.move_on_after(1) as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(remote.ping)
            await host_side.receive_some(3)  # the host takes 3 bytes of the frame, then stalls
            await trio.testing.wait_all_tasks_blocked()  # the ping waits in the middle of its frame
            scope.cancel()
    with pytest.raises(RemoteSessionClosedError):
        await remote.ping(timeout=1)


async def test_a_request_timeout_covers_sending_to_a_host_that_stopped_reading(
        autojump_clock) -> None:
    """``timeout`` bounds the whole call: a host that stops reading (its stream full) used to
    hold the call past its timeout, in the send, until an outer cancel came."""
    from trio.testing import lockstep_stream_pair

    from agents_trio.remote.lk.client import RemoteSession

    client_side, _host_side = lockstep_stream_pair()   # nobody reads the host's side
    remote = RemoteSession(client_side)
    start = trio.current_time()
    with trio.fail_after(30):
        with pytest.raises(TimeoutError, match="timed out after 2 s"):
            await remote.ping(timeout=2)
    assert trio.current_time() - start == pytest.approx(2.0)
    # the frame was cut: the connection is closed rather than left corrupted
    with pytest.raises(RemoteSessionClosedError):
        await remote.ping(timeout=1)
