"""The audio helpers' logic: formats as the server reads them, G.711, WAV."""

from __future__ import annotations

import pytest

from switchboard_client import (
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


def test_formats_resolve_as_the_server_reads_them() -> None:
    assert resolve_format(None, DEFAULT_OUTPUT) == Format("pcm16", 24000)
    assert resolve_format({"encoding": "g711_ulaw"}, DEFAULT_INPUT) == Format("mulaw", 8000)
    assert resolve_format({"sample_rate": 8000}, DEFAULT_INPUT) == Format("pcm16", 8000)
    with pytest.raises(ValueError, match="opus"):
        resolve_format({"encoding": "opus"}, DEFAULT_INPUT)
    assert DEFAULT_INPUT.bytes_per_second == 32000


def test_g711_matches_the_standard_and_round_trips_within_its_step() -> None:
    assert linear_to_mulaw(0) == 0xFF and mulaw_to_linear(0xFF) == 0
    assert linear_to_alaw(0) == 0xD5 and alaw_to_linear(0xD5) == 8
    for sample in (-32768, -12345, -100, -1, 1, 100, 1000, 12345, 32767):
        step = max(16, abs(sample) / 16)
        assert abs(mulaw_to_linear(linear_to_mulaw(sample)) - sample) <= step
        assert abs(alaw_to_linear(linear_to_alaw(sample)) - sample) <= step


def test_pcm16_encodings_and_wav_convert_both_ways() -> None:
    pcm = bytes(range(20))
    mulaw = Format("mulaw", 8000)
    assert len(encode_pcm16(pcm, mulaw)) == 10 and len(decode_to_pcm16(encode_pcm16(pcm, mulaw), mulaw)) == 20
    assert read_wav(write_wav(pcm, 8000)) == (pcm, 8000)
