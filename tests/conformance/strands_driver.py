"""Strands Agents (`strands-agents[bidi]`) against `switchboard sim`: a `BidiAgent` on the
stock `BedrockNovaSonicModel`, default settings, several spoken turns. The only change
is the endpoint and the simulator's certificate, as TESTING.md describes: Strands
passes the AWS endpoint to `AsyncBedrockRuntimeConfig.resolve` explicitly."""

import asyncio
import sys
import time

import common

common.fake_credentials()

import strands.bidi.models.bedrock as bedrock  # noqa: E402
from strands.bidi import BidiAgent  # noqa: E402
from strands.bidi.types.events import BidiAudioDeltaEvent  # noqa: E402
from strands.bidi.types.media import AudioDelta  # noqa: E402

_real_config = bedrock.AsyncBedrockRuntimeConfig


class LocalConfig:
    """`AsyncBedrockRuntimeConfig` with the simulator's endpoint and certificate."""

    @staticmethod
    async def resolve(**kwargs):
        kwargs["endpoint_uri"] = common.ENDPOINT
        kwargs["transport"] = common.trusting(type(kwargs["transport"]))()
        return await _real_config.resolve(**kwargs)


bedrock.AsyncBedrockRuntimeConfig = LocalConfig


async def main() -> int:
    started = time.monotonic()
    model = bedrock.BedrockNovaSonicModel(model_id=common.MODEL_ID, region=common.REGION)
    agent = BidiAgent(model=model, system_prompt="You are a helpful voice assistant. Keep answers short.")
    turns = common.Turns()
    await agent.start()

    async def listen():
        async for event in agent.receive():
            if isinstance(event, BidiAudioDeltaEvent):
                turns.on_audio(len(event["audio"]) * 3 // 4)

    listener = asyncio.create_task(listen())

    async def send(frame: bytes):
        await agent.send(AudioDelta(format="pcm", source={"bytes": frame}))

    try:
        await common.speak_turns(turns, send)
    finally:
        await agent.stop()
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
    return common.verdict("strands", turns, started)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
