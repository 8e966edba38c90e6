"""switchboard-client: Switchboard's session protocol for Python (asyncio, `websockets`),
with TypedDicts generated from its JSON Schema."""

from .audio import (
    DEFAULT_INPUT,
    DEFAULT_OUTPUT,
    Format,
    alaw_to_linear,
    decode_to_pcm16,
    encode_pcm16,
    linear_to_alaw,
    linear_to_mulaw,
    mulaw_to_linear,
    read_wav,
    resolve_format,
    write_wav,
)
from .protocol import PROTOCOL_VERSION, ClientMessage, ServerMessage
from .session import DEFAULT_RESUME_PAUSES, AudioChunk, Closed, Reconnecting, Session, SessionRefused

__all__ = [
    "DEFAULT_INPUT",
    "DEFAULT_OUTPUT",
    "DEFAULT_RESUME_PAUSES",
    "PROTOCOL_VERSION",
    "AudioChunk",
    "ClientMessage",
    "Closed",
    "Format",
    "Reconnecting",
    "ServerMessage",
    "Session",
    "SessionRefused",
    "alaw_to_linear",
    "decode_to_pcm16",
    "encode_pcm16",
    "linear_to_alaw",
    "linear_to_mulaw",
    "mulaw_to_linear",
    "read_wav",
    "resolve_format",
    "write_wav",
]
