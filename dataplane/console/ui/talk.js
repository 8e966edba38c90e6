"use strict";
// Talking to voice and hybrid agents: the transport a voice session took (WebRTC, or the
// WebSocket and why), shown in the Now panel; the microphone open (Start voice) or push-to-talk (hold
// the button, or Space outside text fields and controls: frames go only while held, and the
// release ends the caller's turn with bidi_audio_input_end), the input level, and each voice
// turn's first-audio time: from the caller's last spoken frame (the end of their speech) to
// the first reply audio. Uses the live session (app.js) and the client's Microphone, or its
// CallMicrophone on a WebRTC call (voice.js).

/** Peak level (0..1) above which a microphone frame counts as the caller speaking. */
const SPEAKING_LEVEL = 0.02;

/** The caller's turn ended (the server heard silence, or push-to-talk was released): their
 * speech ended with the last frame this page sent above SPEAKING_LEVEL. Nothing when no
 * such frame went since the last end (a release after the server already ended the turn). */
function speechEnded() {
  if (state.speechEnd != null || state.lastVoiceAt == null) return;
  state.speechEnd = state.lastVoiceAt;
  state.lastVoiceAt = null;
}

/** The first reply audio after the caller stopped speaking: the turn's first-audio time. */
function firstAudio() {
  if (state.speechEnd == null) return;
  const ms = performance.now() - state.speechEnd;
  state.speechEnd = null;
  if (state.turn && state.turn.firstAudioMs == null) state.turn.firstAudioMs = ms;
  else state.firstAudio = ms;
}

// --- transport: WebRTC or the WebSocket ----------------------------------------------------
/** The transport `session`'s connection took (`client.webRtcFirst`): the WebRTC call, whose
 * remote track the page plays, or the WebSocket with why WebRTC could not connect. A
 * session the page left meanwhile is not opened on it (the call is ended). */
function chooseTransport(session, choice, chosen) {
  if (state.session !== session) {
    if (choice.call) void choice.call.close();
    throw new Error("the page left this session");
  }
  if (choice.transport === "webrtc") {
    // The call ends with the session (the client ends it as it would close the WebSocket,
    // or leaves it, resumable, when it dropped).
    state.call = choice.call;
    voice.useCall(choice.call, () => { firstToken(); firstAudio(); });
    showTransport("webrtc", "WebRTC");
    chosen(choice.call);
  } else {
    state.call = null;
    voice.useCall(null);
    showTransport("websocket", `WebSocket (fallback: ${choice.fallback})`);
    live.note(`Voice over the WebSocket: ${choice.fallback}`);
    chosen(null);
  }
}

/** Shows the session's transport (`kind`: webrtc, websocket, connecting). */
function showTransport(kind, text) {
  state.transport = text;
  $("transport").dataset.transport = kind;
  $("transport").textContent = text;
}

// --- voice --------------------------------------------------------------------------------
/** Whether the microphone's frames go to the session now: always with the microphone open,
 * only while held with push-to-talk. */
const sending = () => !state.pttMode || state.talking;
/** Pauses or resumes sending as `sending` says. */
function gate() { voice.setPaused(!sending()); }

/** Opens the microphone; `ptt`: frames go only while the talk button (or Space) is held. */
async function startVoice({ ptt = false } = {}) {
  state.pttMode = ptt;
  if (!state.voiceSession || !state.session) {
    state.voiceSession = true;
    connect({ withAudio: true });
  }
  // The microphone goes on the WebRTC call once it connected, or as frames on the
  // WebSocket (the session queues them until it started).
  const session = state.session;
  const wanted = ++state.voiceWants;
  const call = await state.transportReady;
  // The session ended or was left meanwhile, or voice was stopped (or started again).
  if (!session || state.session !== session || wanted !== state.voiceWants) return;
  await voice.start(session, {
    call,
    paused: !sending(),
    level: (peak) => {
      $("level").value = peak;
      if (peak > SPEAKING_LEVEL && sending()) state.lastVoiceAt = performance.now();
    },
    processing: { echoCancellation: $("aec").checked, noiseSuppression: $("ns").checked, autoGainControl: $("agc").checked },
  });
  if (!voice.active()) return; // stopped while it opened
  gate();
  $("mic").textContent = "Stop voice";
  $("mic").classList.add("on");
}

function stopVoice() {
  state.voiceWants++;
  voice.stop();
  state.pttMode = state.talking = false;
  $("talk").setAttribute("aria-pressed", "false");
  $("talk").classList.remove("on");
  $("level").value = 0;
  $("mic").textContent = "Start voice";
  $("mic").classList.remove("on");
}

// --- push-to-talk ---------------------------------------------------------------------------
function talkStart() {
  if (state.talking || $("talk").disabled) return;
  state.talking = true;
  state.speechEnd = null;
  $("talk").setAttribute("aria-pressed", "true");
  $("talk").classList.add("on");
  if (!voice.active()) startVoice({ ptt: true }).catch((e) => live.note(`microphone: ${e}`, "error"));
  else state.pttMode = true;
  gate();
}

/** Released: the caller's turn ends now. */
function talkEnd() {
  if (!state.talking) return;
  state.talking = false;
  gate();
  $("talk").setAttribute("aria-pressed", "false");
  $("talk").classList.remove("on");
  state.session?.endAudioInput();
  state.inputEnds++;
  speechEnded();
}

/** Space talks unless typing or working a control that Space itself operates. */
const spaceTalks = (target) => target === document.body || target === $("talk") || target === $("log")
  || !(target.closest && target.closest("input, textarea, select, button, summary, [contenteditable], dialog"));
$("talk").addEventListener("pointerdown", (e) => { e.preventDefault(); talkStart(); });
for (const type of ["pointerup", "pointerleave", "pointercancel"]) $("talk").addEventListener(type, talkEnd);
document.addEventListener("keydown", (e) => {
  if (e.code !== "Space" || !spaceTalks(e.target)) return;
  e.preventDefault();
  if (!e.repeat) talkStart();
});
document.addEventListener("keyup", (e) => {
  if (e.code !== "Space" || !state.talking) return;
  e.preventDefault();
  talkEnd();
});
window.addEventListener("blur", talkEnd);
$("mic").onclick = () => (voice.active() ? stopVoice() : startVoice().catch((e) => live.note(`microphone: ${e}`, "error")));
