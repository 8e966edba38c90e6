"""`python -m switchboard_client` against a real `switchboard local`: a typed chat through
handoffs to a dispute with consent, and a voice turn from a WAV whose reply is written to a
WAV."""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys
from pathlib import Path

from conftest import LINES, url

from switchboard_client import read_wav, write_wav

SRC = Path(__file__).resolve().parents[1] / "src"


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "switchboard_client", *args], input=stdin, capture_output=True, text=True, env=env, timeout=120
    )


def test_chat_types_lines_and_answers_a_consent(local: str) -> None:
    lines = [LINES["unknown_payment"], LINES["details"], LINES["dispute"], LINES["dispute_tx"], "y"]
    done = cli("chat", url(local), stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "[connected to triage" in out
    assert "-- triage -> idv (transfer)" in out and "-- idv -> disputes (transfer)" in out, out
    assert "allow open_dispute? y/n]" in out, out
    assert "[tool open_dispute]" in out and "dispute is open" in out.lower(), out
    assert "[closed 1000" in out


def test_say_sends_a_wav_and_writes_the_reply(local: str, tmp_path: Path) -> None:
    count = 8000 * 12 // 10  # a 1.2 s tone at 8 kHz: the WAV's own rate is the session's input rate
    tone = struct.pack(f"<{count}h", *(round(16000 * math.sin(2 * math.pi * 440 * i / 8000)) for i in range(count)))
    question = tmp_path / "question.wav"
    question.write_bytes(write_wav(tone, 8000))
    reply = tmp_path / "reply.wav"
    done = cli("say", url(local), str(question), "--out", str(reply))
    assert done.returncode == 0, done.stderr
    assert "(hybrid)" in done.stdout and "[reply audio:" in done.stdout, done.stdout
    pcm, rate = read_wav(str(reply))
    assert rate == 24000 and len(pcm) > 24000, f"at least half a second of reply: {len(pcm)} bytes"


def test_a_refused_session_exits_with_the_reason(local: str) -> None:
    done = cli("chat", url(local), "--agent", "banking")
    assert done.returncode == 1 and "refused (4403)" in done.stderr, done.stderr
