"""An aiortc (Python's own WebRTC stack) caller of the WebRTC edge, driven by main.rs.

Usage: call.py BASE_URL WAV TURN_SECRET

One call, by the JSON form of `POST /v1/webrtc`: the offer (an Opus track playing WAV, a
data channel) answered 201 with SDP, a Location and the TURN servers (Link headers and
`ice_servers`, whose credential is checked here with Python's own HMAC-SHA1); the data
channel's first message is `session_start`; the session's messages come back on it (the
caller's transcript, responses) and the agent's reply audio on the remote track (its frames'
RMS). DELETE ends the call. Prints one JSON object as its last line.
"""

import asyncio
import base64
import hashlib
import hmac
import json
import math
import struct
import sys
import time
import urllib.error
import urllib.request

from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaPlayer


def http(method, url, body=None, headers=None):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


STARTED = time.monotonic()


async def until(what, check, seconds, result):
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            result["timeout"] = what
            raise TimeoutError(what)
        await asyncio.sleep(0.05)
    # When each step was reached, in seconds since the client started (for the test's log).
    result.setdefault("reached", {})[what] = round(time.monotonic() - STARTED, 2)


async def call(base, wav, secret, result):
    pc = RTCPeerConnection()
    channel = pc.createDataChannel("session")
    player = MediaPlayer(wav)
    pc.addTrack(player.audio)
    messages = result["messages"] = []
    audio = result["audio"] = {"frames": 0, "loud": 0, "peak": 0.0}
    readers = []

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
            audio["peak"] = max(audio["peak"], rms)
            if rms > 0.01:
                audio["loud"] += 1

    @pc.on("track")
    def on_track(track):
        if track.kind == "audio":
            readers.append(asyncio.ensure_future(read(track)))

    @channel.on("open")
    def on_open():
        result["opened"] = True
        channel.send(json.dumps({"type": "session_start", "agent": "triage", "modalities": ["audio", "text"]}))

    @channel.on("message")
    def on_message(message):
        if isinstance(message, str):
            messages.append(json.loads(message))

    # aiortc gathers every candidate before setLocalDescription returns (no trickle).
    await pc.setLocalDescription(await pc.createOffer())
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
    result["answer_type"] = answer["type"]
    result["location"] = headers.get("location")
    result["json_location"] = answer["location"]
    result["links"] = headers.get_all("link") or []
    result["ice_servers"] = answer["ice_servers"]
    # The edge's TURN credential, checked as the TURN server checks it (coturn's
    # use-auth-secret): base64(HMAC-SHA1(secret, username)), username "<expiry>:<user>".
    checks = []
    for server in answer["ice_servers"]:
        if "username" in server:
            expiry, _, user = server["username"].partition(":")
            expected = base64.b64encode(
                hmac.new(secret.encode(), server["username"].encode(), hashlib.sha1).digest()
            ).decode()
            checks.append({
                "valid": server["credential"] == expected,
                "ttl": int(expiry) - int(time.time()),
                "user": user,
            })
    result["credentials"] = checks
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
    location = base.rstrip("/") + result["location"]
    await until("connected", lambda: pc.connectionState == "connected", 10, result)
    await until("bidi_connection_start", lambda: any(m["type"] == "bidi_connection_start" for m in messages), 10, result)

    def heard():
        return any(
            m["type"] == "bidi_transcript_stream" and m.get("role", "").lower() == "user"
            and "balance" in (m.get("text") or "")
            for m in messages
        )

    await until("the caller's transcript", heard, 15, result)
    await until("a response", lambda: any(m["type"] == "bidi_response_complete" for m in messages), 10, result)
    # A second of the reply heard (20 ms frames above silence), loss concealed.
    await until("reply audio", lambda: audio["loud"] >= 50, 10, result)
    status, _, _ = await loop.run_in_executor(None, lambda: http("DELETE", location))
    result["deleted"] = status
    await until("the data channel closed", lambda: channel.readyState == "closed", 5, result)
    result["channel_closed"] = True
    player.audio.stop()
    await pc.close()
    for reader in readers:
        reader.cancel()


async def main():
    base, wav, secret = sys.argv[1:4]
    result = {}
    try:
        await asyncio.wait_for(call(base, wav, secret, result), 25)
    except Exception as error:  # reported, not raised: main.rs prints it beside the result
        result["error"] = f"{type(error).__name__}: {error}"
    print(json.dumps(result), flush=True)


asyncio.run(main())
