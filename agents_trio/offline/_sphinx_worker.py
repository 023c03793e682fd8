"""PocketSphinx decoding in its own process (started by ``agents_trio.offline.SphinxSTT``).

Reads raw mono 16-bit PCM at 16 kHz on stdin until EOF; writes one JSON object per line on
stdout: ``{"type": "ready"}``, then per utterance ``start``, ``final`` (when
something was recognized) and ``end``, with times in seconds of audio. Run as a script (it
imports only pocketsphinx and the standard library, so it starts fast).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

RATE = 16000


def emit(kind: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"type": kind, **fields}) + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jsgf")
    parser.add_argument("--kws")
    parser.add_argument("--vad-mode", type=int, default=3)
    parser.add_argument("--min-speech", type=float, default=0.2)
    parser.add_argument("--preroll", type=float, default=0.15)
    parser.add_argument("--hangover", type=float, default=0.3)
    args = parser.parse_args()

    import numpy as np
    from pocketsphinx import Decoder, Endpointer

    rng = np.random.default_rng(0)

    config: dict[str, Any] = {"samprate": RATE, "loglevel": "FATAL"}
    if args.jsgf:
        # no filler words inside the grammar: with them, trailing silence after the last
        # word often makes the search drop that word
        config["jsgf"], config["fsgusefiller"] = args.jsgf, False
    elif args.kws:
        config["kws"] = args.kws
    decoder = Decoder(**config)
    endpointer = Endpointer(vad_mode=args.vad_mode, sample_rate=RATE)
    frame_bytes = endpointer.frame_bytes
    emit("ready")

    # The endpointer only says where speech is; each utterance is then decoded as a whole,
    # from a little before its start to ``hangover`` after its end (the endpointer trims soft
    # word ends). Decoding whole utterances keeps the decoder's state out of the result (an
    # incremental pass that goes on into the silence after it can drop the last word).
    stdin = sys.stdin.buffer
    audio = bytearray()          # raw audio from sample ``base`` on
    base = 0
    read = 0                     # samples read so far
    in_utterance = False
    start = 0.0
    end_at: float | None = None  # speech ended here; the utterance ends after the hangover

    def finish(end: float) -> None:
        nonlocal in_utterance, end_at
        first = max(base, int(start * RATE))
        last = min(read, int((end + args.hangover) * RATE))
        samples = np.frombuffer(bytes(audio[2 * (first - base):2 * (last - base)]), np.int16)
        # a little noise: digital silence (exact zeros, as synthesized speech has) upsets the
        # decoder's feature normalization
        noisy = np.clip(samples + rng.normal(0.0, 4.0, len(samples)), -32768, 32767)
        decoder.start_utt()
        decoder.process_raw(noisy.astype(np.int16).tobytes(), full_utt=True)
        decoder.end_utt()
        hyp = decoder.hyp()
        text = hyp.hypstr.strip() if hyp is not None else ""
        if text and end - start >= args.min_speech:
            emit("final", text=text, confidence=min(1.0, max(0.0, float(hyp.prob))),
                 start=start, end=end)
        emit("end", start=start, end=end)
        in_utterance, end_at = False, None

    while True:
        frame = stdin.read(frame_bytes)
        if len(frame) < frame_bytes:
            if in_utterance:
                finish(end_at if end_at is not None else read / RATE)
            break
        audio += frame
        read += len(frame) // 2
        was_speech = endpointer.in_speech
        endpointer.process(frame)
        if endpointer.in_speech and not was_speech:
            if not in_utterance:
                in_utterance = True
                start = max(base / RATE, endpointer.speech_start - args.preroll)
                emit("start", start=endpointer.speech_start)
            end_at = None
        elif was_speech and not endpointer.in_speech:
            end_at = endpointer.speech_end
        if in_utterance and end_at is not None and read / RATE >= end_at + args.hangover:
            finish(end_at)
        if not in_utterance and len(audio) > 2 * 3 * RATE:      # keep the last 2 s
            drop = len(audio) // 2 - 2 * RATE
            del audio[:2 * drop]
            base += drop


if __name__ == "__main__":
    main()
