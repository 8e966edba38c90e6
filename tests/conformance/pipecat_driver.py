"""Pipecat (`pipecat-ai[aws-nova-sonic]`) against `switchboard sim`: the stock
`AWSNovaSonicLLMService` in a pipeline (user context aggregator, the service, an audio
sink, assistant aggregator), several spoken turns, then the pipeline's own shutdown
(`EndFrame`). The only change is the client: `create_client()` (public, meant to be
overridden) builds the same SDK client with the simulator's endpoint and certificate.
Microphone frames go in with `queue_frame`, as a transport's input would push them."""

import asyncio
import sys
import time

import common

common.fake_credentials()

from aws_sdk_bedrock_runtime.client import BedrockRuntimeClient  # noqa: E402
from aws_sdk_bedrock_runtime.config import Config  # noqa: E402
from pipecat.frames.frames import EndFrame, InputAudioRawFrame, LLMRunFrame, TTSAudioRawFrame  # noqa: E402
from pipecat.pipeline.pipeline import Pipeline  # noqa: E402
from pipecat.pipeline.worker import PipelineParams, PipelineWorker  # noqa: E402
from pipecat.processors.aggregators.llm_context import LLMContext  # noqa: E402
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair  # noqa: E402
from pipecat.processors.frame_processor import FrameProcessor  # noqa: E402
from pipecat.services.aws.nova_sonic.llm import AWSNovaSonicLLMService  # noqa: E402
from pipecat.workers.runner import WorkerRunner  # noqa: E402
from smithy_aws_core.auth.sigv4 import SigV4AuthScheme  # noqa: E402
from smithy_aws_core.identity.static import StaticCredentialsResolver  # noqa: E402
from smithy_core.shapes import ShapeID  # noqa: E402
from smithy_http.aio.crt import AWSCRTHTTPClient  # noqa: E402


class LocalNovaSonic(AWSNovaSonicLLMService):
    """The stock service; its client reaches the simulator."""

    def create_client(self) -> BedrockRuntimeClient:
        config = Config(
            endpoint_uri=common.ENDPOINT,
            region=common.REGION,
            aws_access_key_id=self._access_key_id,
            aws_secret_access_key=self._secret_access_key,
            aws_session_token=self._session_token,
            aws_credentials_identity_resolver=StaticCredentialsResolver(),
            auth_schemes={ShapeID("aws.auth#sigv4"): SigV4AuthScheme(service="bedrock")},
            transport=common.trusting(AWSCRTHTTPClient)(),
        )
        return BedrockRuntimeClient(config=config)


class AudioSink(FrameProcessor):
    """Counts the reply audio the service pushes downstream."""

    def __init__(self, turns: common.Turns):
        super().__init__()
        self._turns = turns

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self._turns.on_audio(len(frame.audio))
        await self.push_frame(frame, direction)


async def main() -> int:
    started = time.monotonic()
    turns = common.Turns()
    llm = LocalNovaSonic(
        access_key_id="AKIDCONFORMANCE",
        secret_access_key="not-a-secret",
        region=common.REGION,
        settings=AWSNovaSonicLLMService.Settings(model=common.MODEL_ID),
        system_instruction="You are a helpful voice assistant. Keep answers short.",
    )
    context = LLMContext()
    aggregators = LLMContextAggregatorPair(context)
    pipeline = Pipeline([aggregators.user(), llm, AudioSink(turns), aggregators.assistant()])
    worker = PipelineWorker(pipeline, params=PipelineParams(audio_in_sample_rate=16000, audio_out_sample_rate=24000))
    runner = WorkerRunner(handle_sigint=False)
    running = asyncio.create_task(runner.run(worker))
    await worker.queue_frame(LLMRunFrame())

    async def send(frame: bytes):
        await worker.queue_frame(InputAudioRawFrame(audio=frame, sample_rate=16000, num_channels=1))

    try:
        await common.speak_turns(turns, send)
    finally:
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(running, timeout=30)
    return common.verdict("pipecat", turns, started)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
