// Generated from clients/typescript/src/audio.ts by `npm run vendor` (tsc): do not edit; the client's tests fail when it differs.
/** The caller's audio when `session_start.audio.input` is absent: PCM16 at 16 kHz. */
export const DEFAULT_INPUT = { encoding: "pcm16", sampleRate: 16000 };
/** The reply audio when `session_start.audio.output` is absent: PCM16 at 24 kHz. */
export const DEFAULT_OUTPUT = { encoding: "pcm16", sampleRate: 24000 };
/** A format as the server reads it: encoding names and their aliases, rates by default. */
export function resolveFormat(format, fallback) {
    if (!format)
        return fallback;
    const name = (format.encoding ?? "pcm16").toLowerCase();
    const encoding = name === "pcm16" ? "pcm16"
        : ["mulaw", "ulaw", "g711_ulaw"].includes(name) ? "mulaw"
            : ["alaw", "g711_alaw"].includes(name) ? "alaw"
                : null;
    if (!encoding)
        throw new RangeError(`unsupported audio encoding ${JSON.stringify(format.encoding)}: pcm16, mulaw or alaw`);
    const sampleRate = format.sample_rate ?? (encoding === "pcm16" ? fallback.sampleRate : 8000);
    return { encoding, sampleRate };
}
/** Bytes of one second of audio in `format` (mono). */
export function bytesPerSecond(format) {
    return format.sampleRate * (format.encoding === "pcm16" ? 2 : 1);
}
/** Float samples (-1..1, as Web Audio has them) to PCM16 little-endian bytes. */
export function floatToPcm16(samples) {
    const out = new Uint8Array(samples.length * 2);
    const view = new DataView(out.buffer);
    for (let i = 0; i < samples.length; i++) {
        const s = Math.max(-1, Math.min(1, samples[i] ?? 0));
        view.setInt16(i * 2, s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff), true);
    }
    return out;
}
/** PCM16 little-endian bytes to float samples (-1..1); an odd last byte is ignored. */
export function pcm16ToFloat(bytes) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const out = new Float32Array(bytes.byteLength >> 1);
    for (let i = 0; i < out.length; i++)
        out[i] = view.getInt16(i * 2, true) / 0x8000;
    return out;
}
/** One PCM16 sample to G.711 μ-law. */
export function linearToMulaw(sample) {
    const BIAS = 0x84;
    const sign = sample < 0 ? 0x80 : 0;
    let magnitude = Math.min(Math.abs(sample), 32635) + BIAS;
    let exponent = 7;
    for (let mask = 0x4000; (magnitude & mask) === 0 && exponent > 0; mask >>= 1)
        exponent--;
    const mantissa = (magnitude >> (exponent + 3)) & 0x0f;
    return ~(sign | (exponent << 4) | mantissa) & 0xff;
}
/** One G.711 μ-law byte to a PCM16 sample. */
export function mulawToLinear(byte) {
    const u = ~byte & 0xff;
    const magnitude = ((((u & 0x0f) << 3) + 0x84) << ((u & 0x70) >> 4)) - 0x84;
    return u & 0x80 ? -magnitude : magnitude;
}
/** One PCM16 sample to G.711 A-law. */
export function linearToAlaw(sample) {
    const sign = sample >= 0 ? 0x80 : 0;
    let magnitude = Math.min(sample >= 0 ? sample : -sample - 1, 32767) >> 3;
    let out;
    if (magnitude < 32) {
        out = magnitude >> 1;
    }
    else {
        let exponent = 1;
        while (magnitude >= 64 && exponent < 7) {
            magnitude >>= 1;
            exponent++;
        }
        out = (exponent << 4) | ((magnitude >> 1) & 0x0f);
    }
    return (out | sign) ^ 0x55;
}
/** One G.711 A-law byte to a PCM16 sample. */
export function alawToLinear(byte) {
    const a = byte ^ 0x55;
    const exponent = (a & 0x70) >> 4;
    let magnitude = ((a & 0x0f) << 4) + 8;
    if (exponent > 0)
        magnitude = (magnitude + 0x100) << (exponent - 1);
    return a & 0x80 ? magnitude : -magnitude;
}
/** PCM16 bytes to `format`'s encoding (the rate is the caller's to match). */
export function encodePcm16(pcm, format) {
    if (format.encoding === "pcm16")
        return pcm;
    const view = new DataView(pcm.buffer, pcm.byteOffset, pcm.byteLength);
    const out = new Uint8Array(pcm.byteLength >> 1);
    const encode = format.encoding === "mulaw" ? linearToMulaw : linearToAlaw;
    for (let i = 0; i < out.length; i++)
        out[i] = encode(view.getInt16(i * 2, true));
    return out;
}
/** Audio in `format`'s encoding to PCM16 bytes. */
export function decodeToPcm16(audio, format) {
    if (format.encoding === "pcm16")
        return audio;
    const out = new Uint8Array(audio.byteLength * 2);
    const view = new DataView(out.buffer);
    const decode = format.encoding === "mulaw" ? mulawToLinear : alawToLinear;
    for (let i = 0; i < audio.byteLength; i++)
        view.setInt16(i * 2, decode(audio[i] ?? 0), true);
    return out;
}
/** Bytes to base64 (for `bidi_audio_input.audio`). */
export function toBase64(bytes) {
    let binary = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
        binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    }
    return btoa(binary);
}
/** Base64 (`bidi_audio_stream.audio`) to bytes. */
export function fromBase64(text) {
    const binary = atob(text);
    const out = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++)
        out[i] = binary.charCodeAt(i);
    return out;
}
