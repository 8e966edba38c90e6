// Browsers only: a session over WebRTC. The gateway's (and local mode's) WHIP-style
// signalling — `POST /v1/webrtc` with an SDP offer, answered with SDP and a `Location`
// for `DELETE` (and `PATCH`: trickle ICE, ICE restarts, which this client does not do
// yet) — one Opus track each way (the browser's echo
// cancellation, noise suppression, jitter buffer and loss concealment), and a data channel
// that carries the session protocol's JSON unchanged. `WebRtcCall.socket` makes that data
// channel look like the WebSocket a `Session` speaks through, so `Session` (start, resume,
// typed messages) works over either; `webRtcFirst` is a `Session`'s socket factory that
// tries WebRTC and falls back to the WebSocket when WebRTC cannot connect.
// Nothing here runs at import, so Node may import the package.
import { type MicrophoneOptions, processingConstraints } from "./browser.js";
import type { Credentials, WebSocketFactory, WebSocketLike } from "./session.js";

/** WebRTC could not carry the session (no RTCPeerConnection here, the offer refused, ICE
 * or DTLS did not connect in time); `message` says which, for the person at the page. */
export class WebRtcUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebRtcUnavailable";
  }
}

/** How long ICE, DTLS and the data channel may take to open before WebRTC counts as not
 * connecting (ms): a browser on a working network opens them in well under a second. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 8000;

export interface WebRtcOptions {
  /** The signalling endpoint: `https://gateway.example/v1/webrtc` (or `/v1/webrtc` in a page the gateway serves). */
  url: string;
  /** The credential, when the gateway asks for one (sent as `Authorization: Bearer`). */
  credentials?: Credentials;
  /** The microphone's track, sent from the start; none: add it later with `setMicrophone`. */
  microphone?: MediaStreamTrack | null;
  /** STUN or TURN servers of your own. */
  iceServers?: RTCIceServer[];
  /** How long the connection may take to open (ms). Default `DEFAULT_CONNECT_TIMEOUT_MS`. */
  connectTimeoutMs?: number;
}

/** A WebRTC call to the gateway: its peer connection, the data channel the session runs
 * on, the agent's audio (`remote`) and the caller's (`setMicrophone`). */
export class WebRtcCall {
  /** The agent's voice: the answer's audio track, once it arrived. Play it with an
   * `<audio>` element (`play`). */
  readonly remote = new MediaStream();
  private adapter: ChannelSocket | undefined;
  private ended = false;

  private constructor(
    readonly pc: RTCPeerConnection,
    readonly channel: RTCDataChannel,
    private readonly sender: RTCRtpSender,
    /** The call's resource (`PATCH`, `DELETE`). */
    readonly location: string,
    private readonly headers: Record<string, string>,
  ) {}

  /**
   * Offers a call, posts the offer and waits until the data channel is open. Rejects with
   * `WebRtcUnavailable` when there is no RTCPeerConnection, the offer is refused (its status
   * and the gateway's message), or the connection does not open within
   * `connectTimeoutMs` (the call is then ended: `DELETE`).
   */
  static async open(options: WebRtcOptions): Promise<WebRtcCall> {
    if (typeof RTCPeerConnection === "undefined") throw new WebRtcUnavailable("this browser has no WebRTC");
    const credential = options.credentials?.token ?? options.credentials?.apiKey;
    const headers: Record<string, string> = credential ? { authorization: `Bearer ${credential}` } : {};
    const pc = new RTCPeerConnection(options.iceServers ? { iceServers: options.iceServers } : {});
    const remote: MediaStreamTrack[] = [];
    pc.ontrack = (event) => remote.push(event.track);
    const track = options.microphone ?? null;
    const transceiver = track
      ? pc.addTransceiver(track, { direction: "sendrecv", streams: [new MediaStream([track])] })
      : pc.addTransceiver("audio", { direction: "sendrecv" });
    const channel = pc.createDataChannel("session");
    channel.binaryType = "arraybuffer";
    let location: string | undefined;
    try {
      await pc.setLocalDescription(await pc.createOffer());
      let response: Response;
      try {
        response = await fetch(options.url, {
          method: "POST",
          body: pc.localDescription?.sdp ?? "",
          headers: { "content-type": "application/sdp", ...headers },
        });
      } catch (error) {
        throw new WebRtcUnavailable(`POST ${pathOf(options.url)} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
      const body = await response.text();
      if (response.status !== 201) {
        throw new WebRtcUnavailable(`POST ${pathOf(options.url)} answered ${response.status}${refusalOf(body)}`);
      }
      const where = response.headers.get("location");
      if (!where) throw new WebRtcUnavailable(`POST ${pathOf(options.url)} answered no Location`);
      location = new URL(where, new URL(options.url, globalThis.location?.href)).toString();
      await pc.setRemoteDescription({ type: "answer", sdp: body });
    } catch (error) {
      pc.close();
      // An answer the browser would not take: the gateway's call is ended too.
      if (location) void fetch(location, { method: "DELETE", headers }).catch(() => {});
      if (error instanceof WebRtcUnavailable) throw error;
      throw new WebRtcUnavailable(`the offer failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    const call = new WebRtcCall(pc, channel, transceiver.sender, location, headers);
    for (const t of remote) call.remote.addTrack(t);
    pc.ontrack = (event) => call.remote.addTrack(event.track);
    // Candidates the browser finds after the offer are not trickled: the edge is ICE-lite,
    // it answers the browser's checks from wherever they come and sends none of its own.
    const timeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    try {
      await new Promise<void>((resolve, reject) => {
        const done = (error?: Error) => {
          clearTimeout(timer);
          channel.removeEventListener("open", opened);
          pc.removeEventListener("connectionstatechange", changed);
          if (error) reject(error);
          else resolve();
        };
        const opened = () => done();
        const changed = () => {
          if (pc.connectionState === "failed" || pc.connectionState === "closed") {
            done(new WebRtcUnavailable(`WebRTC did not connect (${pc.connectionState})`));
          }
        };
        const timer = setTimeout(
          () => done(new WebRtcUnavailable(`WebRTC did not connect within ${timeoutMs / 1000} s (ICE ${pc.iceConnectionState})`)),
          timeoutMs,
        );
        if (channel.readyState === "open") return done();
        channel.addEventListener("open", opened);
        pc.addEventListener("connectionstatechange", changed);
      });
    } catch (error) {
      await call.close();
      throw error;
    }
    return call;
  }

  /** The data channel as the WebSocket a `Session` speaks through (the same one each time;
   * pass it in `SessionOptions.webSocket`, or use `webRtcFirst`). */
  get socket(): WebSocketLike {
    return (this.adapter ??= new ChannelSocket(this));
  }

  /** Sends `track` as the caller's audio from now on (null: nothing). No new offer is needed. */
  setMicrophone(track: MediaStreamTrack | null): Promise<void> {
    return this.sender.replaceTrack(track);
  }

  /** Plays the agent's audio through `element` (an `<audio>`; a new one when none is given). */
  play(element: HTMLAudioElement = new Audio()): HTMLAudioElement {
    element.srcObject = this.remote;
    element.autoplay = true;
    void element.play().catch(() => {});
    return element;
  }

  /** The call's media as WebRTC's statistics count it: RTP packets each way, the audio
   * energy received, the candidate pair's transport (`udp`, `tcp`) and round trip. */
  async stats(): Promise<CallStats> {
    const out: CallStats = { packetsSent: 0, packetsReceived: 0, packetsLost: 0, audioEnergy: 0, concealedSamples: 0, transport: null, rttMs: null };
    const report = await this.pc.getStats();
    const byId = new Map<string, Record<string, unknown>>();
    report.forEach((s: Record<string, unknown>) => byId.set(String(s.id), s));
    report.forEach((s: Record<string, unknown>) => {
      if (s.type === "outbound-rtp" && s.kind === "audio") out.packetsSent += Number(s.packetsSent ?? 0);
      if (s.type === "inbound-rtp" && s.kind === "audio") {
        out.packetsReceived += Number(s.packetsReceived ?? 0);
        out.packetsLost += Number(s.packetsLost ?? 0);
        out.audioEnergy += Number(s.totalAudioEnergy ?? 0);
        out.concealedSamples += Number(s.concealedSamples ?? 0);
      }
      if (s.type === "transport" && s.selectedCandidatePairId) {
        const pair = byId.get(String(s.selectedCandidatePairId));
        const local = pair && byId.get(String(pair.localCandidateId));
        out.transport = local ? String(local.protocol ?? "") || null : null;
        out.rttMs = pair && typeof pair.currentRoundTripTime === "number" ? Math.round(pair.currentRoundTripTime * 1000) : null;
      }
    });
    return out;
  }

  /** Ends the call: `DELETE` on its resource (the session ends, as a WebSocket's close ends
   * it) and the peer connection closed. Once only; a second call does nothing. */
  async close(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    try {
      await fetch(this.location, { method: "DELETE", headers: this.headers });
    } catch {
      // the gateway is gone: the call ends with the peer connection anyway
    } finally {
      this.pc.close();
    }
  }

  /** Leaves a call whose connection is gone (its data channel closed without the session's
   * goodbye, or ICE failed): the peer connection is closed, but no `DELETE`, which would end
   * the session: the gateway parks it, to be resumed on a new call. */
  drop(): void {
    if (this.ended) return;
    this.ended = true;
    this.pc.close();
  }

  /** Whether `close` or `drop` was called. */
  get closed(): boolean {
    return this.ended;
  }
}

/** What `WebRtcCall.stats` reads. */
export interface CallStats {
  /** RTP packets of the caller's audio sent. */
  packetsSent: number;
  /** RTP packets of the agent's audio received, and lost on the way. */
  packetsReceived: number;
  packetsLost: number;
  /** The received audio's energy (WebRTC's `totalAudioEnergy`: 0 for silence). */
  audioEnergy: number;
  /** Samples the jitter buffer concealed (loss, late packets). */
  concealedSamples: number;
  /** The selected candidate pair's protocol (`udp`, `tcp`); null before one is selected. */
  transport: string | null;
  rttMs: number | null;
}

/** A call's data channel dressed as a WebSocket for `Session`. A channel that closes after
 * the session's `bidi_connection_close` closes as 1000 with its reason, and the call is
 * ended; otherwise as a dropped connection (1006), which a `Session` may resume over a new
 * call (the call is dropped, not ended). `close()` ends the call. */
class ChannelSocket implements WebSocketLike {
  binaryType = "arraybuffer";
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  private done = false;
  private goodbye: string | undefined;

  constructor(private readonly call: WebRtcCall) {
    const { channel, pc } = call;
    channel.onmessage = (event) => {
      if (typeof event.data === "string" && event.data.includes("bidi_connection_close")) {
        try {
          const message = JSON.parse(event.data) as { type?: string; reason?: string };
          if (message.type === "bidi_connection_close") this.goodbye = message.reason ?? "";
        } catch {
          // not JSON: the session reads it
        }
      }
      this.onmessage?.({ data: event.data });
    };
    channel.onclose = () => this.closed(this.goodbye === undefined ? 1006 : 1000, this.goodbye ?? "the WebRTC call dropped");
    pc.addEventListener("connectionstatechange", () => {
      if (pc.connectionState === "failed") this.closed(1006, "the WebRTC connection failed");
    });
    // Already open (`WebRtcCall.open` waits for it): told once the session set its handler.
    if (channel.readyState === "open") setTimeout(() => !this.done && this.onopen?.({}), 0);
    else channel.onopen = () => this.onopen?.({});
  }

  get readyState(): number {
    if (this.done) return 3;
    return { connecting: 0, open: 1, closing: 2, closed: 3 }[this.call.channel.readyState];
  }

  send(data: string | ArrayBufferView | ArrayBuffer): void {
    const channel = this.call.channel as unknown as { send(data: string | ArrayBufferView | ArrayBuffer): void };
    channel.send(data);
  }

  close(code = 1000, reason = ""): void {
    this.closed(code, reason);
  }

  private closed(code: number, reason: string): void {
    if (this.done) return;
    this.done = true;
    // A dropped call is left, not ended: the gateway parks its session for a resume.
    if (code === 1006) this.call.drop();
    else void this.call.close();
    this.onclose?.({ code, reason });
  }
}

export interface WebRtcFirstOptions {
  /** The signalling endpoint (`/v1/webrtc`). */
  webrtcUrl: string;
  /** The credential, for both transports (the WebSocket's in `access_token`, as a page must). */
  credentials?: Credentials;
  /** The microphone's track for the call (or `setMicrophone` on the call later). */
  microphone?: MediaStreamTrack | null;
  iceServers?: RTCIceServer[];
  connectTimeoutMs?: number;
  /** Told which transport each connection (the first, and each resume) took. */
  onTransport?: (choice: TransportChoice) => void;
}

/** The transport a connection took: WebRTC with its call, or the WebSocket with why WebRTC
 * could not connect. */
export type TransportChoice = { transport: "webrtc"; call: WebRtcCall } | { transport: "websocket"; fallback: string };

/**
 * A `Session`'s socket factory (`SessionOptions.webSocket`) that opens a WebRTC call and runs
 * the session on its data channel, or, when WebRTC cannot connect (`WebRtcUnavailable`),
 * the page's WebSocket to the session's `url` (the credential in `access_token`). Each
 * connection tries WebRTC again, a resume too.
 */
export function webRtcFirst(options: WebRtcFirstOptions): WebSocketFactory {
  return async (url) => {
    try {
      const call = await WebRtcCall.open({
        url: options.webrtcUrl,
        ...(options.credentials ? { credentials: options.credentials } : {}),
        ...(options.microphone ? { microphone: options.microphone } : {}),
        ...(options.iceServers ? { iceServers: options.iceServers } : {}),
        ...(options.connectTimeoutMs ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
      });
      options.onTransport?.({ transport: "webrtc", call });
      return call.socket;
    } catch (error) {
      if (!(error instanceof WebRtcUnavailable)) throw error;
      options.onTransport?.({ transport: "websocket", fallback: error.message });
      const target = new URL(url);
      const credential = options.credentials?.token ?? options.credentials?.apiKey;
      if (credential) target.searchParams.set("access_token", credential);
      return new WebSocket(target.toString()) as unknown as WebSocketLike;
    }
  };
}

/** The path of `url`, for messages. */
function pathOf(url: string): string {
  try {
    return new URL(url, globalThis.location?.href).pathname;
  } catch {
    return url;
  }
}

/** ": <the gateway's message>" from a JSON refusal `{code, message}`, else "". */
function refusalOf(body: string): string {
  try {
    const refusal = JSON.parse(body) as { message?: unknown };
    return typeof refusal.message === "string" ? `: ${refusal.message}` : "";
  } catch {
    return body ? `: ${body.slice(0, 200)}` : "";
  }
}

/** The microphone, sent on a call's audio track (the browser's Opus encoder, with its echo
 * cancellation, noise suppression and auto gain as asked); the same options as `Microphone`. */
export class CallMicrophone {
  private constructor(
    private readonly call: WebRtcCall,
    private readonly stream: MediaStream,
    private readonly meter: LevelMeter | undefined,
  ) {}

  /** Opens the microphone (the page must be allowed to) and sends it on `call`. */
  static async start(call: WebRtcCall, options: MicrophoneOptions = {}): Promise<CallMicrophone> {
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, ...processingConstraints(options.processing) },
    });
    const track = stream.getAudioTracks()[0];
    if (!track) throw new Error("the microphone gave no audio track");
    const meter = options.level ? new LevelMeter(stream, options.level) : undefined;
    const microphone = new CallMicrophone(call, stream, meter);
    microphone.paused = options.paused ?? false;
    await call.setMicrophone(track);
    return microphone;
  }

  /** While true the microphone is measured (its `level` reported) but the track sends
   * silence: push-to-talk between presses. */
  get paused(): boolean {
    return !(this.stream.getAudioTracks()[0]?.enabled ?? false);
  }

  set paused(paused: boolean) {
    for (const track of this.stream.getAudioTracks()) track.enabled = !paused;
  }

  /** What the browser applied to the microphone's track (its processing, rate, device). */
  get settings(): MediaTrackSettings | null {
    return this.stream.getAudioTracks()[0]?.getSettings?.() ?? null;
  }

  /** Stops sending and releases the microphone (the call goes on). */
  stop(): void {
    this.meter?.stop();
    if (!this.call.closed) void this.call.setMicrophone(null).catch(() => {});
    for (const track of this.stream.getTracks()) track.stop();
  }
}

/** Peak levels (0..1) of a stream's audio, every `everyMs`: a Web Audio analyser. */
export class LevelMeter {
  private readonly context: AudioContext;
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(stream: MediaStream, level: (peak: number) => void, everyMs = 20) {
    this.context = new AudioContext();
    const analyser = this.context.createAnalyser();
    analyser.fftSize = 1024;
    this.context.createMediaStreamSource(stream).connect(analyser);
    const samples = new Float32Array(analyser.fftSize);
    this.timer = setInterval(() => {
      analyser.getFloatTimeDomainData(samples);
      let peak = 0;
      for (const s of samples) peak = Math.max(peak, Math.abs(s));
      level(peak);
    }, everyMs);
  }

  stop(): void {
    clearInterval(this.timer);
    void this.context.close().catch(() => {});
  }
}
