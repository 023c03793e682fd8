"""``inference.TurnDetector(version="v1")`` against a fake inference gateway.

The gateway is a local websocket server speaking LiveKit's ``/eot`` protocol (the protobuf
``ClientMessage``/``ServerMessage`` of ``livekit.protocol.agent_pb.agent_inference``): it
answers ``session_create`` with per-language thresholds and each ``inference_start`` with a
scripted ``eot_prediction``. LiveKit's real cloud transport runs against it through our
adapter. Sockets need the real clock: these tests wait with generous bounds and assert what
was said, never how long it took.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402
from livekit import rtc  # noqa: E402
from livekit.protocol.agent_pb.agent_inference import (ClientMessage, EotPrediction,  # noqa: E402
                                                       InferenceError, ServerMessage,
                                                       SessionCreated)

from agents_trio import inference, open_bridge  # noqa: E402
from agents_trio.io.bridge import AsyncioBridge  # noqa: E402


class FakeGateway:
    """Answers each inference request with the next probability (``None``: an error,
    ``"silent"``: no answer at all)."""

    def __init__(self, probabilities: list[float | None | str]) -> None:
        self.probabilities = list(probabilities)
        self.received: list[str] = []
        self.sample_rate = 0
        self.audio_samples = 0
        self.authorization = ""
        self.port = 0

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        self.authorization = request.headers.get("Authorization", "")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                continue
            client = ClientMessage()
            client.ParseFromString(msg.data)
            kind = client.WhichOneof("message")
            self.received.append(str(kind))
            if kind == "session_create":
                self.sample_rate = client.session_create.settings.sample_rate
                reply = ServerMessage(session_created=SessionCreated(
                    default_thresholds={"en": 0.42, "fr": 0.3}, default_threshold=0.42))
                await ws.send_bytes(reply.SerializeToString())
            elif kind == "input_audio":
                self.audio_samples += client.input_audio.num_samples
            elif kind == "inference_start":
                answer = self.probabilities.pop(0) if self.probabilities else 0.5
                request_id = client.inference_start.request_id
                if answer == "silent":
                    continue
                if answer is None:
                    reply = ServerMessage(request_id=request_id,
                                          error=InferenceError(message="model crashed", code=500))
                else:
                    assert isinstance(answer, float)
                    reply = ServerMessage(request_id=request_id,
                                          eot_prediction=EotPrediction(probability=answer))
                await ws.send_bytes(reply.SerializeToString())
        return ws


@asynccontextmanager
async def _serving(bridge: AsyncioBridge, gateway: FakeGateway) -> AsyncIterator[None]:
    app = web.Application()
    app.router.add_get("/eot", gateway.handle)
    runner = web.AppRunner(app)
    await bridge.run(runner.setup)
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await bridge.run(site.start)
    server: Any = site._server
    gateway.port = server.sockets[0].getsockname()[1]
    try:
        yield
    finally:
        with trio.CancelScope(shield=True):
            await bridge.run(runner.cleanup)


def _frames(seconds: float, rate: int = 48000) -> list[rtc.AudioFrame]:
    per = rate // 100
    return [rtc.AudioFrame(b"\0\0" * per, rate, 1, per) for _ in range(int(seconds * 100))]


async def _detector(bridge: AsyncioBridge, gateway: FakeGateway, *,
                    local_fallback: bool = False
                    ) -> tuple[inference.TurnDetector, aiohttp.ClientSession]:
    http = await bridge.run_sync(aiohttp.ClientSession)
    detector = inference.TurnDetector(
        version="v1", base_url=f"http://127.0.0.1:{gateway.port}", api_key="key",
        api_secret="secret-secret-secret-secret-secret", local_fallback=local_fallback,
        http_session=http)
    return detector, http


async def _connected(gateway: FakeGateway) -> None:
    """Until the gateway saw the session open (LiveKit drops a request made before)."""
    with trio.fail_after(10):
        while "session_create" not in gateway.received:
            await trio.sleep(0.01)


async def test_predictions_and_thresholds_come_from_the_gateway() -> None:
    gateway = FakeGateway([0.83, 0.12])
    async with open_bridge() as bridge, _serving(bridge, gateway):
        detector, http = await _detector(bridge, gateway)
        try:
            async with detector.stream() as stream:
                for frame in _frames(0.5):
                    stream.push_audio(frame)
                await _connected(gateway)
                first = await stream.predict().wait(10)
                assert first is not None and first.end_of_turn_probability == pytest.approx(0.83)
                # the gateway's thresholds, per language
                assert await stream.unlikely_threshold("en") == pytest.approx(0.42)
                assert await stream.unlikely_threshold("fr-FR") == pytest.approx(0.3)
                assert await stream.supports_language("en")
                stream.flush("turn committed")
                second = await stream.predict().wait(10)
                assert second is not None
                assert second.end_of_turn_probability == pytest.approx(0.12)
        finally:
            await bridge.run(http.close)
    assert gateway.sample_rate == 16000
    assert gateway.authorization.startswith("Bearer ")
    assert gateway.audio_samples == 8000  # 0.5 s of 48 kHz audio, resampled to 16 kHz
    control = [k for k in gateway.received if k != "input_audio"]
    assert control[0] == "session_create"
    assert control.count("inference_start") == 2 and "session_flush" in control


async def test_a_gateway_error_answers_the_pending_request_as_likely() -> None:
    """With local_fallback=False a failed gateway ends detection for the stream: the request
    in flight (and every later one) is answered 1.0, so turns end on min_delay."""
    gateway = FakeGateway([None])
    async with open_bridge() as bridge, _serving(bridge, gateway):
        detector, http = await _detector(bridge, gateway)
        try:
            async with detector.stream() as stream:
                for frame in _frames(0.2):
                    stream.push_audio(frame)
                await _connected(gateway)
                answer = await stream.predict().wait(10)
                assert answer is not None and answer.end_of_turn_probability == 1.0
                later = await stream.predict().wait(10)
                assert later is not None and later.end_of_turn_probability == 1.0
        finally:
            await bridge.run(http.close)
    assert gateway.received.count("inference_start") == 1


async def test_a_timed_out_request_switches_to_the_local_model() -> None:
    """LiveKit's cloud-to-local fallback: a request the gateway leaves unanswered past the
    prediction timeout is withdrawn as timed out, and the stream goes on with the local
    ``v1-mini`` model (real weights), its shipped thresholds rescaled as LiveKit does."""
    pytest.importorskip("livekit.local_inference")
    gateway = FakeGateway(["silent"])
    async with open_bridge() as bridge, _serving(bridge, gateway):
        detector, http = await _detector(bridge, gateway, local_fallback=True)
        try:
            async with detector.stream() as stream:
                for frame in _frames(1.0):
                    stream.push_audio(frame)
                await _connected(gateway)
                assert await stream.predict().wait(stream.prediction_timeout) is None
                stream.cancel_inference(timed_out=True)
                for frame in _frames(1.0):
                    stream.push_audio(frame)
                local = await stream.predict().wait(30)
                assert local is not None and 0.0 <= local.end_of_turn_probability <= 1.0
                assert detector.model == "turn-detector-v1-mini"
                # LiveKit's shipped English threshold, scaled by the gateway's own (0.42/0.42)
                assert await stream.unlikely_threshold("en") == pytest.approx(0.36)
        finally:
            await bridge.run(http.close)
    assert gateway.received.count("inference_start") == 1
