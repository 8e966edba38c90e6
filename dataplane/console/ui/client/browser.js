// Generated from clients/typescript/src/browser.ts by `npm run vendor` (tsc): do not edit; the client's tests fail when it differs.
// Browsers only: the microphone into a session (an AudioWorklet at the session's input rate,
// 20 ms frames in its input encoding, sent as binary frames) and reply audio played back to
// back, stopped at once on barge-in, with how much of the cut reply was heard reported
// (`bidi_audio_played`). Nothing here runs at import, so Node may import the package.
import { decodeToPcm16, encodePcm16, pcm16ToFloat } from "./audio.js";
/** The capture worklet: float samples to PCM16, posted in frames of `frame` samples. */
const WORKLET = `
class SwitchboardCapture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.buffer = new Int16Array(options.processorOptions.frame);
    this.fill = 0;
  }
  process(inputs) {
    const input = inputs[0] && inputs[0][0];
    if (input) {
      for (let i = 0; i < input.length; i++) {
        const s = Math.max(-1, Math.min(1, input[i]));
        this.buffer[this.fill++] = s < 0 ? s * 32768 : s * 32767;
        if (this.fill === this.buffer.length) {
          this.port.postMessage(this.buffer.buffer.slice(0));
          this.fill = 0;
        }
      }
    }
    return true;
  }
}
registerProcessor("switchboard-capture", SwitchboardCapture);`;
/** `processing` as getUserMedia's constraints. */
export function processingConstraints(processing) {
    if (typeof processing === "object") {
        return {
            echoCancellation: processing.echoCancellation ?? true,
            noiseSuppression: processing.noiseSuppression ?? true,
            autoGainControl: processing.autoGainControl ?? true,
        };
    }
    const on = processing ?? true;
    return { echoCancellation: on, noiseSuppression: on, autoGainControl: on };
}
/** The microphone, sent into a session while it runs. */
export class Microphone {
    context;
    stream;
    node;
    /** Frames sent so far. */
    framesSent = 0;
    /** While true the microphone is captured (its `level` reported) but nothing is sent:
     * push-to-talk between presses. */
    paused = false;
    constructor(context, stream, node) {
        this.context = context;
        this.stream = stream;
        this.node = node;
    }
    /** Opens the microphone (the page must be allowed to) and sends it into `session` in the
     * session's input format, 20 ms a frame. */
    static async start(session, options = {}) {
        const stream = await navigator.mediaDevices.getUserMedia({
            audio: { channelCount: 1, ...processingConstraints(options.processing) },
        });
        const format = session.inputFormat;
        const context = new AudioContext({ sampleRate: format.sampleRate });
        const url = URL.createObjectURL(new Blob([WORKLET], { type: "application/javascript" }));
        try {
            await context.audioWorklet.addModule(url);
        }
        finally {
            URL.revokeObjectURL(url);
        }
        const node = new AudioWorkletNode(context, "switchboard-capture", {
            processorOptions: { frame: Math.round(format.sampleRate / 50) },
        });
        const microphone = new Microphone(context, stream, node);
        microphone.paused = options.paused ?? false;
        node.port.onmessage = (event) => {
            const pcm = new Uint8Array(event.data);
            if (options.level) {
                const samples = new Int16Array(event.data);
                let peak = 0;
                for (const s of samples)
                    peak = Math.max(peak, Math.abs(s) / 32768);
                options.level(peak);
            }
            if (microphone.paused)
                return;
            try {
                session.sendAudio(encodePcm16(pcm, format));
                microphone.framesSent += 1;
            }
            catch {
                microphone.stop();
            }
        };
        context.createMediaStreamSource(stream).connect(node);
        return microphone;
    }
    /** What the browser applied to the microphone's track (its processing, rate, device), or
     * null where it does not say. */
    get settings() {
        return this.stream.getAudioTracks()[0]?.getSettings?.() ?? null;
    }
    /** Stops sending and releases the microphone. */
    stop() {
        this.node.port.onmessage = null;
        this.node.disconnect();
        for (const track of this.stream.getTracks())
            track.stop();
        void this.context.close().catch(() => { });
    }
}
/** Reply audio played back to back in a page. */
export class Player {
    /** Chunks, samples (at each chunk's rate) and milliseconds of audio scheduled so far. */
    chunks = 0;
    scheduledSamples = 0;
    scheduledMs = 0;
    context;
    at = 0;
    sources = new Set();
    /** The current reply's parts in the playback clock: when each starts and how long it lasts. */
    reply = [];
    /** Plays `session`'s reply audio; on barge-in stops it and reports what was heard. Returns
     * what detaches it. */
    attach(session) {
        const offs = [
            session.on("audio", (chunk) => this.play(chunk)),
            session.on("bidi_response_start", () => this.newReply()),
            session.on("bidi_interruption", () => this.interrupted(session)),
        ];
        return () => offs.forEach((off) => off());
    }
    /** A new reply starts (`bidi_response_start`): what plays from now on is its audio, for
     * `playedMs`. `attach` calls it; call it yourself when you dispatch messages yourself. */
    newReply() {
        this.reply = [];
    }
    /**
     * Barge-in (`bidi_interruption`): stops playback, drops what is queued and tells `session`
     * how much of the cut reply was played (`bidi_audio_played`), so the conversation keeps
     * only what the caller heard. Returns those milliseconds, or null (nothing reported) when
     * nothing was ever played. `attach` calls it.
     */
    interrupted(session) {
        const played = this.stop();
        if (played !== null)
            session.audioPlayed(played);
        return played;
    }
    /** Schedules a chunk after the ones before it. */
    play(chunk) {
        const samples = pcm16ToFloat(decodeToPcm16(chunk.data, chunk.format));
        if (samples.length === 0)
            return;
        const context = (this.context ??= new AudioContext());
        const buffer = context.createBuffer(1, samples.length, chunk.format.sampleRate);
        buffer.copyToChannel(samples, 0);
        const source = context.createBufferSource();
        source.buffer = buffer;
        source.connect(context.destination);
        this.at = Math.max(this.at, context.currentTime + 0.05);
        source.start(this.at);
        this.reply.push({ at: this.at, seconds: buffer.duration });
        this.at += buffer.duration;
        this.sources.add(source);
        source.onended = () => this.sources.delete(source);
        this.chunks += 1;
        this.scheduledSamples += samples.length;
        this.scheduledMs += buffer.duration * 1000;
    }
    /** Milliseconds of the current reply played so far. */
    playedMs() {
        if (!this.context)
            return 0;
        const now = this.context.currentTime;
        const seconds = this.reply.reduce((sum, part) => sum + Math.min(Math.max(now - part.at, 0), part.seconds), 0);
        return Math.round(seconds * 1000);
    }
    /** The playback clock's state (`running` once audio may play). */
    get state() {
        return this.context?.state ?? "none";
    }
    /** Stops what plays and drops what is queued; the milliseconds of the cut reply that were
     * played, or null when nothing was ever played. */
    stop() {
        if (!this.context)
            return null;
        const played = this.playedMs();
        this.reply = [];
        for (const source of this.sources) {
            try {
                source.stop();
            }
            catch {
                // already ended
            }
        }
        this.sources.clear();
        this.at = 0;
        return played;
    }
}
