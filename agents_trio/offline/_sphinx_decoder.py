"""PocketSphinx decoding, run in a child process by ``agents_trio.offline.SphinxSTT`` (the
step of an ``agents_trio.blocking`` worker): raw mono 16-bit PCM at 16 kHz in, per utterance
the messages ``start``, ``final`` (when something was recognized) and ``end`` out, with times
in seconds of audio.
"""

from __future__ import annotations

from typing import Any

RATE = 16000


class UtteranceDecoder:
    """Finds utterances with PocketSphinx's endpointer and decodes each one whole.

    The endpointer only says where speech is; each utterance is decoded as a whole when it
    ends, from ``preroll`` before its start to ``hangover`` after its end (the endpointer
    trims soft word ends). Decoding whole utterances keeps the decoder's running state out of
    the result (an incremental pass that goes on into the silence after the speech can drop
    the last word of a grammar phrase).
    """

    def __init__(self, *, jsgf: str | None = None, kws: str | None = None, vad_mode: int = 3,
                 min_speech: float = 0.2, preroll: float = 0.15, hangover: float = 0.3) -> None:
        import numpy as np
        from pocketsphinx import Decoder, Endpointer

        self._np = np
        self._rng = np.random.default_rng(0)
        config: dict[str, Any] = {"samprate": RATE, "loglevel": "FATAL"}
        if jsgf:
            # no filler words inside the grammar: with them, trailing silence after the last
            # word often makes the search drop that word
            config["jsgf"], config["fsgusefiller"] = jsgf, False
        elif kws:
            config["kws"] = kws
        self._decoder = Decoder(**config)
        self._endpointer = Endpointer(vad_mode=vad_mode, sample_rate=RATE)
        self._frame_bytes = self._endpointer.frame_bytes
        self.min_speech, self.preroll, self.hangover = min_speech, preroll, hangover
        self._pending = b""          # bytes of an incomplete endpointer frame
        self._audio = bytearray()    # raw audio from sample ``_base`` on
        self._base = 0
        self._read = 0               # samples taken by the endpointer so far
        self._in_utterance = False
        self._start = 0.0
        self._end_at: float | None = None   # speech ended here; decoded after the hangover

    def __call__(self, chunk: bytes) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        data = self._pending + chunk
        n = len(data) - len(data) % self._frame_bytes
        self._pending = data[n:]
        for i in range(0, n, self._frame_bytes):
            self._frame(data[i:i + self._frame_bytes], out)
        return out

    def finish(self) -> list[dict[str, object]]:
        """The end of the audio: the utterance in progress ends here."""
        out: list[dict[str, object]] = []
        if self._in_utterance:
            self._finish(self._end_at if self._end_at is not None else self._read / RATE, out)
        return out

    def _frame(self, frame: bytes, out: list[dict[str, object]]) -> None:
        ep = self._endpointer
        self._audio += frame
        self._read += len(frame) // 2
        was_speech = ep.in_speech
        ep.process(frame)
        if ep.in_speech and not was_speech:
            if not self._in_utterance:
                self._in_utterance = True
                self._start = max(self._base / RATE, ep.speech_start - self.preroll)
                out.append({"type": "start", "start": round(ep.speech_start, 3)})
            self._end_at = None
        elif was_speech and not ep.in_speech:
            self._end_at = ep.speech_end
        if (self._in_utterance and self._end_at is not None
                and self._read / RATE >= self._end_at + self.hangover):
            self._finish(self._end_at, out)
        if not self._in_utterance and len(self._audio) > 2 * 3 * RATE:   # keep the last 2 s
            drop = len(self._audio) // 2 - 2 * RATE
            del self._audio[:2 * drop]
            self._base += drop

    def _finish(self, end: float, out: list[dict[str, object]]) -> None:
        np, base = self._np, self._base
        first = max(base, int(self._start * RATE))
        last = min(self._read, int((end + self.hangover) * RATE))
        samples = np.frombuffer(bytes(self._audio[2 * (first - base):2 * (last - base)]),
                                np.int16)
        # a little noise: digital silence (exact zeros, as synthesized speech has) upsets the
        # decoder's feature normalization
        noisy = np.clip(samples + self._rng.normal(0.0, 4.0, len(samples)), -32768, 32767)
        decoder = self._decoder
        decoder.start_utt()
        decoder.process_raw(noisy.astype(np.int16).tobytes(), full_utt=True)
        decoder.end_utt()
        hyp = decoder.hyp()
        text = hyp.hypstr.strip() if hyp is not None else ""
        if text and end - self._start >= self.min_speech:
            out.append({"type": "final", "text": text,
                        "confidence": min(1.0, max(0.0, float(hyp.prob))),
                        "start": round(self._start, 3), "end": round(end, 3)})
        out.append({"type": "end", "start": round(self._start, 3), "end": round(end, 3)})
        self._in_utterance, self._end_at = False, None
