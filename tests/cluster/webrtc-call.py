"""One WebRTC call (aiortc, Python's own WebRTC stack) to an agent through the chart's gateway
on the real node, driven by e2e-smoke.sh.

Usage: webrtc-call.py BASE_URL AGENT WAV

The offer (an Opus track playing WAV, a data channel) goes to BASE_URL's `POST /v1/webrtc`
(the JSON form) through the gateway's Service; the answer's candidates name the node's
address (the chart's hostNetwork exposure), where the media go directly. The data channel's
first message is `session_start` for AGENT; the session is open when `bidi_connection_start`
comes back on it; the agent's reply audio is heard on the remote track (frames above
silence); DELETE on the answer's Location ends the call and the data channel closes. Prints
one JSON object as its last line; exits 1 when a step was not reached.
"""

import asyncio
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


async def until(what, check, seconds, result):
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)
    result["reached"].append(what)


async def call(base, agent, wav, result):
    pc = RTCPeerConnection()
    channel = pc.createDataChannel("session")
    player = MediaPlayer(wav)
    pc.addTrack(player.audio)
    messages = []
    audio = result["audio"] = {"frames": 0, "loud": 0}
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
            if rms > 0.01:
                audio["loud"] += 1

    @pc.on("track")
    def on_track(track):
        if track.kind == "audio":
            readers.append(asyncio.ensure_future(read(track)))

    @channel.on("open")
    def on_open():
        channel.send(json.dumps({"type": "session_start", "agent": agent, "modalities": ["audio", "text"]}))

    @channel.on("message")
    def on_message(message):
        if isinstance(message, str):
            messages.append(json.loads(message))

    await pc.setLocalDescription(await pc.createOffer())
    body = json.dumps({"type": "offer", "sdp": pc.localDescription.sdp}).encode()
    loop = asyncio.get_running_loop()
    status, headers, text = await loop.run_in_executor(
        None, lambda: http("POST", f"{base}/v1/webrtc", body, {"content-type": "application/json"})
    )
    result["status"] = status
    if status != 201:
        raise RuntimeError(f"the offer was answered {status}: {text}")
    answer = json.loads(text)
    result["candidates"] = [line[2:] for line in answer["sdp"].splitlines() if line.startswith("a=candidate:")]
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
    await until("connected", lambda: pc.connectionState == "connected", 15, result)
    await until("bidi_connection_start", lambda: any(m["type"] == "bidi_connection_start" for m in messages), 15, result)
    result["agent"] = next(m.get("agent") for m in messages if m["type"] == "bidi_connection_start")
    # Half a second of the agent's voice (20 ms frames above silence).
    await until("reply audio", lambda: audio["loud"] >= 25, 30, result)
    status, _, _ = await loop.run_in_executor(None, lambda: http("DELETE", base + headers.get("location")))
    result["deleted"] = status
    await until("the data channel closed", lambda: channel.readyState == "closed", 10, result)
    result["types"] = sorted({m["type"] for m in messages})
    player.audio.stop()
    await pc.close()
    for reader in readers:
        reader.cancel()


async def main():
    base, agent, wav = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
    result = {"reached": []}
    failed = False
    try:
        await asyncio.wait_for(call(base, agent, wav, result), 75)
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"
        failed = True
    print(json.dumps(result), flush=True)
    sys.exit(1 if failed else 0)


asyncio.run(main())
