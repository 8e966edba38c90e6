// Generated from clients/typescript/src/session.ts by `npm run vendor` (tsc): do not edit; the client's tests fail when it differs.
// A session with a Switchboard gateway (or local mode): connect with credentials, send and
// receive the protocol's typed messages, audio in binary frames, and resume after a
// dropped connection with the newest resume token and the number of the last message read.
import { DEFAULT_INPUT, DEFAULT_OUTPUT, bytesPerSecond, fromBase64, resolveFormat, } from "./audio.js";
/** A session could not start: the server refused it (`code`, with its `bidi_error`) or could not be reached. */
export class SessionRefused extends Error {
    code;
    error;
    reason;
    constructor(message, code, error, 
    /** The close frame's reason ("" when none came). */
    reason = "") {
        super(message);
        this.code = code;
        this.error = error;
        this.reason = reason;
        this.name = "SessionRefused";
    }
}
/** The pauses of `switchboard chat` between attempts to resume: about 30 s in all. */
export const DEFAULT_RESUME_PAUSES_MS = [200, 500, 1000, 2000, 4000, 8000, 15000];
/** Close codes after which a session may be resumed: none sent (the connection dropped),
 * the server going away (1001) or asking to try again (1013). Any other ends it. */
const RESUMABLE = new Set([1005, 1006, 1001, 1013]);
/**
 * One session. `Session.connect` opens it (or `Session.create`, `on`, then `start`, to hear
 * every message from the first); `on` subscribes to its messages; the send methods write
 * client messages. A connection that drops is resumed by itself (`reconnecting`, then
 * `resumed`): the messages missed arrive first, and what is sent meanwhile is sent once the
 * session is back.
 */
export class Session {
    options;
    /** The session's id (`bidi_connection_start.session_id`). */
    sessionId = "";
    /** The agent serving the session now (it changes with handoffs). */
    agent = "";
    /** `voice`, `text` or `hybrid`. */
    mode = "";
    /** The newest resume token (through a gateway). */
    resumeToken;
    /** The number of the last message received (through a gateway). */
    lastSeq;
    /** The caller's audio format, as negotiated. */
    inputFormat;
    /** The reply audio's format, as negotiated. */
    outputFormat;
    socket;
    handlers = new Map();
    clientTools = new Map();
    queued = [];
    started = false;
    ending = false;
    over;
    lastError;
    resuming = false;
    opening = false;
    closedWaiters = [];
    constructor(options) {
        this.options = options;
        this.inputFormat = resolveFormat(options.start?.audio?.input, DEFAULT_INPUT);
        this.outputFormat = resolveFormat(options.start?.audio?.output, DEFAULT_OUTPUT);
    }
    /**
     * Opens a session: connects, sends `session_start` (or resumes `resumeFrom`) and waits for
     * `bidi_connection_start`. Rejects with `SessionRefused` when it does not start.
     */
    static async connect(options) {
        const session = Session.create(options);
        await session.start();
        return session;
    }
    /**
     * A session not yet open: subscribe with `on`, then `start()` it. Nothing is missed that
     * way: the messages before and with `bidi_connection_start` (a resumed session's missed
     * ones too) reach the handlers.
     */
    static create(options) {
        return new Session(options);
    }
    /**
     * Opens a session made with `create`: as `connect`, but a session that does not start also
     * emits `closed` (with the close's code and reason, and its `bidi_error`) before this
     * rejects. Once only.
     */
    async start() {
        if (this.opening || this.over)
            throw new Error("the session was started already");
        this.opening = true;
        const from = this.options.resumeFrom;
        let start = { type: "session_start", ...(this.options.start ?? {}) };
        if (from) {
            this.resumeToken = from.resumeToken;
            this.lastSeq = from.lastSeq;
            this.resuming = true;
            start = { type: "session_start", resume_token: from.resumeToken, ...(from.lastSeq === undefined ? {} : { last_seq: from.lastSeq }) };
        }
        try {
            await this.open(start);
        }
        catch (error) {
            const refused = error instanceof SessionRefused ? error : undefined;
            this.finish({ code: refused?.code ?? 0, reason: refused?.reason ?? String(error), ...(refused?.error ? { error: refused.error } : {}) });
            throw error;
        }
    }
    /** Whether messages go out now: the connection is open and the session started on it
     * (false while connecting, resuming, and once over; what is sent meanwhile is queued). */
    get connected() {
        return !this.over && !this.resuming && this.started && this.socket?.readyState === 1;
    }
    /** Calls `handler` with each `event`; returns what unsubscribes it. */
    on(event, handler) {
        let set = this.handlers.get(event);
        if (!set)
            this.handlers.set(event, (set = new Set()));
        set.add(handler);
        return () => set.delete(handler);
    }
    /**
     * The next `event` (after this call) for which `predicate` holds. Rejects after
     * `timeoutMs`, or when the session ends first.
     */
    next(event, predicate = () => true, timeoutMs = 30000) {
        return new Promise((resolve, reject) => {
            const done = () => {
                clearTimeout(timer);
                off();
                offClosed();
            };
            const timer = setTimeout(() => {
                done();
                reject(new Error(`no ${String(event)} within ${timeoutMs} ms`));
            }, timeoutMs);
            const off = this.on(event, (value) => {
                if (!predicate(value))
                    return;
                done();
                resolve(value);
            });
            const offClosed = event === "closed"
                ? () => { }
                : this.on("closed", (closed) => {
                    done();
                    reject(new Error(`the session ended (${closed.code} ${closed.reason}) before ${String(event)}`));
                });
        });
    }
    /** Resolves when the session is over. */
    closed() {
        if (this.over)
            return Promise.resolve(this.over);
        return new Promise((resolve) => this.closedWaiters.push(resolve));
    }
    /** Sends a client message (queued while the session is being resumed). */
    send(message) {
        this.write(JSON.stringify(message));
    }
    /**
     * Sends a text frame as it is, for what the types do not allow: testing a server, or a
     * message newer than these types. The server answers a bad one with a `bidi_error`.
     */
    sendRaw(text) {
        this.write(text);
    }
    /** Sends a typed line; returns its id (`input_id` on the line that takes it up). */
    sendText(text, id = `c-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`) {
        this.send({ type: "bidi_text_input", text, id });
        return id;
    }
    /**
     * Sends the caller's audio, raw in the negotiated input format (PCM16 16 kHz mono by
     * default), as binary frames of at most one second each (the server's limit).
     */
    sendAudio(audio) {
        const max = bytesPerSecond(this.inputFormat);
        for (let at = 0; at < audio.byteLength; at += max)
            this.write(audio.slice(at, at + max));
    }
    /** Push-to-talk released: the caller's turn ends now. */
    endAudioInput() {
        this.send({ type: "bidi_audio_input_end" });
    }
    /** After a `bidi_interruption`: how much of the interrupted reply's audio was played (ms). */
    audioPlayed(ms) {
        this.send({ type: "bidi_audio_played", audio_played_ms: Math.max(0, Math.round(ms)) });
    }
    /** Answers a `consent_request`. */
    consent(toolUseId, approved) {
        this.send({ type: "tool_consent", tool_use_id: toolUseId, approved });
    }
    /**
     * Runs client tool `name` with `handler` whenever the agent calls it (`client_tool_call`),
     * answering with its result or its error; returns what removes it. A call of a tool with
     * no handler here, when nothing listens to `client_tool_call` either, is answered with an
     * error at once (rather than left to time out).
     */
    handleTool(name, handler) {
        this.clientTools.set(name, handler);
        return () => {
            if (this.clientTools.get(name) === handler)
                this.clientTools.delete(name);
        };
    }
    /** Answers a `client_tool_call` with the tool's result (any JSON but `null`). */
    toolResult(toolUseId, result) {
        this.send({ type: "client_tool_result", tool_use_id: toolUseId, result: result });
    }
    /** Answers a `client_tool_call` with why the tool could not run (the model is told). */
    toolFailed(toolUseId, error) {
        this.send({ type: "client_tool_result", tool_use_id: toolUseId, error: error.slice(0, 1000) });
    }
    /** Stops the current reply, its tool calls and consent waits. */
    cancel() {
        this.send({ type: "bidi_cancel" });
    }
    /** Changes `voice` and/or `modalities` mid-session (`bidi_session_updated` confirms). */
    update(settings) {
        this.send({ type: "session_update", ...settings });
    }
    /** Ends the session (it cannot be resumed) and waits for the socket to close. */
    async close() {
        if (!this.over) {
            this.ending = true;
            if (this.connected)
                this.send({ type: "close" });
            else {
                // Still connecting (or resuming): the socket is dropped, the session is over now.
                const socket = this.socket;
                this.finish({ code: 1000, reason: "closed by the client" });
                try {
                    socket?.close(1000, "closed by the client");
                }
                catch {
                    // a socket that had not opened yet
                }
            }
        }
        return this.closed();
    }
    write(frame) {
        if (this.over)
            throw new Error("the session is over");
        if (this.socket?.readyState === 1 && !this.resuming)
            this.socket.send(frame);
        else
            this.queued.push(frame);
    }
    emit(event, value) {
        for (const handler of [...(this.handlers.get(event) ?? [])])
            handler(value);
    }
    async socketFor() {
        const { url, credentials, webSocket } = this.options;
        const credential = credentials?.token ?? credentials?.apiKey;
        if (webSocket)
            return webSocket(url, credential ? { authorization: `Bearer ${credential}` } : {});
        const browser = typeof globalThis.document !== "undefined";
        if (browser) {
            const target = new URL(url);
            if (credential)
                target.searchParams.set("access_token", credential);
            return new WebSocket(target.toString());
        }
        const { default: WS } = await import("ws");
        const headers = credential ? { authorization: `Bearer ${credential}` } : {};
        return new WS(url, { headers });
    }
    /** Connects and sends `start`; resolves on the session's `bidi_connection_start`. */
    async open(start) {
        const socket = await this.socketFor();
        socket.binaryType = "arraybuffer";
        this.socket = socket;
        const timeoutMs = this.options.startTimeoutMs ?? 15000;
        await new Promise((resolve, reject) => {
            let settled = false;
            let opened = false;
            const settle = (error) => {
                if (settled)
                    return;
                settled = true;
                opened = !error;
                clearTimeout(timer);
                if (error)
                    reject(error);
                else
                    resolve();
            };
            const timer = setTimeout(() => {
                settle(new SessionRefused(`the session did not start within ${timeoutMs} ms`, 0));
                socket.onmessage = null;
                socket.close();
            }, timeoutMs);
            socket.onopen = () => socket.send(JSON.stringify(start));
            socket.onerror = () => { };
            socket.onmessage = (event) => {
                const message = this.receive(event.data);
                if (message?.type === "bidi_connection_start")
                    settle();
                // Waiting in the gateway's queue for a slot of the model quota: the start timeout
                // stops (the gateway keeps the place while the connection lives and says each new
                // position); `close()` leaves the queue.
                else if (message?.type === "bidi_session_queued")
                    clearTimeout(timer);
            };
            socket.onclose = (event) => {
                if (!settled) {
                    const why = this.lastError?.message ?? (event.reason || "the connection closed");
                    settle(new SessionRefused(`the session was refused (${event.code}): ${why}`, event.code, this.lastError, event.reason));
                    return;
                }
                // A connection whose start failed (timed out) was reported by `open` already.
                if (opened)
                    this.dropped(socket, event.code, event.reason);
            };
        });
    }
    /** A `client_tool_call`: its handler answers; without one (and no listener), an error does. */
    runClientTool(call) {
        const handler = this.clientTools.get(call.name);
        if (!handler) {
            if (!this.handlers.get("client_tool_call")?.size) {
                this.toolFailed(call.tool_use_id, `this client has no handler for the tool ${call.name}`);
            }
            return;
        }
        Promise.resolve()
            .then(() => handler(call.input, call))
            .then((result) => result === undefined || result === null
            ? this.toolFailed(call.tool_use_id, `the handler of ${call.name} returned no result`)
            : this.toolResult(call.tool_use_id, result), (error) => this.toolFailed(call.tool_use_id, error instanceof Error ? error.message : String(error)));
    }
    /** Reads one frame: counts it, decodes it, emits it. */
    receive(data) {
        if (this.lastSeq !== undefined)
            this.lastSeq += 1;
        if (typeof data !== "string") {
            const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data);
            this.emit("audio", { data: bytes, format: this.outputFormat });
            return undefined;
        }
        let message;
        try {
            message = JSON.parse(data);
        }
        catch {
            return undefined;
        }
        // A message that says its number (over WebRTC's data channel every one does: reply
        // audio, numbered too, is on the audio track, where it cannot be counted) is that number.
        const seq = message.seq;
        if (typeof seq === "number")
            this.lastSeq = seq;
        switch (message.type) {
            case "bidi_connection_start":
                this.sessionId = message.session_id;
                this.agent = message.agent;
                this.mode = message.mode;
                if (message.resume_token)
                    this.resumeToken = message.resume_token;
                if (typeof message.seq === "number")
                    this.lastSeq = message.seq;
                if (this.resuming) {
                    this.resuming = false;
                    this.emit("resumed", message);
                }
                this.started = true;
                this.flush();
                break;
            case "bidi_error":
                this.lastError = message;
                break;
            case "bidi_audio_stream": {
                const format = message.format ? resolveFormat(message.format, this.outputFormat) : this.outputFormat;
                this.emit("audio", { data: fromBase64(message.audio), format });
                break;
            }
            case "client_tool_call":
                this.runClientTool(message);
                break;
            default:
        }
        this.emit(message.type, message);
        this.emit("message", message);
        return message;
    }
    flush() {
        while (this.queued.length && this.socket?.readyState === 1 && !this.resuming) {
            this.socket.send(this.queued.shift());
        }
    }
    /** The socket closed after the session started: resumes it, or ends it. */
    dropped(socket, code, reason) {
        if (socket !== this.socket || this.over)
            return;
        const pauses = this.options.resumePausesMs ?? DEFAULT_RESUME_PAUSES_MS;
        if (this.ending || !RESUMABLE.has(code) || !this.resumeToken || !this.started || pauses.length === 0) {
            this.finish({ code, reason, ...(this.lastError && code !== 1000 ? { error: this.lastError } : {}) });
            return;
        }
        this.resuming = true;
        void this.resume(pauses, code);
    }
    async resume(pauses, code) {
        let failure;
        for (const [attempt, pause] of pauses.entries()) {
            await new Promise((resolve) => setTimeout(resolve, pause));
            if (this.ending)
                break;
            this.emit("reconnecting", { attempt: attempt + 1, code });
            try {
                await this.open({ type: "session_start", resume_token: this.resumeToken, last_seq: this.lastSeq });
                return;
            }
            catch (error) {
                failure = error;
                // A refusal that says the token is no good (4410) will not change by trying again.
                if (error instanceof SessionRefused && !RESUMABLE.has(error.code) && error.code !== 0)
                    break;
            }
        }
        const refused = failure instanceof SessionRefused ? failure : undefined;
        this.finish({
            code: refused?.code ?? code,
            reason: `the session could not be resumed: ${failure instanceof Error ? failure.message : "no attempt made"}`,
            ...(refused?.error ? { error: refused.error } : {}),
        });
    }
    finish(closed) {
        if (this.over)
            return;
        this.over = closed;
        this.resuming = false;
        this.emit("closed", closed);
        for (const waiter of this.closedWaiters.splice(0))
            waiter(closed);
    }
}
