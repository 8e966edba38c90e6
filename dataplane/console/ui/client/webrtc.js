// Generated from clients/typescript/src/webrtc.ts by `npm run vendor` (tsc): do not edit; the client's tests fail when it differs.
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
import { processingConstraints } from "./browser.js";
/** WebRTC could not carry the session (no RTCPeerConnection here, the offer refused, ICE
 * or DTLS did not connect in time); `message` says which, for the person at the page. */
export class WebRtcUnavailable extends Error {
    constructor(message) {
        super(message);
        this.name = "WebRtcUnavailable";
    }
}
/** How long ICE, DTLS and the data channel may take to open before WebRTC counts as not
 * connecting (ms): a browser on a working network opens them in well under a second. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 8000;
/** A WebRTC call to the gateway: its peer connection, the data channel the session runs
 * on, the agent's audio (`remote`) and the caller's (`setMicrophone`). */
export class WebRtcCall {
    pc;
    channel;
    sender;
    location;
    headers;
    /** The agent's voice: the answer's audio track, once it arrived. Play it with an
     * `<audio>` element (`play`). */
    remote = new MediaStream();
    adapter;
    ended = false;
    constructor(pc, channel, sender, 
    /** The call's resource (`PATCH`, `DELETE`). */
    location, headers) {
        this.pc = pc;
        this.channel = channel;
        this.sender = sender;
        this.location = location;
        this.headers = headers;
    }
    /**
     * Offers a call, posts the offer and waits until the data channel is open. Rejects with
     * `WebRtcUnavailable` when there is no RTCPeerConnection, the offer is refused (its status
     * and the gateway's message), or the connection does not open within
     * `connectTimeoutMs` (the call is then ended: `DELETE`).
     */
    static async open(options) {
        if (typeof RTCPeerConnection === "undefined")
            throw new WebRtcUnavailable("this browser has no WebRTC");
        const credential = options.credentials?.token ?? options.credentials?.apiKey;
        const headers = credential ? { authorization: `Bearer ${credential}` } : {};
        const pc = new RTCPeerConnection(options.iceServers ? { iceServers: options.iceServers } : {});
        const remote = [];
        pc.ontrack = (event) => remote.push(event.track);
        const track = options.microphone ?? null;
        const transceiver = track
            ? pc.addTransceiver(track, { direction: "sendrecv", streams: [new MediaStream([track])] })
            : pc.addTransceiver("audio", { direction: "sendrecv" });
        const channel = pc.createDataChannel("session");
        channel.binaryType = "arraybuffer";
        let location;
        try {
            await pc.setLocalDescription(await pc.createOffer());
            let response;
            try {
                response = await fetch(options.url, {
                    method: "POST",
                    body: pc.localDescription?.sdp ?? "",
                    headers: { "content-type": "application/sdp", ...headers },
                });
            }
            catch (error) {
                throw new WebRtcUnavailable(`POST ${pathOf(options.url)} failed: ${error instanceof Error ? error.message : String(error)}`);
            }
            const body = await response.text();
            if (response.status !== 201) {
                throw new WebRtcUnavailable(`POST ${pathOf(options.url)} answered ${response.status}${refusalOf(body)}`);
            }
            const where = response.headers.get("location");
            if (!where)
                throw new WebRtcUnavailable(`POST ${pathOf(options.url)} answered no Location`);
            location = new URL(where, new URL(options.url, globalThis.location?.href)).toString();
            await pc.setRemoteDescription({ type: "answer", sdp: body });
        }
        catch (error) {
            pc.close();
            // An answer the browser would not take: the gateway's call is ended too.
            if (location)
                void fetch(location, { method: "DELETE", headers }).catch(() => { });
            if (error instanceof WebRtcUnavailable)
                throw error;
            throw new WebRtcUnavailable(`the offer failed: ${error instanceof Error ? error.message : String(error)}`);
        }
        const call = new WebRtcCall(pc, channel, transceiver.sender, location, headers);
        for (const t of remote)
            call.remote.addTrack(t);
        pc.ontrack = (event) => call.remote.addTrack(event.track);
        // Candidates the browser finds after the offer are not trickled: the edge is ICE-lite,
        // it answers the browser's checks from wherever they come and sends none of its own.
        const timeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
        try {
            await new Promise((resolve, reject) => {
                const done = (error) => {
                    clearTimeout(timer);
                    channel.removeEventListener("open", opened);
                    pc.removeEventListener("connectionstatechange", changed);
                    if (error)
                        reject(error);
                    else
                        resolve();
                };
                const opened = () => done();
                const changed = () => {
                    if (pc.connectionState === "failed" || pc.connectionState === "closed") {
                        done(new WebRtcUnavailable(`WebRTC did not connect (${pc.connectionState})`));
                    }
                };
                const timer = setTimeout(() => done(new WebRtcUnavailable(`WebRTC did not connect within ${timeoutMs / 1000} s (ICE ${pc.iceConnectionState})`)), timeoutMs);
                if (channel.readyState === "open")
                    return done();
                channel.addEventListener("open", opened);
                pc.addEventListener("connectionstatechange", changed);
            });
        }
        catch (error) {
            await call.close();
            throw error;
        }
        return call;
    }
    /** The data channel as the WebSocket a `Session` speaks through (the same one each time;
     * pass it in `SessionOptions.webSocket`, or use `webRtcFirst`). */
    get socket() {
        return (this.adapter ??= new ChannelSocket(this));
    }
    /** Sends `track` as the caller's audio from now on (null: nothing). No new offer is needed. */
    setMicrophone(track) {
        return this.sender.replaceTrack(track);
    }
    /** Plays the agent's audio through `element` (an `<audio>`; a new one when none is given). */
    play(element = new Audio()) {
        element.srcObject = this.remote;
        element.autoplay = true;
        void element.play().catch(() => { });
        return element;
    }
    /** The call's media as WebRTC's statistics count it: RTP packets each way, the audio
     * energy received, the candidate pair's transport (`udp`, `tcp`) and round trip. */
    async stats() {
        const out = { packetsSent: 0, packetsReceived: 0, packetsLost: 0, audioEnergy: 0, concealedSamples: 0, transport: null, rttMs: null };
        const report = await this.pc.getStats();
        const byId = new Map();
        report.forEach((s) => byId.set(String(s.id), s));
        report.forEach((s) => {
            if (s.type === "outbound-rtp" && s.kind === "audio")
                out.packetsSent += Number(s.packetsSent ?? 0);
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
    async close() {
        if (this.ended)
            return;
        this.ended = true;
        try {
            await fetch(this.location, { method: "DELETE", headers: this.headers });
        }
        catch {
            // the gateway is gone: the call ends with the peer connection anyway
        }
        finally {
            this.pc.close();
        }
    }
    /** Leaves a call whose connection is gone (its data channel closed without the session's
     * goodbye, or ICE failed): the peer connection is closed, but no `DELETE`, which would end
     * the session: the gateway parks it, to be resumed on a new call. */
    drop() {
        if (this.ended)
            return;
        this.ended = true;
        this.pc.close();
    }
    /** Whether `close` or `drop` was called. */
    get closed() {
        return this.ended;
    }
}
/** A call's data channel dressed as a WebSocket for `Session`. A channel that closes after
 * the session's `bidi_connection_close` closes as 1000 with its reason, and the call is
 * ended; otherwise as a dropped connection (1006), which a `Session` may resume over a new
 * call (the call is dropped, not ended). `close()` ends the call. */
class ChannelSocket {
    call;
    binaryType = "arraybuffer";
    onopen = null;
    onmessage = null;
    onclose = null;
    onerror = null;
    done = false;
    goodbye;
    constructor(call) {
        this.call = call;
        const { channel, pc } = call;
        channel.onmessage = (event) => {
            if (typeof event.data === "string" && event.data.includes("bidi_connection_close")) {
                try {
                    const message = JSON.parse(event.data);
                    if (message.type === "bidi_connection_close")
                        this.goodbye = message.reason ?? "";
                }
                catch {
                    // not JSON: the session reads it
                }
            }
            this.onmessage?.({ data: event.data });
        };
        channel.onclose = () => this.closed(this.goodbye === undefined ? 1006 : 1000, this.goodbye ?? "the WebRTC call dropped");
        pc.addEventListener("connectionstatechange", () => {
            if (pc.connectionState === "failed")
                this.closed(1006, "the WebRTC connection failed");
        });
        // Already open (`WebRtcCall.open` waits for it): told once the session set its handler.
        if (channel.readyState === "open")
            setTimeout(() => !this.done && this.onopen?.({}), 0);
        else
            channel.onopen = () => this.onopen?.({});
    }
    get readyState() {
        if (this.done)
            return 3;
        return { connecting: 0, open: 1, closing: 2, closed: 3 }[this.call.channel.readyState];
    }
    send(data) {
        const channel = this.call.channel;
        channel.send(data);
    }
    close(code = 1000, reason = "") {
        this.closed(code, reason);
    }
    closed(code, reason) {
        if (this.done)
            return;
        this.done = true;
        // A dropped call is left, not ended: the gateway parks its session for a resume.
        if (code === 1006)
            this.call.drop();
        else
            void this.call.close();
        this.onclose?.({ code, reason });
    }
}
/**
 * A `Session`'s socket factory (`SessionOptions.webSocket`) that opens a WebRTC call and runs
 * the session on its data channel, or, when WebRTC cannot connect (`WebRtcUnavailable`),
 * the page's WebSocket to the session's `url` (the credential in `access_token`). Each
 * connection tries WebRTC again, a resume too.
 */
export function webRtcFirst(options) {
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
        }
        catch (error) {
            if (!(error instanceof WebRtcUnavailable))
                throw error;
            options.onTransport?.({ transport: "websocket", fallback: error.message });
            const target = new URL(url);
            const credential = options.credentials?.token ?? options.credentials?.apiKey;
            if (credential)
                target.searchParams.set("access_token", credential);
            return new WebSocket(target.toString());
        }
    };
}
/** The path of `url`, for messages. */
function pathOf(url) {
    try {
        return new URL(url, globalThis.location?.href).pathname;
    }
    catch {
        return url;
    }
}
/** ": <the gateway's message>" from a JSON refusal `{code, message}`, else "". */
function refusalOf(body) {
    try {
        const refusal = JSON.parse(body);
        return typeof refusal.message === "string" ? `: ${refusal.message}` : "";
    }
    catch {
        return body ? `: ${body.slice(0, 200)}` : "";
    }
}
/** The microphone, sent on a call's audio track (the browser's Opus encoder, with its echo
 * cancellation, noise suppression and auto gain as asked); the same options as `Microphone`. */
export class CallMicrophone {
    call;
    stream;
    meter;
    constructor(call, stream, meter) {
        this.call = call;
        this.stream = stream;
        this.meter = meter;
    }
    /** Opens the microphone (the page must be allowed to) and sends it on `call`. */
    static async start(call, options = {}) {
        const stream = await navigator.mediaDevices.getUserMedia({
            audio: { channelCount: 1, ...processingConstraints(options.processing) },
        });
        const track = stream.getAudioTracks()[0];
        if (!track)
            throw new Error("the microphone gave no audio track");
        const meter = options.level ? new LevelMeter(stream, options.level) : undefined;
        const microphone = new CallMicrophone(call, stream, meter);
        microphone.paused = options.paused ?? false;
        await call.setMicrophone(track);
        return microphone;
    }
    /** While true the microphone is measured (its `level` reported) but the track sends
     * silence: push-to-talk between presses. */
    get paused() {
        return !(this.stream.getAudioTracks()[0]?.enabled ?? false);
    }
    set paused(paused) {
        for (const track of this.stream.getAudioTracks())
            track.enabled = !paused;
    }
    /** What the browser applied to the microphone's track (its processing, rate, device). */
    get settings() {
        return this.stream.getAudioTracks()[0]?.getSettings?.() ?? null;
    }
    /** Stops sending and releases the microphone (the call goes on). */
    stop() {
        this.meter?.stop();
        if (!this.call.closed)
            void this.call.setMicrophone(null).catch(() => { });
        for (const track of this.stream.getTracks())
            track.stop();
    }
}
/** Peak levels (0..1) of a stream's audio, every `everyMs`: a Web Audio analyser. */
export class LevelMeter {
    context;
    timer;
    constructor(stream, level, everyMs = 20) {
        this.context = new AudioContext();
        const analyser = this.context.createAnalyser();
        analyser.fftSize = 1024;
        this.context.createMediaStreamSource(stream).connect(analyser);
        const samples = new Float32Array(analyser.fftSize);
        this.timer = setInterval(() => {
            analyser.getFloatTimeDomainData(samples);
            let peak = 0;
            for (const s of samples)
                peak = Math.max(peak, Math.abs(s));
            level(peak);
        }, everyMs);
    }
    stop() {
        clearInterval(this.timer);
        void this.context.close().catch(() => { });
    }
}
