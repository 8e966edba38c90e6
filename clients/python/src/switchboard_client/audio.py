"""Audio for a session: the formats the protocol negotiates (`session_start.audio`), PCM16,
G.711 μ-law / A-law (the standard library's `audioop` is gone from Python 3.13), and the
WAV files a voice turn is often read from."""

from __future__ import annotations

import io
import struct
import wave
from dataclasses import dataclass

from .protocol import AudioFormat


@dataclass(frozen=True)
class Format:
    """A format with its encoding (`pcm16`, `mulaw` or `alaw`) and rate resolved."""

    encoding: str
    sample_rate: int

    @property
    def bytes_per_second(self) -> int:
        """Bytes of one second of this audio (mono)."""
        return self.sample_rate * (2 if self.encoding == "pcm16" else 1)


#: The caller's audio when `session_start.audio.input` is absent: PCM16 at 16 kHz.
DEFAULT_INPUT = Format("pcm16", 16000)
#: The reply audio when `session_start.audio.output` is absent: PCM16 at 24 kHz.
DEFAULT_OUTPUT = Format("pcm16", 24000)

_ALIASES = {"pcm16": "pcm16", "mulaw": "mulaw", "ulaw": "mulaw", "g711_ulaw": "mulaw", "alaw": "alaw", "g711_alaw": "alaw"}


def resolve_format(format: AudioFormat | None, fallback: Format) -> Format:
    """A format as the server reads it: encoding names and their aliases, rates by default."""
    if not format:
        return fallback
    name = (format.get("encoding") or "pcm16").lower()
    encoding = _ALIASES.get(name)
    if encoding is None:
        raise ValueError(f"unsupported audio encoding {format.get('encoding')!r}: pcm16, mulaw or alaw")
    rate = format.get("sample_rate") or (fallback.sample_rate if encoding == "pcm16" else 8000)
    return Format(encoding, rate)


def linear_to_mulaw(sample: int) -> int:
    """One PCM16 sample to G.711 μ-law."""
    sign = 0x80 if sample < 0 else 0
    magnitude = min(abs(sample), 32635) + 0x84
    exponent = 7
    mask = 0x4000
    while magnitude & mask == 0 and exponent > 0:
        exponent -= 1
        mask >>= 1
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    return ~(sign | (exponent << 4) | mantissa) & 0xFF


def mulaw_to_linear(byte: int) -> int:
    """One G.711 μ-law byte to a PCM16 sample."""
    u = ~byte & 0xFF
    magnitude = ((((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)) - 0x84
    return -magnitude if u & 0x80 else magnitude


def linear_to_alaw(sample: int) -> int:
    """One PCM16 sample to G.711 A-law."""
    sign = 0x80 if sample >= 0 else 0
    magnitude = min(sample if sample >= 0 else -sample - 1, 32767) >> 3
    if magnitude < 32:
        out = magnitude >> 1
    else:
        exponent = 1
        while magnitude >= 64 and exponent < 7:
            magnitude >>= 1
            exponent += 1
        out = (exponent << 4) | ((magnitude >> 1) & 0x0F)
    return (out | sign) ^ 0x55


def alaw_to_linear(byte: int) -> int:
    """One G.711 A-law byte to a PCM16 sample."""
    a = byte ^ 0x55
    exponent = (a & 0x70) >> 4
    magnitude = ((a & 0x0F) << 4) + 8
    if exponent > 0:
        magnitude = (magnitude + 0x100) << (exponent - 1)
    return magnitude if a & 0x80 else -magnitude


def encode_pcm16(pcm: bytes, format: Format) -> bytes:
    """PCM16 little-endian bytes to `format`'s encoding (the rate is the caller's to match)."""
    if format.encoding == "pcm16":
        return pcm
    encode = linear_to_mulaw if format.encoding == "mulaw" else linear_to_alaw
    samples = struct.unpack(f"<{len(pcm) // 2}h", pcm[: len(pcm) // 2 * 2])
    return bytes(encode(s) for s in samples)


def decode_to_pcm16(audio: bytes, format: Format) -> bytes:
    """Audio in `format`'s encoding to PCM16 little-endian bytes."""
    if format.encoding == "pcm16":
        return audio
    decode = mulaw_to_linear if format.encoding == "mulaw" else alaw_to_linear
    return struct.pack(f"<{len(audio)}h", *(decode(b) for b in audio))


def read_wav(data: bytes | str) -> tuple[bytes, int]:
    """A mono 16-bit WAV (bytes, or a path) as PCM16 bytes and its sample rate."""
    source = io.BytesIO(data) if isinstance(data, bytes) else open(data, "rb")  # noqa: SIM115
    with source, wave.open(source, "rb") as wav:
        if wav.getnchannels() != 1 or wav.getsampwidth() != 2:
            raise ValueError("the WAV must be mono 16-bit PCM")
        return wav.readframes(wav.getnframes()), wav.getframerate()


def write_wav(pcm: bytes, sample_rate: int) -> bytes:
    """PCM16 mono bytes as a WAV file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm)
    return out.getvalue()
