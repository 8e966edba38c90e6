"use strict";
// Voice: the microphone at 16 kHz sent as 20 ms binary PCM16 frames (echo cancellation,
// noise suppression and auto gain on unless unticked, so an agent heard through laptop
// speakers does not interrupt itself), and reply audio (24 kHz PCM16, base64) scheduled back
// to back, stopped at once on barge-in, which says how much of the cut reply was played
// (`bidi_audio_played`: the runtime keeps what the caller heard). Counters live on `window.switchboard` (made here, extended
// by app.js) for tests.

const voice = (() => {
  const counters = (window.switchboard = {
    audioChunks: 0, audioSamples: 0, scheduledSamples: 0, flushedSources: 0, framesSent: 0, interruptions: 0,
  });
  let playback = null;
  // The reply being played: when each of its chunks starts and how long it lasts, in the
  // playback clock, so that a cut says what was really heard (gaps and all).
  let reply = [];

  function play(base64) {
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    const samples = new Int16Array(bytes.buffer, 0, bytes.length >> 1);
    counters.audioChunks++;
    counters.audioSamples += samples.length;
    if (!playback) playback = { ctx: new AudioContext({ sampleRate: 24000 }), at: 0, sources: new Set() };
    const { ctx } = playback;
    const buffer = ctx.createBuffer(1, samples.length, 24000);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < samples.length; i++) channel[i] = samples[i] / 32768;
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(ctx.destination);
    playback.at = Math.max(playback.at, ctx.currentTime + 0.05);
    source.start(playback.at);
    reply.push({ at: playback.at, seconds: buffer.duration });
    playback.at += buffer.duration;
    playback.sources.add(source);
    source.onended = () => playback && playback.sources.delete(source);
    counters.scheduledSamples += samples.length;
  }

  /** A new reply starts (what is played from now on is its audio). */
  function newReply() { reply = []; }

  /** Milliseconds of the current reply played so far. */
  function playedMs() {
    if (!playback) return 0;
    const now = playback.ctx.currentTime;
    const seconds = reply.reduce((sum, part) => sum + Math.min(Math.max(now - part.at, 0), part.seconds), 0);
    return Math.round(seconds * 1000);
  }

  /** Stops what is playing and drops what is queued (barge-in); the milliseconds of the
   * cut reply that were played, or null when no audio was ever played here. */
  function flush() {
    if (!playback) return null;
    const played = playedMs();
    reply = [];
    for (const source of playback.sources) {
      try { source.stop(); } catch (_) { /* already ended */ }
    }
    counters.flushedSources += playback.sources.size;
    playback.sources.clear();
    playback.at = 0;
    return played;
  }

  const playbackState = () => (playback ? playback.ctx.state : "none");

  const WORKLET = `
class Capture extends AudioWorkletProcessor {
  constructor() { super(); this.buffer = new Int16Array(320); this.fill = 0; }
  process(inputs) {
    const input = inputs[0] && inputs[0][0];
    if (input) {
      let peak = 0;
      for (let i = 0; i < input.length; i++) {
        const s = Math.max(-1, Math.min(1, input[i]));
        peak = Math.max(peak, Math.abs(s));
        this.buffer[this.fill++] = s < 0 ? s * 32768 : s * 32767;
        if (this.fill === this.buffer.length) {
          this.port.postMessage({ pcm: this.buffer.buffer.slice(0), peak });
          this.fill = 0;
          peak = 0;
        }
      }
    }
    return true;
  }
}
registerProcessor("capture", Capture);`;

  let capture = null;

  /** Opens the microphone; `send(frame)` gets each 20 ms frame, `level(0..1)` its peak. */
  async function start(send, level, processing) {
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: {
        channelCount: 1,
        echoCancellation: processing.echoCancellation,
        noiseSuppression: processing.noiseSuppression,
        autoGainControl: processing.autoGainControl,
      },
    });
    const ctx = new AudioContext({ sampleRate: 16000 });
    const url = URL.createObjectURL(new Blob([WORKLET], { type: "application/javascript" }));
    await ctx.audioWorklet.addModule(url);
    const node = new AudioWorkletNode(ctx, "capture");
    node.port.onmessage = (event) => {
      send(event.data.pcm);
      level(event.data.peak);
    };
    ctx.createMediaStreamSource(stream).connect(node);
    capture = { ctx, stream, node };
    counters.micSettings = stream.getAudioTracks()[0]?.getSettings?.() ?? null;
  }

  function stop() {
    if (!capture) return;
    capture.stream.getTracks().forEach((t) => t.stop());
    capture.ctx.close();
    capture = null;
  }

  return { play, flush, newReply, playedMs, playbackState, start, stop, active: () => capture !== null };
})();

window.voice = voice;
