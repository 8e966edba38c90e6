"""LiveKit Agents (`livekit-plugins-aws[realtime]`) against `switchboard sim`: an
`AgentSession` with the stock Nova Sonic `RealtimeModel`, no LiveKit server (custom
audio input and output instead of a room), several spoken turns, then `aclose()`. The
only change is the endpoint and the simulator's certificate: the plugin passes the AWS
endpoint to `_BedrockRuntimeConfig.resolve` explicitly, as TESTING.md describes. The
plugin's own teardown race (see `common.tolerate_stream_completed_at_teardown`) is
logged as a warning."""

import asyncio
import sys
import time

import common

common.fake_credentials()

from livekit import rtc  # noqa: E402
from livekit.agents import Agent, AgentSession  # noqa: E402
from livekit.agents.voice import io  # noqa: E402
from livekit.plugins.aws.experimental.realtime import realtime_model  # noqa: E402

_real_config = realtime_model._BedrockRuntimeConfig


class LocalConfig:
    """The plugin's SDK config with the simulator's endpoint and certificate."""

    @staticmethod
    async def resolve(**kwargs):
        kwargs["endpoint_uri"] = common.ENDPOINT
        kwargs["transport"] = common.trusting(type(kwargs["transport"]))()
        return await _real_config.resolve(**kwargs)


realtime_model._BedrockRuntimeConfig = LocalConfig


class Microphone(io.AudioInput):
    """Frames the conversation hands over, as a room track would deliver them."""

    def __init__(self):
        super().__init__(label="conformance-microphone")
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=50)

    async def send(self, pcm: bytes):
        frame = rtc.AudioFrame(data=pcm, sample_rate=16000, num_channels=1, samples_per_channel=len(pcm) // 2)
        await self.queue.put(frame)

    async def __anext__(self) -> rtc.AudioFrame:
        return await self.queue.get()


class Speaker(io.AudioOutput):
    """Counts reply audio; "plays" it instantly."""

    def __init__(self, turns: common.Turns):
        super().__init__(label="conformance-speaker", capabilities=io.AudioOutputCapabilities(pause=False))
        self._turns = turns
        self._played = 0.0

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        self._turns.on_audio(len(frame.data) * 2)
        self._played += frame.duration

    def flush(self) -> None:
        super().flush()
        self.on_playback_finished(playback_position=self._played, interrupted=False)
        self._played = 0.0

    def clear_buffer(self) -> None:
        pass


async def main() -> int:
    common.tolerate_stream_completed_at_teardown()
    started = time.monotonic()
    turns = common.Turns()
    microphone, speaker = Microphone(), Speaker(turns)
    session = AgentSession(llm=realtime_model.RealtimeModel(model=common.MODEL_ID, region=common.REGION))
    session.input.audio = microphone
    session.output.audio = speaker
    await session.start(Agent(instructions="You are a helpful voice assistant. Keep answers short."), record=False)
    try:
        await common.speak_turns(turns, microphone.send)
    finally:
        await session.aclose()
    return common.verdict("livekit", turns, started)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
