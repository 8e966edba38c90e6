"""The client against a real `switchboard local` of examples/banking: a text conversation
through two handoffs to the balance, a consent declined, a resume after the network
dropped, the server's specific errors, a refusal, and a voice turn from a WAV with a
barge-in."""

from __future__ import annotations

import asyncio
import math
import struct
from typing import Any

import pytest
from conftest import LINES, Relay, connect, url

from switchboard_client import AudioChunk, Session, SessionRefused, read_wav, write_wav
from switchboard_client.protocol import ServerMessage


def record(session: Session) -> list[ServerMessage]:
    seen: list[ServerMessage] = []
    session.on("message", seen.append)
    return seen


async def say(session: Session, text: str) -> Any:
    """Sends a line and waits for the turn that answers it (through any handoffs)."""
    done = asyncio.ensure_future(session.next("bidi_response_complete", lambda m: m["stop_reason"] != "handoff"))
    await asyncio.sleep(0)
    await session.send_text(text)
    return await done


def replies(seen: list[ServerMessage]) -> list[str]:
    return [
        m["text"]
        for m in seen
        if m["type"] == "bidi_transcript_stream" and m["role"] == "assistant" and m["is_final"]
    ]


def test_a_text_conversation_goes_through_two_handoffs_to_the_balance(local: str) -> None:
    async def run() -> None:
        session = await connect(local)
        assert session.agent == "triage" and session.session_id.startswith("gw-") and session.resume_token
        seen = record(session)
        await say(session, LINES["balance"])
        user = next(m for m in seen if m["type"] == "bidi_transcript_stream" and m["role"] == "user")
        assert user.get("input_id", "").startswith("c-"), "the line comes back with its id"
        await say(session, LINES["details"])
        await say(session, LINES["my_balance"])
        assert session.agent == "banking"
        handoffs = [(m["from"], m["to"]) for m in seen if m["type"] == "handoff"]
        assert handoffs == [("triage", "idv"), ("idv", "banking")]
        balance = next(m for m in seen if m["type"] == "tool_complete" and m["name"] == "check_balance")
        assert balance["result"]["balance"] == 1234.56
        assert any("1234.56" in r for r in replies(seen)), replies(seen)
        closed = await session.close()
        assert closed.code == 1000
        # `async for` reads every message in order, and ends with the session.
        types = [m["type"] async for m in session]
        assert types[0] == "bidi_connection_start" and types[-1] == "bidi_connection_close"
        with pytest.raises(ConnectionError):
            await session.send_text("anyone?")

    asyncio.run(run())


def test_a_declined_consent_ends_the_call_with_a_tool_error(local: str) -> None:
    async def run() -> None:
        session = await connect(local)
        for line in ("unknown_payment", "details", "dispute"):
            await say(session, LINES[line])
        assert session.agent == "disputes"
        asked = asyncio.ensure_future(session.next("consent_request"))
        await asyncio.sleep(0)
        await session.send_text(LINES["dispute_tx"])
        request = await asked
        assert request["name"] == "open_dispute" and request["input"]["transactionId"] == "tx-1003"
        refused = asyncio.ensure_future(session.next("tool_error", lambda m: m["tool_use_id"] == request["tool_use_id"]))
        await asyncio.sleep(0)
        await session.consent(request["tool_use_id"], False)
        error = await refused
        assert error["kind"] == "consent_declined" and error["recoverable"] is False
        assert error["user_message"], "words for the caller"
        await session.close()

    asyncio.run(run())


def test_a_dropped_connection_is_resumed_with_nothing_lost(local: str) -> None:
    async def run() -> None:
        relay = Relay(local)
        through = await relay.start()
        try:
            session = await connect(through, resume_pauses=(0.1, 0.3, 1.0, 2.0))
            seen = record(session)
            await say(session, LINES["balance"])
            assert session.agent == "idv"
            before = (session.session_id, session.last_seq or 0)
            reconnecting = asyncio.ensure_future(session.next("reconnecting"))
            resumed = asyncio.ensure_future(session.next("resumed"))
            answered = asyncio.ensure_future(session.next("bidi_response_complete", lambda m: m["stop_reason"] == "end_turn"))
            await asyncio.sleep(0)
            relay.cut()
            await reconnecting
            await session.send_text(LINES["details"])  # typed while the session is away
            back = await resumed
            assert back["session_id"] == before[0] and back["agent"] == "idv"
            assert back.get("seq", 0) > before[1], "the numbering goes on"
            await answered
            assert any(m["type"] == "memory_update" and m["key"] == "verifiedUser" for m in seen)
            await say(session, LINES["my_balance"])
            assert any("1234.56" in r for r in replies(seen)), "memory kept"
            assert relay.connections == 2
            await session.close()
        finally:
            await relay.close()

    asyncio.run(run())


def test_bad_messages_get_the_servers_specific_errors(local: str) -> None:
    async def run() -> None:
        session = await connect(local)

        async def refused(code: str, frame: str) -> Any:
            error = asyncio.ensure_future(session.next("bidi_error", lambda m: m["code"] == code, timeout=10))
            await asyncio.sleep(0)
            await session.send_raw(frame)
            return await error

        assert (await refused("invalid_json", "{not json"))["recoverable"] is True
        assert "dance" in (await refused("unknown_type", '{"type":"dance"}'))["message"]
        await refused("malformed_message", '{"type":"tool_consent","tool_use_id":"t"}')
        await refused("fixed_setting", '{"type":"session_update","agent":"idv"}')
        turn = await say(session, LINES["balance"])
        assert turn["stop_reason"] == "end_turn", "the session goes on"
        await session.close()

    asyncio.run(run())


def test_a_refused_session_raises_with_the_close_code(local: str) -> None:
    async def run() -> None:
        with pytest.raises(SessionRefused) as refused:
            await Session.connect(url(local), start={"agent": "banking"})
        assert refused.value.code == 4403 and refused.value.error and refused.value.error["code"] == "not_exposed"
        with pytest.raises(ValueError, match="memory"):
            Session(url(local), start={"memory": {"verifiedUser": True}})

    asyncio.run(run())


def tone_wav(ms: int, amplitude: float) -> bytes:
    """A WAV of a 440 Hz tone (or silence) at 16 kHz."""
    count = 16 * ms
    samples = (round(amplitude * 32767 * math.sin(2 * math.pi * 440 * i / 16000)) for i in range(count))
    return write_wav(struct.pack(f"<{count}h", *samples), 16000)


def test_a_voice_turn_from_a_wav_and_a_barge_in(local: str) -> None:
    async def run() -> None:
        session = await connect(local, start={"modalities": ["audio"]})
        assert session.mode == "hybrid"
        chunks: list[AudioChunk] = []
        session.on("audio", chunks.append)
        first_audio = asyncio.ensure_future(session.next("audio"))
        await asyncio.sleep(0)
        speech, rate = read_wav(tone_wav(1200, 0.5))
        assert rate == 16000
        await session.send_audio(speech)
        await session.send_audio(read_wav(tone_wav(2000, 0))[0])
        await first_audio
        # The caller speaks over the reply: the server says to stop playing it.
        interrupted = asyncio.ensure_future(session.next("bidi_interruption", timeout=20))
        await asyncio.sleep(0)
        await session.send_audio(speech)
        await interrupted
        await session.audio_played(250)
        assert chunks and all(len(c.data) > 0 for c in chunks), "reply audio arrived before the barge-in"
        assert all(c.format.encoding == "pcm16" and c.format.sample_rate == 24000 for c in chunks)
        await session.close()

    asyncio.run(run())
