// Barge-in over a real WebRTC call from headless Chromium (playwright-core) to local mode;
// prints what happened as one JSON line. Usage:
//   node barge_in.cjs <playwright-core dir> <local url> <microphone wav> <chromium> <question Hz>
// The page sends one track: a Web Audio mix of the microphone (the WAV, opened once the
// greeting was heard out, so its request comes then) and a tone the page switches on (the
// caller speaking over the agent). It asks for a story by the WAV; once it heard a second
// of it, it speaks the question's phrase tone for 2 s. It measures the remote track every
// 20 ms (a Web Audio analyser's RMS) and WebRTC's receive statistics every 100 ms, and
// notes when the caller began to speak and when the bidi_interruption arrived; then it
// waits for the answer, hears it, ends the call (DELETE) and reads the session's record.
"use strict";
const [playwrightDir, url, wav, executablePath, questionHz] = process.argv.slice(2);
const { chromium } = require(playwrightDir);
const { launch } = require("./browser.cjs");
const PATIENCE = 45000;

/** In the page: the call. Returns what it saw and the measurements. */
async function call(page) {
  return page.evaluate(async ({ PATIENCE, questionHz }) => {
    const AUDIBLE = 0.01;
    const seen = { messages: [], levels: [], stats: [], at: {} };
    const now = () => performance.now();
    const context = new AudioContext();
    const mix = context.createMediaStreamDestination();
    const tone = context.createOscillator();
    tone.frequency.value = questionHz;
    const gain = context.createGain();
    gain.gain.value = 0;
    tone.connect(gain).connect(mix);
    tone.start();
    const pc = new RTCPeerConnection();
    pc.addTrack(mix.stream.getAudioTracks()[0], mix.stream);
    const channel = pc.createDataChannel("session");
    let analyser;
    pc.addEventListener("track", (event) => {
      const stream = event.streams[0] || new MediaStream([event.track]);
      const audio = new Audio();
      audio.srcObject = stream;
      audio.play().catch(() => {});
      analyser = context.createAnalyser();
      analyser.fftSize = 1024;
      context.createMediaStreamSource(stream).connect(analyser);
    });
    const samples = new Float32Array(1024);
    const sampler = setInterval(() => {
      if (!analyser) return;
      analyser.getFloatTimeDomainData(samples);
      let sum = 0;
      for (const s of samples) sum += s * s;
      seen.levels.push([now(), Math.sqrt(sum / samples.length)]);
    }, 20);
    const statser = setInterval(async () => {
      const t = now();
      (await pc.getStats()).forEach((s) => {
        if (s.type === "inbound-rtp" && s.kind === "audio") seen.stats.push([t, s.packetsReceived || 0, s.totalAudioEnergy || 0]);
      });
    }, 100);
    const until = (what, test) => new Promise((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`timed out waiting for ${what}: ${JSON.stringify(seen.messages).slice(0, 6000)}`)), PATIENCE);
      const check = () => { if (test()) { clearTimeout(timer); done(); } else setTimeout(check, 20); };
      check();
    });
    const has = (test) => seen.messages.some(test);
    const said = (role, pattern) => (m) => m.type === "bidi_transcript_stream" && new RegExp(role, "i").test(m.role) && pattern.test(m.text || "");
    const audibleSince = (since) => seen.levels.filter(([t, l]) => t >= since && l > AUDIBLE).length * 20;
    const quietFor = (ms) => seen.levels.length > ms / 20 && seen.levels.slice(-ms / 20).every(([, l]) => l <= AUDIBLE);
    channel.addEventListener("message", (event) => {
      const m = JSON.parse(event.data);
      seen.messages.push(m);
      if (m.type === "bidi_interruption" && seen.at.interrupted == null) seen.at.interrupted = now();
      if (said("user", /story/)(m) && seen.at.asked == null) seen.at.asked = now();
    });
    channel.addEventListener("open", () => {
      channel.send(JSON.stringify({ type: "session_start", agent: "triage", modalities: ["audio", "text"] }));
    });
    await pc.setLocalDescription(await pc.createOffer());
    const response = await fetch("/v1/webrtc", { method: "POST", body: pc.localDescription.sdp, headers: { "content-type": "application/sdp" } });
    seen.status = response.status;
    const location = response.headers.get("location");
    const answer = await response.text();
    if (response.status !== 201) throw new Error(`POST answered ${response.status}: ${answer}`);
    await pc.setRemoteDescription({ type: "answer", sdp: answer });
    await until("bidi_connection_start", () => has((m) => m.type === "bidi_connection_start"));
    // The greeting (spoken first: its final transcript, no response of a turn), heard out.
    await until("the greeting", () => has((m) => m.type === "bidi_transcript_stream" && m.is_final && /assistant/i.test(m.role))
      && audibleSince(0) > 0 && quietFor(600));
    seen.greetingHeardMs = audibleSince(0);
    // The microphone from now: its WAV asks for the story.
    const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
    context.createMediaStreamSource(mic).connect(mix);
    seen.at.mic = now();
    await until("the request for the story", () => seen.at.asked != null);
    await until("a second of the story", () => audibleSince(seen.at.asked) >= 1000);
    // The caller speaks over it: the question's tone for 2 s.
    seen.at.speak = now();
    gain.gain.setValueAtTime(0.25, context.currentTime);
    gain.gain.setValueAtTime(0, context.currentTime + 2);
    await until("the bidi_interruption", () => seen.at.interrupted != null);
    await until("the question heard", () => has(said("user", /opening hours/)));
    await until("the answer", () => has(said("assistant", /nine to five/)));
    seen.at.answered = now();
    await until("the answer's audio", () => audibleSince(seen.at.speak + 2000) >= 200);
    await new Promise((r) => setTimeout(r, 1500));
    clearInterval(sampler);
    clearInterval(statser);
    const ended = await fetch(location, { method: "DELETE" });
    seen.deleted = ended.status;
    pc.close();
    mic.getTracks().forEach((t) => t.stop());

    // What was heard, from the measurements.
    const { levels, stats, at } = seen;
    const audible = ([, l]) => l > AUDIBLE;
    const storyStart = (levels.find((s) => s[0] >= at.asked && audible(s)) || [NaN])[0];
    // The cut: the first 300 ms of quiet after the caller began to speak; then the answer.
    let cut = NaN;
    let answerStart = NaN;
    for (let i = levels.findIndex(([t]) => t >= at.speak); i >= 0 && i + 15 <= levels.length; i++) {
      if (Number.isNaN(cut)) {
        if (levels.slice(i, i + 15).every((s) => !audible(s))) cut = levels[i][0];
      } else if (audible(levels[i])) {
        answerStart = levels[i][0];
        break;
      }
    }
    const statAt = (t, after) => (after ? stats.find(([s]) => s >= t) : [...stats].reverse().find(([s]) => s <= t));
    const rate = (from, to, index) => {
      const a = statAt(from, true);
      const b = statAt(to, false);
      return a && b && b[0] > a[0] ? ((b[index] - a[index]) * 1000) / (b[0] - a[0]) : NaN;
    };
    seen.measured = {
      storyHeardMs: Math.round(at.speak - storyStart),
      cutAfterSpeechMs: Math.round(cut - at.speak),
      cutAfterInterruptionMs: Math.round(cut - at.interrupted),
      interruptionAfterSpeechMs: Math.round(at.interrupted - at.speak),
      quietMs: Math.round(answerStart - cut),
      answerHeardMs: audibleSince(answerStart),
      storyEnergyPerSecond: rate(storyStart, at.speak, 2),
      quietEnergyPerSecond: rate(cut + 200, answerStart - 100, 2),
      storyPacketsPerSecond: rate(storyStart, at.speak, 1),
      quietPacketsPerSecond: rate(cut + 200, answerStart - 100, 1),
      // The levels around the cut, for a person reading a failure.
      around: levels.filter(([t]) => t >= at.speak - 200 && t <= at.speak + 3000).map(([t, l]) => [Math.round(t - at.speak), Number(l.toFixed(4))]),
    };
    delete seen.levels;
    delete seen.stats;
    return seen;
  }, { PATIENCE, questionHz: Number(questionHz) });
}

async function main() {
  const browser = await launch(chromium, executablePath, { wav });
  const result = {};
  const errors = [];
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    result.call = await call(page);
    const start = result.call.messages.find((m) => m.type === "bidi_connection_start");
    const id = start && start.session_id;
    for (let i = 0; i < 200 && id; i++) {
      const r = await fetch(`${url}v1/sessions/${id}`);
      if (r.status === 200) {
        result.record = JSON.parse(await r.text());
        if (result.record.outcome === "ended") break;
      }
      await new Promise((done) => setTimeout(done, 100));
    }
  } finally {
    result.errors = errors;
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
