// The audio helpers' logic: formats as the server reads them, PCM16 and G.711.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  alawToLinear,
  bytesPerSecond,
  decodeToPcm16,
  encodePcm16,
  floatToPcm16,
  fromBase64,
  linearToAlaw,
  linearToMulaw,
  mulawToLinear,
  pcm16ToFloat,
  resolveFormat,
  toBase64,
  DEFAULT_INPUT,
  DEFAULT_OUTPUT,
} from "../dist/index.js";

test("formats resolve as the server reads them", () => {
  assert.deepEqual(resolveFormat(undefined, DEFAULT_OUTPUT), { encoding: "pcm16", sampleRate: 24000 });
  assert.deepEqual(resolveFormat({ encoding: "g711_ulaw" }, DEFAULT_INPUT), { encoding: "mulaw", sampleRate: 8000 });
  assert.deepEqual(resolveFormat({ sample_rate: 8000 }, DEFAULT_INPUT), { encoding: "pcm16", sampleRate: 8000 });
  assert.throws(() => resolveFormat({ encoding: "opus" }, DEFAULT_INPUT), /unsupported audio encoding "opus"/);
  assert.equal(bytesPerSecond(DEFAULT_INPUT), 32000);
  assert.equal(bytesPerSecond({ encoding: "alaw", sampleRate: 8000 }), 8000);
});

test("G.711 matches the standard's code points and round-trips within its step", () => {
  assert.equal(linearToMulaw(0), 0xff);
  assert.equal(mulawToLinear(0xff), 0);
  assert.equal(linearToAlaw(0), 0xd5);
  assert.equal(alawToLinear(0xd5), 8);
  for (const sample of [-32768, -12345, -100, -1, 1, 100, 1000, 12345, 32767]) {
    const step = Math.max(16, Math.abs(sample) / 16);
    assert.ok(Math.abs(mulawToLinear(linearToMulaw(sample)) - sample) <= step, `μ-law ${sample}`);
    assert.ok(Math.abs(alawToLinear(linearToAlaw(sample)) - sample) <= step, `A-law ${sample}`);
  }
});

test("PCM16, base64 and encodings convert both ways", () => {
  const pcm = floatToPcm16(new Float32Array([0, 0.5, -0.5, 1, -1]));
  assert.deepEqual([...pcm16ToFloat(pcm)].map((x) => Math.round(x * 100) / 100), [0, 0.5, -0.5, 1, -1]);
  assert.deepEqual(fromBase64(toBase64(pcm)), pcm);
  const mulaw = { encoding: "mulaw" as const, sampleRate: 8000 };
  assert.equal(encodePcm16(pcm, mulaw).byteLength, 5);
  assert.equal(decodeToPcm16(encodePcm16(pcm, mulaw), mulaw).byteLength, 10);
});
