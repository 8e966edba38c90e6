"""Shared by the conformance drivers: what a stock Nova Sonic client needs to reach
`switchboard sim` (its endpoint, TLS with the simulator's certificate), the user's
"speech" (phrase tones the simulator recognises), and the verdict.

Each driver runs in its own virtual environment (the clients pin different
`aws_sdk_bedrock_runtime` versions); this module imports only what all of them have.
"""

import asyncio
import json
import logging
import math
import os
import struct
import sys
import time
from copy import deepcopy

ENDPOINT = os.environ["CONFORMANCE_ENDPOINT"]  # https://127.0.0.1:PORT
CA_FILE = os.environ["CONFORMANCE_CA_FILE"]  # the simulator's certificate (PEM)
TURNS = int(os.environ.get("CONFORMANCE_TURNS", "3"))
TURN_TIMEOUT_S = float(os.environ.get("CONFORMANCE_TURN_TIMEOUT_S", "15"))
REGION = "us-east-1"
MODEL_ID = os.environ.get("CONFORMANCE_MODEL_ID", "amazon.nova-2-sonic-v1:0")

# Warnings and errors of the clients' stdlib loggers, with their level (run.sh fails on
# ERROR lines).
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

INPUT_RATE = 16_000
FRAME_MS = 20
FRAME_BYTES = INPUT_RATE * FRAME_MS // 1000 * 2


def phrase_tone(phrase_id: int, ms: int, amplitude: int = 8000) -> bytes:
    """PCM16 LE at 16 kHz: the tone `switchboard sim` hears as phrase `phrase_id`
    (400 + 100 * id Hz, see dataplane/sim/src/sonic/audio.rs)."""
    frequency = 400.0 + 100.0 * phrase_id
    count = ms * INPUT_RATE // 1000
    return b"".join(
        struct.pack("<h", int(amplitude * math.sin(2 * math.pi * frequency * n / INPUT_RATE))) for n in range(count)
    )


def frames(pcm: bytes):
    """`pcm` as 20 ms frames (the last one padded with silence)."""
    for at in range(0, len(pcm), FRAME_BYTES):
        yield pcm[at : at + FRAME_BYTES].ljust(FRAME_BYTES, b"\0")


SILENCE = b"\0" * FRAME_BYTES


def trusting(base):
    """A subclass of the smithy CRT HTTP client `base` that trusts the simulator's
    certificate. smithy-http has no TLS option: replace the private `_tls_ctx`, and keep
    the subclass (and so the trust) when the SDK deep-copies the transport."""
    from awscrt import io as crt_io

    class Trusting(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            options = crt_io.TlsContextOptions()
            options.override_default_trust_store_from_path(ca_filepath=CA_FILE)
            self._tls_ctx = crt_io.ClientTlsContext(options)

        def __deepcopy__(self, memo):
            return type(self)(eventloop=self._eventloop, client_config=deepcopy(self._config))

    Trusting.__name__ = f"Trusting{base.__name__}"
    return Trusting


def tolerate_stream_completed_at_teardown():
    """Logs AWS_ERROR_HTTP_STREAM_HAS_COMPLETED from a CRT request writer as a warning
    instead of an unhandled task error (which run.sh fails on). For a client whose own
    teardown causes it whatever the server does: LiveKit's `aclose()` closes the SDK's
    output stream before its input stream and calls the resulting error "mostly
    cosmetic". Every other unhandled exception still goes to the default handler."""
    loop = asyncio.get_running_loop()

    def handler(loop, context):
        error = context.get("exception")
        if error is not None and "AWS_ERROR_HTTP_STREAM_HAS_COMPLETED" in repr(error) + str(error.__context__):
            logging.getLogger("conformance").warning("client teardown: %s", error)
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


def fake_credentials():
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "AKIDCONFORMANCE")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    os.environ.setdefault("AWS_REGION", REGION)


class Turns:
    """Counts reply audio per user turn: a turn is answered once audio arrived for it and
    then stopped for a while (the reply is over)."""

    def __init__(self):
        self.audio = [0] * TURNS
        self.current = -1
        self.last_audio = 0.0

    def begin(self, turn: int):
        self.current = turn
        self.last_audio = 0.0

    def on_audio(self, nbytes: int):
        if 0 <= self.current < TURNS:
            self.audio[self.current] += nbytes
            self.last_audio = time.monotonic()

    async def wait_answered(self, quiet_s: float = 0.6) -> bool:
        deadline = time.monotonic() + TURN_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.audio[self.current] and time.monotonic() - self.last_audio > quiet_s:
                return True
            await asyncio.sleep(0.05)
        return False


async def speak_turns(turns: Turns, send_frame, realtime: bool = True):
    """The conversation: phrase `n + 1` for 600 ms, then silence until the reply is over,
    for every turn. `send_frame(pcm)` hands a 20 ms frame to the client under test."""
    stop = asyncio.Event()

    async def microphone(queue: asyncio.Queue):
        next_at = time.monotonic()
        while not stop.is_set():
            try:
                frame = queue.get_nowait()
            except asyncio.QueueEmpty:
                frame = SILENCE
            await send_frame(frame)
            next_at += FRAME_MS / 1000
            if realtime:
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    queue: asyncio.Queue = asyncio.Queue()
    mic = asyncio.create_task(microphone(queue))
    try:
        for turn in range(TURNS):
            turns.begin(turn)
            for frame in frames(phrase_tone(turn + 1, 600)):
                queue.put_nowait(frame)
            if not await turns.wait_answered():
                break
    finally:
        stop.set()
        await mic


def verdict(client: str, turns: Turns, started: float) -> int:
    result = {
        "client": client,
        "turns": TURNS,
        "audio_bytes_per_turn": turns.audio,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(result), flush=True)
    missing = [n + 1 for n, b in enumerate(turns.audio) if b == 0]
    if missing:
        print(f"{client}: no reply audio for turn(s) {missing}", file=sys.stderr)
        return 1
    return 0
