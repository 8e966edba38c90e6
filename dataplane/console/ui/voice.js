"use strict";
// Voice, through the TypeScript client (`client`, which page.html loads from /ui/client/):
// reply audio, decoded by its Session, played back to back by its Player, stopped at once on
// barge-in, which tells the runtime how much of the cut reply was played
// (`bidi_audio_played`: it keeps what the caller heard); the microphone by its Microphone at
// the session's input rate (16 kHz PCM16, 20 ms binary frames), echo cancellation, noise
// suppression and auto gain on unless unticked (an agent heard through laptop speakers
// should not interrupt itself), paused between push-to-talk presses. Counters live on
// `window.switchboard` (made here, extended by app.js) for tests.

const voice = (() => {
  const counters = (window.switchboard = { audioChunks: 0, audioSamples: 0, interruptions: 0, micSettings: null });
  const player = new client.Player();
  let microphone = null;
  // Frames sent by microphones closed before this one; which start is current (a stop while
  // one is opening closes it once open).
  let framesBefore = 0;
  let generation = 0;
  let opening = false;
  Object.defineProperties(counters, {
    scheduledSamples: { get: () => player.scheduledSamples, enumerable: true },
    framesSent: { get: () => framesBefore + (microphone ? microphone.framesSent : 0), enumerable: true },
  });

  /** Plays a chunk of reply audio (the session's `audio` event: `{ data, format }`). */
  function play(chunk) {
    counters.audioChunks++;
    counters.audioSamples += chunk.data.byteLength / (client.bytesPerSecond(chunk.format) / chunk.format.sampleRate);
    player.play(chunk);
  }

  /** A new reply starts (what is played from now on is its audio). */
  function newReply() { player.newReply(); }

  /** Barge-in: stops what is playing, drops what is queued and reports to `session` (if
   * any) what was played of the cut reply; those milliseconds, or null when no audio was
   * ever played here. */
  function interrupted(session) {
    return session ? player.interrupted(session) : player.stop();
  }

  /** Opens the microphone into `session`: `level(0..1)` gets each 20 ms frame's peak,
   * `processing` says which of the browser's processing is on, `paused` whether it starts
   * paused. */
  async function start(session, { level, processing, paused }) {
    const mine = ++generation;
    opening = true;
    let opened;
    try {
      opened = await client.Microphone.start(session, { level, processing, paused });
    } finally {
      if (mine === generation) opening = false;
    }
    if (mine !== generation) {
      opened.stop();
      return;
    }
    microphone = opened;
    counters.micSettings = microphone.settings;
  }

  /** Sends the microphone's frames (false) or only measures them (true). */
  function setPaused(paused) {
    if (microphone) microphone.paused = paused;
  }

  function stop() {
    generation++;
    opening = false;
    if (!microphone) return;
    framesBefore += microphone.framesSent;
    microphone.stop();
    microphone = null;
  }

  return {
    play, newReply, interrupted, start, setPaused, stop,
    playbackState: () => player.state,
    active: () => microphone !== null || opening,
  };
})();

window.voice = voice;
