// A session with a Switchboard gateway (or local mode): connect with credentials, send and
// receive the protocol's typed messages, audio in binary frames, and resume after a
// dropped connection with the newest resume token and the number of the last message read.
import {
  DEFAULT_INPUT,
  DEFAULT_OUTPUT,
  type ResolvedFormat,
  bytesPerSecond,
  fromBase64,
  resolveFormat,
} from "./audio.js";
import type {
  BidiConnectionStartMessage,
  BidiErrorMessage,
  ClientMessage,
  ServerMessage,
  SessionStart,
  SessionUpdate,
} from "./protocol.js";

/**
 * Runs a client tool (`client_tool_call`): resolves to the tool's result (any JSON but
 * `null`), or throws to answer with an error (its message reaches the model).
 */
export type ClientToolHandler = (input: unknown, call: ServerMessageOf<"client_tool_call">) => unknown;

/** The server message of `type` K. */
export type ServerMessageOf<K extends ServerMessage["type"]> = Extract<ServerMessage, { type: K }>;

/** How a client proves who it is to a gateway that asks (`--api-keys-file`, `--jwks-file`). */
export interface Credentials {
  /** An API key of the gateway's keys file. */
  apiKey?: string;
  /** A JWT signed by a key of the gateway's JWKS. */
  token?: string;
}

/** What `session_start` may carry from a client (the gateway's signed fields are not). */
export type StartSettings = Omit<
  SessionStart,
  "resume_token" | "last_seq" | "memory" | "history" | "handoff" | "context"
>;

/** The minimum of a WebSocket this client uses: the browser's, or the `ws` package's. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  send(data: string | ArrayBufferView | ArrayBuffer): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/** Opens a WebSocket to `url` with `headers` (a browser cannot send headers: see `connect`). */
export type WebSocketFactory = (url: string, headers: Record<string, string>) => WebSocketLike | Promise<WebSocketLike>;

export interface SessionOptions {
  /** The session endpoint, e.g. `ws://127.0.0.1:8080/v1/session` or `wss://gateway.example/v1/session`. */
  url: string;
  /** The credential, when the gateway asks for one. */
  credentials?: Credentials;
  /** `session_start`'s settings: agent, modalities, voice, model, audio formats, ... */
  start?: StartSettings;
  /**
   * Opens the socket. Default: in a browser the page's `WebSocket`, with the credential in
   * the `access_token` query parameter (a browser cannot set headers on a WebSocket, and the
   * gateway takes an API key from the URL only from a page, which sends an Origin); elsewhere
   * the `ws` package, with the credential as `Authorization: Bearer`.
   */
  webSocket?: WebSocketFactory;
  /**
   * Pauses (ms) between attempts to resume a dropped connection; `[]` never resumes.
   * Default about 30 s in all, the gateway's resume window.
   */
  resumePausesMs?: number[];
  /** How long to wait for the socket to open and the session to start (ms). Default 15 s.
   * A session the gateway queues (`bidi_session_queued`: the model quota is full) waits
   * for its turn beyond it, as long as the gateway keeps its place; `close()` leaves. */
  startTimeoutMs?: number;
  /**
   * Resumes this earlier session instead of starting one: `session_start` carries its
   * `resume_token` and `last_seq` (a session's `resumeToken` and `lastSeq` when it ended),
   * and the messages missed since arrive before its `resumed`. For a page that resumes when
   * its user asks (a Reconnect button, with `resumePausesMs: []`) rather than by itself.
   * `start` is not sent: the session keeps its agent and settings.
   */
  resumeFrom?: ResumeFrom;
}

/** Where a session left off: enough to resume it (`SessionOptions.resumeFrom`). */
export interface ResumeFrom {
  /** The newest resume token the session had (`Session.resumeToken`). */
  resumeToken: string;
  /** The number of the last message it read (`Session.lastSeq`). */
  lastSeq?: number;
}

/** A chunk of reply audio, from a binary frame or a `bidi_audio_stream`. */
export interface AudioChunk {
  /** The samples, in `format`. */
  data: Uint8Array;
  format: ResolvedFormat;
}

/** How the session's connection ended. */
export interface Closed {
  code: number;
  reason: string;
  /** The `bidi_error` that came with the close, if any (a refusal, an error that ends the session). */
  error?: BidiErrorMessage;
}

/** What a session emits: every server message by its `type`, and these. */
export type SessionEvents = { [K in ServerMessage["type"]]: ServerMessageOf<K> } & {
  /** Every server message, in order. */
  message: ServerMessage;
  /** Reply audio, decoded from base64 or straight from binary frames. */
  audio: AudioChunk;
  /** The connection dropped and the session is being resumed. */
  reconnecting: { attempt: number; code: number };
  /** The session is back on a new connection (its `bidi_connection_start` follows the replayed messages). */
  resumed: BidiConnectionStartMessage;
  /** The session is over: closed by either side, refused, or not resumed in time. */
  closed: Closed;
};

/** A session could not start: the server refused it (`code`, with its `bidi_error`) or could not be reached. */
export class SessionRefused extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly error?: BidiErrorMessage,
    /** The close frame's reason ("" when none came). */
    readonly reason = "",
  ) {
    super(message);
    this.name = "SessionRefused";
  }
}

/** The pauses of `switchboard chat` between attempts to resume: about 30 s in all. */
export const DEFAULT_RESUME_PAUSES_MS = [200, 500, 1000, 2000, 4000, 8000, 15000];

/** Close codes after which a session may be resumed: none sent (the connection dropped),
 * the server going away (1001) or asking to try again (1013). Any other ends it. */
const RESUMABLE = new Set([1005, 1006, 1001, 1013]);

type Handler<T> = (value: T) => void;

/**
 * One session. `Session.connect` opens it (or `Session.create`, `on`, then `start`, to hear
 * every message from the first); `on` subscribes to its messages; the send methods write
 * client messages. A connection that drops is resumed by itself (`reconnecting`, then
 * `resumed`): the messages missed arrive first, and what is sent meanwhile is sent once the
 * session is back.
 */
export class Session {
  /** The session's id (`bidi_connection_start.session_id`). */
  sessionId = "";
  /** The agent serving the session now (it changes with handoffs). */
  agent = "";
  /** `voice`, `text` or `hybrid`. */
  mode = "";
  /** The newest resume token (through a gateway). */
  resumeToken: string | undefined;
  /** The number of the last message received (through a gateway). */
  lastSeq: number | undefined;
  /** The caller's audio format, as negotiated. */
  readonly inputFormat: ResolvedFormat;
  /** The reply audio's format, as negotiated. */
  readonly outputFormat: ResolvedFormat;

  private socket: WebSocketLike | undefined;
  private readonly handlers = new Map<string, Set<Handler<never>>>();
  private readonly clientTools = new Map<string, ClientToolHandler>();
  private readonly queued: (string | Uint8Array)[] = [];
  private started = false;
  private ending = false;
  private over: Closed | undefined;
  private lastError: BidiErrorMessage | undefined;
  private resuming = false;
  private opening = false;
  private readonly closedWaiters: Handler<Closed>[] = [];

  private constructor(private readonly options: SessionOptions) {
    this.inputFormat = resolveFormat(options.start?.audio?.input, DEFAULT_INPUT);
    this.outputFormat = resolveFormat(options.start?.audio?.output, DEFAULT_OUTPUT);
  }

  /**
   * Opens a session: connects, sends `session_start` (or resumes `resumeFrom`) and waits for
   * `bidi_connection_start`. Rejects with `SessionRefused` when it does not start.
   */
  static async connect(options: SessionOptions): Promise<Session> {
    const session = Session.create(options);
    await session.start();
    return session;
  }

  /**
   * A session not yet open: subscribe with `on`, then `start()` it. Nothing is missed that
   * way: the messages before and with `bidi_connection_start` (a resumed session's missed
   * ones too) reach the handlers.
   */
  static create(options: SessionOptions): Session {
    return new Session(options);
  }

  /**
   * Opens a session made with `create`: as `connect`, but a session that does not start also
   * emits `closed` (with the close's code and reason, and its `bidi_error`) before this
   * rejects. Once only.
   */
  async start(): Promise<void> {
    if (this.opening || this.over) throw new Error("the session was started already");
    this.opening = true;
    const from = this.options.resumeFrom;
    let start: ClientMessage = { type: "session_start", ...(this.options.start ?? {}) };
    if (from) {
      this.resumeToken = from.resumeToken;
      this.lastSeq = from.lastSeq;
      this.resuming = true;
      start = { type: "session_start", resume_token: from.resumeToken, ...(from.lastSeq === undefined ? {} : { last_seq: from.lastSeq }) };
    }
    try {
      await this.open(start);
    } catch (error) {
      const refused = error instanceof SessionRefused ? error : undefined;
      this.finish({ code: refused?.code ?? 0, reason: refused?.reason ?? String(error), ...(refused?.error ? { error: refused.error } : {}) });
      throw error;
    }
  }

  /** Whether messages go out now: the connection is open and the session started on it
   * (false while connecting, resuming, and once over; what is sent meanwhile is queued). */
  get connected(): boolean {
    return !this.over && !this.resuming && this.started && this.socket?.readyState === 1;
  }

  /** Calls `handler` with each `event`; returns what unsubscribes it. */
  on<E extends keyof SessionEvents>(event: E, handler: Handler<SessionEvents[E]>): () => void {
    let set = this.handlers.get(event);
    if (!set) this.handlers.set(event, (set = new Set()));
    set.add(handler as Handler<never>);
    return () => set.delete(handler as Handler<never>);
  }

  /**
   * The next `event` (after this call) for which `predicate` holds. Rejects after
   * `timeoutMs`, or when the session ends first.
   */
  next<E extends keyof SessionEvents>(
    event: E,
    predicate: (value: SessionEvents[E]) => boolean = () => true,
    timeoutMs = 30000,
  ): Promise<SessionEvents[E]> {
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
        if (!predicate(value)) return;
        done();
        resolve(value);
      });
      const offClosed =
        event === "closed"
          ? () => {}
          : this.on("closed", (closed) => {
              done();
              reject(new Error(`the session ended (${closed.code} ${closed.reason}) before ${String(event)}`));
            });
    });
  }

  /** Resolves when the session is over. */
  closed(): Promise<Closed> {
    if (this.over) return Promise.resolve(this.over);
    return new Promise((resolve) => this.closedWaiters.push(resolve));
  }

  /** Sends a client message (queued while the session is being resumed). */
  send(message: ClientMessage): void {
    this.write(JSON.stringify(message));
  }

  /**
   * Sends a text frame as it is, for what the types do not allow: testing a server, or a
   * message newer than these types. The server answers a bad one with a `bidi_error`.
   */
  sendRaw(text: string): void {
    this.write(text);
  }

  /** Sends a typed line; returns its id (`input_id` on the line that takes it up). */
  sendText(text: string, id: string = `c-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`): string {
    this.send({ type: "bidi_text_input", text, id });
    return id;
  }

  /**
   * Sends the caller's audio, raw in the negotiated input format (PCM16 16 kHz mono by
   * default), as binary frames of at most one second each (the server's limit).
   */
  sendAudio(audio: Uint8Array): void {
    const max = bytesPerSecond(this.inputFormat);
    for (let at = 0; at < audio.byteLength; at += max) this.write(audio.slice(at, at + max));
  }

  /** Push-to-talk released: the caller's turn ends now. */
  endAudioInput(): void {
    this.send({ type: "bidi_audio_input_end" });
  }

  /** After a `bidi_interruption`: how much of the interrupted reply's audio was played (ms). */
  audioPlayed(ms: number): void {
    this.send({ type: "bidi_audio_played", audio_played_ms: Math.max(0, Math.round(ms)) });
  }

  /** Answers a `consent_request`. */
  consent(toolUseId: string, approved: boolean): void {
    this.send({ type: "tool_consent", tool_use_id: toolUseId, approved });
  }

  /**
   * Runs client tool `name` with `handler` whenever the agent calls it (`client_tool_call`),
   * answering with its result or its error; returns what removes it. A call of a tool with
   * no handler here, when nothing listens to `client_tool_call` either, is answered with an
   * error at once (rather than left to time out).
   */
  handleTool(name: string, handler: ClientToolHandler): () => void {
    this.clientTools.set(name, handler);
    return () => {
      if (this.clientTools.get(name) === handler) this.clientTools.delete(name);
    };
  }

  /** Answers a `client_tool_call` with the tool's result (any JSON but `null`). */
  toolResult(toolUseId: string, result: unknown): void {
    this.send({ type: "client_tool_result", tool_use_id: toolUseId, result: result as never });
  }

  /** Answers a `client_tool_call` with why the tool could not run (the model is told). */
  toolFailed(toolUseId: string, error: string): void {
    this.send({ type: "client_tool_result", tool_use_id: toolUseId, error: error.slice(0, 1000) });
  }

  /** Stops the current reply, its tool calls and consent waits. */
  cancel(): void {
    this.send({ type: "bidi_cancel" });
  }

  /** Changes `voice` and/or `modalities` mid-session (`bidi_session_updated` confirms). */
  update(settings: Pick<SessionUpdate, "voice" | "modalities">): void {
    this.send({ type: "session_update", ...settings });
  }

  /** Ends the session (it cannot be resumed) and waits for the socket to close. */
  async close(): Promise<Closed> {
    if (!this.over) {
      this.ending = true;
      if (this.connected) this.send({ type: "close" });
      else {
        // Still connecting (or resuming): the socket is dropped, the session is over now.
        const socket = this.socket;
        this.finish({ code: 1000, reason: "closed by the client" });
        try {
          socket?.close(1000, "closed by the client");
        } catch {
          // a socket that had not opened yet
        }
      }
    }
    return this.closed();
  }

  private write(frame: string | Uint8Array): void {
    if (this.over) throw new Error("the session is over");
    if (this.socket?.readyState === 1 && !this.resuming) this.socket.send(frame);
    else this.queued.push(frame);
  }

  private emit<E extends keyof SessionEvents>(event: E, value: SessionEvents[E]): void {
    for (const handler of [...(this.handlers.get(event) ?? [])]) (handler as Handler<SessionEvents[E]>)(value);
  }

  private async socketFor(): Promise<WebSocketLike> {
    const { url, credentials, webSocket } = this.options;
    const credential = credentials?.token ?? credentials?.apiKey;
    if (webSocket) return webSocket(url, credential ? { authorization: `Bearer ${credential}` } : {});
    const browser = typeof (globalThis as { document?: unknown }).document !== "undefined";
    if (browser) {
      const target = new URL(url);
      if (credential) target.searchParams.set("access_token", credential);
      return new WebSocket(target.toString()) as unknown as WebSocketLike;
    }
    const { default: WS } = await import("ws");
    const headers: Record<string, string> = credential ? { authorization: `Bearer ${credential}` } : {};
    return new WS(url, { headers }) as unknown as WebSocketLike;
  }

  /** Connects and sends `start`; resolves on the session's `bidi_connection_start`. */
  private async open(start: ClientMessage): Promise<void> {
    const socket = await this.socketFor();
    socket.binaryType = "arraybuffer";
    this.socket = socket;
    const timeoutMs = this.options.startTimeoutMs ?? 15000;
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      let opened = false;
      const settle = (error?: Error) => {
        if (settled) return;
        settled = true;
        opened = !error;
        clearTimeout(timer);
        if (error) reject(error);
        else resolve();
      };
      const timer = setTimeout(() => {
        settle(new SessionRefused(`the session did not start within ${timeoutMs} ms`, 0));
        socket.onmessage = null;
        socket.close();
      }, timeoutMs);
      socket.onopen = () => socket.send(JSON.stringify(start));
      socket.onerror = () => {};
      socket.onmessage = (event) => {
        const message = this.receive(event.data);
        if (message?.type === "bidi_connection_start") settle();
        // Waiting in the gateway's queue for a slot of the model quota: the start timeout
        // stops (the gateway keeps the place while the connection lives and says each new
        // position); `close()` leaves the queue.
        else if (message?.type === "bidi_session_queued") clearTimeout(timer);
      };
      socket.onclose = (event) => {
        if (!settled) {
          const why = this.lastError?.message ?? (event.reason || "the connection closed");
          settle(new SessionRefused(`the session was refused (${event.code}): ${why}`, event.code, this.lastError, event.reason));
          return;
        }
        // A connection whose start failed (timed out) was reported by `open` already.
        if (opened) this.dropped(socket, event.code, event.reason);
      };
    });
  }

  /** A `client_tool_call`: its handler answers; without one (and no listener), an error does. */
  private runClientTool(call: ServerMessageOf<"client_tool_call">): void {
    const handler = this.clientTools.get(call.name);
    if (!handler) {
      if (!this.handlers.get("client_tool_call")?.size) {
        this.toolFailed(call.tool_use_id, `this client has no handler for the tool ${call.name}`);
      }
      return;
    }
    Promise.resolve()
      .then(() => handler(call.input, call))
      .then(
        (result) =>
          result === undefined || result === null
            ? this.toolFailed(call.tool_use_id, `the handler of ${call.name} returned no result`)
            : this.toolResult(call.tool_use_id, result),
        (error: unknown) =>
          this.toolFailed(call.tool_use_id, error instanceof Error ? error.message : String(error)),
      );
  }

  /** Reads one frame: counts it, decodes it, emits it. */
  private receive(data: unknown): ServerMessage | undefined {
    if (this.lastSeq !== undefined) this.lastSeq += 1;
    if (typeof data !== "string") {
      const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data as ArrayBufferLike);
      this.emit("audio", { data: bytes, format: this.outputFormat });
      return undefined;
    }
    let message: ServerMessage;
    try {
      message = JSON.parse(data) as ServerMessage;
    } catch {
      return undefined;
    }
    // A message that says its number (over WebRTC's data channel every one does: reply
    // audio, numbered too, is on the audio track, where it cannot be counted) is that number.
    const seq = (message as { seq?: unknown }).seq;
    if (typeof seq === "number") this.lastSeq = seq;
    switch (message.type) {
      case "bidi_connection_start":
        this.sessionId = message.session_id;
        this.agent = message.agent;
        this.mode = message.mode;
        if (message.resume_token) this.resumeToken = message.resume_token;
        if (typeof message.seq === "number") this.lastSeq = message.seq;
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
    this.emit(message.type, message as never);
    this.emit("message", message);
    return message;
  }

  private flush(): void {
    while (this.queued.length && this.socket?.readyState === 1 && !this.resuming) {
      this.socket.send(this.queued.shift() as string | Uint8Array);
    }
  }

  /** The socket closed after the session started: resumes it, or ends it. */
  private dropped(socket: WebSocketLike, code: number, reason: string): void {
    if (socket !== this.socket || this.over) return;
    const pauses = this.options.resumePausesMs ?? DEFAULT_RESUME_PAUSES_MS;
    if (this.ending || !RESUMABLE.has(code) || !this.resumeToken || !this.started || pauses.length === 0) {
      this.finish({ code, reason, ...(this.lastError && code !== 1000 ? { error: this.lastError } : {}) });
      return;
    }
    this.resuming = true;
    void this.resume(pauses, code);
  }

  private async resume(pauses: number[], code: number): Promise<void> {
    let failure: unknown;
    for (const [attempt, pause] of pauses.entries()) {
      await new Promise((resolve) => setTimeout(resolve, pause));
      if (this.ending) break;
      this.emit("reconnecting", { attempt: attempt + 1, code });
      try {
        await this.open({ type: "session_start", resume_token: this.resumeToken, last_seq: this.lastSeq });
        return;
      } catch (error) {
        failure = error;
        // A refusal that says the token is no good (4410) will not change by trying again.
        if (error instanceof SessionRefused && !RESUMABLE.has(error.code) && error.code !== 0) break;
      }
    }
    const refused = failure instanceof SessionRefused ? failure : undefined;
    this.finish({
      code: refused?.code ?? code,
      reason: `the session could not be resumed: ${failure instanceof Error ? failure.message : "no attempt made"}`,
      ...(refused?.error ? { error: refused.error } : {}),
    });
  }

  private finish(closed: Closed): void {
    if (this.over) return;
    this.over = closed;
    this.resuming = false;
    this.emit("closed", closed);
    for (const waiter of this.closedWaiters.splice(0)) waiter(closed);
  }
}
