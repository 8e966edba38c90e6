"""One leg of a conversation over the WebRTC edge by aiortc, driven by resume.rs.

Usage: resume.py BASE_URL WAV START UNTIL MODE [ICE_SERVERS]

- START: the data channel's first message (`session_start`, JSON), with `resume_token` and
  `last_seq` when this leg resumes a session;
- UNTIL: text an assistant transcript must contain before the leg ends;
- MODE: `vanish` — then the process ends at once, closing nothing (no DELETE, no DTLS
  close_notify, no SCTP shutdown: to the edge it is a client whose network went); `delete`
  — DELETE the call and wait for its data channel to close;
- ICE_SERVERS: the `ice_servers` an earlier answer handed out (JSON). Given, the call gathers
  relay candidates only, from that TURN server (`iceTransportPolicy: "relay"`: aiortc 1.14
  has no such option, so it is set on aioice's `Connection`, which has), and reports which
  candidate types ICE nominated.

Prints one JSON object as its last line: the answer's status, Location and `ice_servers`,
the session's messages (the newest `bidi_connection_start`, the last `seq` received, the
transcripts), the reply audio heard (20 ms frames above silence) and the nominated pair.
"""

import asyncio
import json
import math
import os
import struct
import sys
import time
import urllib.error
import urllib.request

import aiortc.rtcicetransport as rtcicetransport
from aioice.ice import TransportPolicy
from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaPlayer


def http(method, url, body=None, headers=None):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


def relay_only():
    """iceTransportPolicy "relay": aioice gathers no host or server-reflexive candidates."""
    build = rtcicetransport.connection_kwargs

    def with_policy(servers):
        kwargs = build(servers)
        kwargs["transport_policy"] = TransportPolicy.RELAY
        return kwargs

    rtcicetransport.connection_kwargs = with_policy


STARTED = time.monotonic()


async def until(what, check, seconds, result):
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            result["timeout"] = what
            raise TimeoutError(what)
        await asyncio.sleep(0.05)
    result.setdefault("reached", {})[what] = round(time.monotonic() - STARTED, 2)


def nominated(pc):
    """The candidate types of the pair ICE nominated (aioice's own record of it)."""
    for transceiver in pc.getTransceivers():
        connection = transceiver.receiver.transport.transport._connection
        pair = connection._nominated.get(1)
        if pair is not None:
            return {"local": pair.local_candidate.type, "remote": pair.remote_candidate.type}
    return None


async def call(base, wav, start, wanted, mode, servers, result):
    configuration = None
    if servers is not None:
        relay_only()
        configuration = RTCConfiguration(
            iceServers=[RTCIceServer(urls=s["urls"], username=s.get("username"), credential=s.get("credential"))
                        for s in servers]
        )
    pc = RTCPeerConnection(configuration)
    channel = pc.createDataChannel("session")
    player = MediaPlayer(wav)
    pc.addTrack(player.audio)
    messages = result["messages"] = []
    audio = result["audio"] = {"frames": 0, "loud": 0}

    async def read(track):
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            samples = bytes(frame.planes[0])[: frame.samples * 2 * len(frame.layout.channels)]
            values = struct.unpack(f"<{len(samples) // 2}h", samples)
            rms = math.sqrt(sum(v * v for v in values) / max(len(values), 1)) / 32768
            audio["frames"] += 1
            if rms > 0.01:
                audio["loud"] += 1

    readers = []

    @pc.on("track")
    def on_track(track):
        if track.kind == "audio":
            readers.append(asyncio.ensure_future(read(track)))

    @channel.on("open")
    def on_open():
        channel.send(start)

    @channel.on("message")
    def on_message(message):
        if isinstance(message, str):
            messages.append(json.loads(message))

    await pc.setLocalDescription(await pc.createOffer())
    offered = [line for line in pc.localDescription.sdp.splitlines() if line.startswith("a=candidate:")]
    result["offered_types"] = sorted({line.split(" typ ")[1].split()[0] for line in offered})
    body = json.dumps({"type": "offer", "sdp": pc.localDescription.sdp}).encode()
    loop = asyncio.get_running_loop()
    status, headers, text = await loop.run_in_executor(
        None, lambda: http("POST", f"{base}v1/webrtc", body, {"content-type": "application/json"})
    )
    result["status"] = status
    if status != 201:
        result["body"] = text
        return
    answer = json.loads(text)
    result["location"] = answer["location"]
    result["ice_servers"] = answer["ice_servers"]
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
    await until("connected", lambda: pc.connectionState == "connected", 15, result)
    result["nominated"] = nominated(pc)

    def starts():
        return [m for m in messages if m["type"] == "bidi_connection_start"]

    await until("bidi_connection_start", lambda: starts(), 10, result)

    def answered():
        return any(
            m["type"] == "bidi_transcript_stream" and (m.get("role") or "").lower() == "assistant"
            and wanted in (m.get("text") or "")
            for m in messages
        )

    await until(wanted, answered, 30, result)
    # Half a second of the reply heard (20 ms frames above silence).
    await until("reply audio", lambda: audio["loud"] >= 25, 10, result)
    result["start"] = starts()[-1]
    result["last_seq"] = max((m["seq"] for m in messages if isinstance(m.get("seq"), int)), default=None)
    if mode == "vanish":
        # Gone without a word: the caller prints what it saw and ends without closing anything.
        return "vanish"
    status, _, _ = await loop.run_in_executor(None, lambda: http("DELETE", base.rstrip("/") + result["location"]))
    result["deleted"] = status
    await until("the data channel closed", lambda: channel.readyState == "closed", 5, result)
    player.audio.stop()
    await pc.close()
    for reader in readers:
        reader.cancel()


def summarise(result):
    """The messages as the test reads them: types, the transcripts, agents of the starts."""
    messages = result.pop("messages", [])
    result["types"] = [m["type"] for m in messages]
    result["transcripts"] = [
        {"role": (m.get("role") or "").lower(), "text": m.get("text")}
        for m in messages
        if m["type"] == "bidi_transcript_stream"
    ]
    result["errors"] = [m for m in messages if m["type"] == "bidi_error"]
    result["starts"] = [m for m in messages if m["type"] == "bidi_connection_start"]
    # Every message carries its number, each one more than the one before (reply audio,
    # numbered too, goes on the track: a gap is as many audio chunks).
    numbers = [m.get("seq") for m in messages]
    result["first_seq"] = min((n for n in numbers if isinstance(n, int)), default=None)
    result["unnumbered"] = sum(1 for n in numbers if not isinstance(n, int))
    result["misordered"] = sum(1 for a, b in zip(numbers, numbers[1:]) if isinstance(a, int) and isinstance(b, int) and b <= a)


async def main():
    base, wav, start, wanted, mode = sys.argv[1:6]
    servers = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    result = {}
    ended = None
    try:
        ended = await asyncio.wait_for(call(base, wav, start, wanted, mode, servers, result), 50)
    except Exception as error:  # reported, not raised: the test prints it beside the result
        result["error"] = f"{type(error).__name__}: {error}"
    summarise(result)
    print(json.dumps(result), flush=True)
    if ended == "vanish":
        os._exit(0)


asyncio.run(main())
