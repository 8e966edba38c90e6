"""`switchboard-client` (or `python -m switchboard_client`): a small command line over the
client.

    switchboard-client chat ws://127.0.0.1:8080/v1/session [--agent triage] [--api-key KEY]
        Lines from stdin are typed into the session, one turn at a time; replies, handoffs
        and tool calls are printed; a consent request is answered by the next line (y/n).
        Ends at the end of input, once the last turn is answered.

    switchboard-client say ws://127.0.0.1:8080/v1/session question.wav [--out reply.wav]
        One voice turn: the WAV (mono 16-bit PCM at 8, 16 or 24 kHz) is sent as the caller's
        speech, then silence until the agent has answered; the transcripts are printed and
        the reply audio written to --out (PCM16, 24 kHz).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any, cast

from .audio import read_wav, write_wav
from .protocol import SessionStart
from .session import AudioChunk, Session, SessionRefused


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="switchboard-client", description="Talk to a Switchboard agent.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help in (("chat", "type lines from stdin"), ("say", "one voice turn from a WAV")):
        command = commands.add_parser(name, help=help)
        command.add_argument("url", help="the session endpoint, e.g. ws://127.0.0.1:8080/v1/session")
        command.add_argument("--agent", help="the agent to start with (default: the gateway's default)")
        command.add_argument(
            "--api-key", default=os.environ.get("SWITCHBOARD_API_KEY"), help="an API key (env SWITCHBOARD_API_KEY)"
        )
        command.add_argument("--token", default=os.environ.get("SWITCHBOARD_TOKEN"), help="a JWT (env SWITCHBOARD_TOKEN)")
        if name == "say":
            command.add_argument("wav", help="the caller's speech: mono 16-bit PCM at 8000, 16000 or 24000 Hz")
            command.add_argument("--out", help="write the reply audio here (WAV, PCM16 24 kHz)")
            command.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the answer")
    return parser.parse_args(argv)


def _show(session: Session) -> None:
    def line(message: Any) -> None:
        if message["type"] == "bidi_transcript_stream" and message["is_final"]:
            who = "you" if message["role"] == "user" else session.agent
            print(f"{who}: {message['text']}", flush=True)
        elif message["type"] == "handoff":
            print(f"-- {message['from']} -> {message['to']} ({message['kind']})", flush=True)
        elif message["type"] == "tool_start":
            print(f"[tool {message['name']}]", flush=True)
        elif message["type"] == "tool_error":
            print(f"[tool {message['name']} failed: {message['kind']}] {message['user_message']}", flush=True)
        elif message["type"] == "consent_request":
            print(f"[{message['description']}: allow {message['name']}? y/n]", flush=True)
        elif message["type"] == "bidi_error":
            print(f"[error {message['code']}] {message['message']}", flush=True)

    session.on("message", line)


async def _chat(args: argparse.Namespace) -> int:
    start: dict[str, Any] = {"agent": args.agent} if args.agent else {}
    session = await Session.connect(args.url, api_key=args.api_key, token=args.token, start=cast(SessionStart, start))
    print(f"[connected to {session.agent}, session {session.session_id}]", flush=True)
    _show(session)
    pending: list[str] = []
    session.on("consent_request", lambda m: pending.append(m["tool_use_id"]))
    loop = asyncio.get_running_loop()
    while (text := await loop.run_in_executor(None, sys.stdin.readline)) != "":
        text = text.strip()
        if not text:
            continue
        if pending:
            answered = asyncio.ensure_future(
                session.next("bidi_response_complete", lambda m: m["stop_reason"] != "handoff", timeout=120)
            )
            await asyncio.sleep(0)
            await session.consent(pending.pop(), text.lower() in ("y", "yes"))
            await answered
            continue
        answered = asyncio.ensure_future(
            session.next("bidi_response_complete", lambda m: m["stop_reason"] != "handoff", timeout=120)
        )
        asked = asyncio.ensure_future(session.next("consent_request", timeout=120))
        await asyncio.sleep(0)
        await session.send_text(text)
        await asyncio.wait({answered, asked}, return_when=asyncio.FIRST_COMPLETED)
        for waiting in (answered, asked):
            if not waiting.done():
                waiting.cancel()
    closed = await session.close()
    print(f"[closed {closed.code}: {closed.reason}]", flush=True)
    return 0


async def _say(args: argparse.Namespace) -> int:
    pcm, rate = read_wav(args.wav)
    if rate not in (8000, 16000, 24000):
        print(f"the WAV is at {rate} Hz; the session takes PCM16 at 8000, 16000 or 24000 Hz", file=sys.stderr)
        return 2
    start: dict[str, Any] = {"modalities": ["audio"], "audio": {"input": {"encoding": "pcm16", "sample_rate": rate}}}
    if args.agent:
        start["agent"] = args.agent
    session = await Session.connect(args.url, api_key=args.api_key, token=args.token, start=cast(SessionStart, start))
    print(f"[connected to {session.agent} ({session.mode}), session {session.session_id}]", flush=True)
    _show(session)
    reply = bytearray()

    def keep(chunk: AudioChunk) -> None:
        reply.extend(chunk.data)

    session.on("audio", keep)
    answered = asyncio.ensure_future(
        session.next("bidi_response_complete", lambda m: m["stop_reason"] != "handoff", timeout=args.timeout)
    )
    await asyncio.sleep(0)
    await session.send_audio(pcm)
    # Silence after the speech, a second at a time, until the agent has answered.
    silence = bytes(session.input_format.bytes_per_second)
    while not answered.done():
        await session.send_audio(silence)
        await asyncio.wait({answered}, timeout=1.0)
    await answered
    await session.close()
    if args.out:
        with open(args.out, "wb") as out:
            out.write(write_wav(bytes(reply), session.output_format.sample_rate))
        print(f"[reply audio: {len(reply) // 2 / session.output_format.sample_rate:.2f} s in {args.out}]", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    try:
        return asyncio.run(_chat(args) if args.command == "chat" else _say(args))
    except SessionRefused as refused:
        print(f"refused ({refused.code}): {refused}", file=sys.stderr)
        return 1
    except (TimeoutError, ConnectionError) as error:
        print(f"failed: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
