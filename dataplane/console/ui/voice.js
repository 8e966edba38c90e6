"use strict";
// Voice, through the TypeScript client (`client`, which page.html loads from /ui/client/),
// over one of two transports:
// - WebRTC (the default): the microphone on the call's Opus track by the client's
//   CallMicrophone (the browser's echo cancellation, noise suppression and auto gain unless
//   unticked; muted between push-to-talk presses), the agent's voice on the call's remote
//   track played by the page's <audio> element (the browser's jitter buffer and loss
//   concealment), measured by a LevelMeter: audible reply audio is the turn's first audio,
//   and on barge-in (the gateway drops what was queued at once) how long the cut reply was
//   heard is told to the runtime (`bidi_audio_played`);
// - the WebSocket (when WebRTC is unticked or cannot connect): reply audio decoded by the
//   Session, played back to back by the client's Player, stopped at once on barge-in, which
//   tells the runtime how much of the cut reply was played (`bidi_audio_played`: it keeps
//   what the caller heard); the microphone by its Microphone at the session's input rate
//   (16 kHz PCM16, 20 ms binary frames), paused between push-to-talk presses.
// An agent heard through laptop speakers should not interrupt itself: the browser's
// processing is on unless unticked. Counters live on `window.switchboard` (made here,
// extended by app.js) for tests.

/** Peak level (0..1) above which the agent's voice on a WebRTC call counts as heard. */
const AUDIBLE_LEVEL = 0.01;

const voice = (() => {
  const counters = (window.switchboard = { audioChunks: 0, audioSamples: 0, interruptions: 0, micSettings: null, callAudibleMs: 0 });
  const player = new client.Player();
  let microphone = null;
  // Frames sent by microphones closed before this one; which start is current (a stop while
  // one is opening closes it once open).
  let framesBefore = 0;
  let generation = 0;
  let opening = false;
  // The WebRTC call the session runs on (null: the WebSocket), its reply audio's meter, and
  // when the current reply was first heard on it.
  let call = null;
  let meter = null;
  let replyHeardAt = null;
  /** Told when the call's reply audio is audible (app.js: the turn's first audio). */
  let onAudible = () => {};
  Object.defineProperties(counters, {
    scheduledSamples: { get: () => player.scheduledSamples, enumerable: true },
    framesSent: { get: () => framesBefore + (microphone ? microphone.framesSent ?? 0 : 0), enumerable: true },
  });

  /** Plays a chunk of reply audio (the session's `audio` event: `{ data, format }`). */
  function play(chunk) {
    counters.audioChunks++;
    counters.audioSamples += chunk.data.byteLength / (client.bytesPerSecond(chunk.format) / chunk.format.sampleRate);
    player.play(chunk);
  }

  /** A new reply starts (what is played from now on is its audio). */
  function newReply() {
    player.newReply();
    replyHeardAt = null;
  }

  /** Barge-in: stops what is playing, drops what is queued and reports to `session` (if
   * any) what was played of the cut reply; those milliseconds, or null when no audio was
   * ever played here. On a WebRTC call the gateway dropped the queued audio already: what
   * was heard is the time since the reply was first audible. */
  function interrupted(session) {
    if (call) {
      const played = replyHeardAt == null ? null : Math.round(performance.now() - replyHeardAt);
      replyHeardAt = null;
      if (played != null && session) session.audioPlayed(played);
      return played;
    }
    return session ? player.interrupted(session) : player.stop();
  }

  /** The session runs on WebRTC call `next` (null: on the WebSocket): its remote track
   * plays through the page's <audio> element and is measured. */
  function useCall(next, audible = () => {}) {
    meter?.stop();
    meter = null;
    call = next;
    onAudible = audible;
    replyHeardAt = null;
    const element = document.getElementById("remote-audio");
    if (!call) {
      element.srcObject = null;
      return;
    }
    call.play(element);
    const measure = () => {
      if (call !== next || meter) return;
      // The answer's track arrives with the answer; should it come later, look again.
      if (next.remote.getAudioTracks().length === 0) return void setTimeout(measure, 200);
      meter = new client.LevelMeter(next.remote, (peak) => {
        if (peak < AUDIBLE_LEVEL) return;
        counters.callAudibleMs += 20;
        if (replyHeardAt == null) replyHeardAt = performance.now();
        onAudible();
      });
    };
    measure();
  }

  /** Opens the microphone into `session`, or onto WebRTC call `call` the session runs on:
   * `level(0..1)` gets each 20 ms frame's peak, `processing` says which of the browser's
   * processing is on, `paused` whether it starts paused. */
  async function start(session, { call: onCall = null, level, processing, paused }) {
    const mine = ++generation;
    opening = true;
    let opened;
    try {
      opened = onCall
        ? await client.CallMicrophone.start(onCall, { level, processing, paused })
        : await client.Microphone.start(session, { level, processing, paused });
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
    framesBefore += microphone.framesSent ?? 0;
    microphone.stop();
    microphone = null;
  }

  return {
    play, newReply, interrupted, start, setPaused, stop, useCall,
    call: () => call,
    playbackState: () => player.state,
    active: () => microphone !== null || opening,
  };
})();

window.voice = voice;
