// A real `switchboard local` of examples/banking (the Bedrock simulator behind it) for the
// tests, and a TCP relay between a client and it whose connections a test can cut.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createHash, generateKeyPairSync, randomBytes } from "node:crypto";
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import WebSocket from "ws";

import { Session, type SessionOptions, type WebSocketLike } from "../dist/index.js";

const root = fileURLToPath(new URL("../../..", import.meta.url));

export interface Local {
  /** ws://127.0.0.1:PORT/v1/session */
  url: string;
  /** host:port */
  address: string;
  stop(): Promise<void>;
}

/** Starts `$SWITCHBOARD_BIN local examples/banking` (and `extra` arguments) on a free port;
 * resolves once it serves. */
export async function startLocal(extra: string[] = []): Promise<Local> {
  const bin = process.env.SWITCHBOARD_BIN;
  if (!bin) throw new Error("SWITCHBOARD_BIN is not set: run ./run-tests.sh, or set it to a built switchboard binary");
  const child: ChildProcess = spawn(
    bin,
    ["local", `${root}examples/banking`, "--port", "0", "--record-database-url", "off", "--sip-listen", "off", ...extra],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, SWITCHBOARD_LOG: "warn", NO_PROXY: "127.0.0.1,localhost" } },
  );
  let stderr = "";
  child.stderr?.on("data", (chunk) => (stderr += chunk));
  const address = await new Promise<string>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`switchboard local did not start in 60 s: ${stderr}`)), 60000);
    child.stdout?.on("data", (chunk) => {
      out += chunk;
      const found = /Web page: http:\/\/([^/\s]+)\//.exec(out);
      if (found?.[1]) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`switchboard local exited (${code}): ${stderr}`));
    });
  });
  return {
    url: `ws://${address}/v1/session`,
    address,
    async stop() {
      // SIGKILL: its graceful drain (5 s) is not under test here.
      if (child.exitCode === null) {
        child.kill("SIGKILL");
        await once(child, "exit");
      }
    },
  };
}

export interface Relay {
  url: string;
  /** Destroys every connection through the relay at once (no close frame: a dropped network). */
  cut(): void;
  /** Connections made through it so far. */
  connections: number;
  close(): void;
}

/** A TCP relay to `address` (host:port) on a port of its own. */
export async function relay(address: string): Promise<Relay> {
  const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
  const sockets = new Set<net.Socket>();
  const state = { connections: 0 };
  const server = net.createServer((client) => {
    state.connections += 1;
    const upstream = net.connect(port, host);
    for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
      sockets.add(a);
      a.pipe(b);
      a.on("error", () => b.destroy());
      a.on("close", () => {
        sockets.delete(a);
        b.destroy();
      });
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port: own } = server.address() as net.AddressInfo;
  const cut = () => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    url: `ws://127.0.0.1:${own}/v1/session`,
    cut,
    get connections() {
      return state.connections;
    },
    close() {
      cut();
      server.close();
    },
  };
}

/** The Example Bank's lines, as the simulator's script expects them. */
export const LINES = {
  balance: "I'd like to check my balance",
  details: "My name is Ada Lovelace, account 12345678, sort code 12-34-56",
  myBalance: "My balance please",
  unknownPayment: "I don't recognise a payment on my account",
  dispute: "I want to dispute a payment",
  disputeTx: "dispute payment tx-1003",
};

/**
 * Opens a session through the `webSocket` option with the `ws` package, writing every text
 * frame the server sends, as it came, to the file `$SWITCHBOARD_PROTOCOL_LOG` (one a line)
 * when set: the Rust side checks each against the published schema.
 */
export async function connect(options: Omit<SessionOptions, "webSocket">): Promise<Session> {
  const session = create(options);
  await session.start();
  return session;
}

/** As `connect`, a session not yet started (`Session.create`): subscribe, then `start()`. */
export function create(options: Omit<SessionOptions, "webSocket">): Session {
  const log = process.env.SWITCHBOARD_PROTOCOL_LOG;
  return Session.create({
    ...options,
    webSocket: (url, headers) => {
      const socket = new WebSocket(url, { headers });
      if (log) {
        socket.on("message", (data, binary) => {
          if (!binary) appendFileSync(log, `${data.toString()}\n`);
        });
      }
      return socket as unknown as WebSocketLike;
    },
  });
}

export interface Gateway {
  url: string;
  /** The API key its keys file holds. */
  apiKey: string;
  stop(): Promise<void>;
}

/**
 * `$SWITCHBOARD_BIN gateway` with an API keys file of one key and an empty routing table (a
 * gateway without Kubernetes): it authenticates every client, then refuses every agent as
 * unknown — enough to prove how a client presents its credential.
 */
export async function startGateway(): Promise<Gateway> {
  const bin = process.env.SWITCHBOARD_BIN;
  if (!bin) throw new Error("SWITCHBOARD_BIN is not set");
  const dir = mkdtempSync(join(tmpdir(), "switchboard-client-gateway-"));
  const apiKey = `key-${randomBytes(12).toString("hex")}`;
  const { privateKey } = generateKeyPairSync("ed25519");
  writeFileSync(join(dir, "gateway.pem"), privateKey.export({ type: "pkcs8", format: "pem" }));
  writeFileSync(join(dir, "keys"), `clients ${createHash("sha256").update(apiKey).digest("hex")}\n`);
  writeFileSync(join(dir, "routes.json"), JSON.stringify({ apiVersion: "switchboard.dev/v1alpha1", kind: "RoutingTable", routes: [] }));
  const child = spawn(
    bin,
    ["gateway", "--listen", "127.0.0.1:0", "--gateway-key-file", join(dir, "gateway.pem"), "--routes-file", join(dir, "routes.json"), "--api-keys-file", join(dir, "keys")],
    { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, SWITCHBOARD_LOG: "info", NO_PROXY: "127.0.0.1,localhost" } },
  );
  const address = await new Promise<string>((resolve, reject) => {
    let err = "";
    const timer = setTimeout(() => reject(new Error(`switchboard gateway did not start in 60 s: ${err}`)), 60000);
    child.stderr?.on("data", (chunk) => {
      err += chunk;
      const found = /gateway serving \/v1\/session addr=(\S+)/.exec(err);
      if (found?.[1]) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`switchboard gateway exited (${code}): ${err}`));
    });
  });
  return {
    url: `ws://${address}/v1/session`,
    apiKey,
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await once(child, "exit");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
