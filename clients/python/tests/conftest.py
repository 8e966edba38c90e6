"""A real `switchboard local` of examples/banking (the Bedrock simulator behind it) for the
tests, a TCP relay whose connections a test can cut, and sessions whose messages are
written to `$SWITCHBOARD_PROTOCOL_LOG` (one JSON a line) for the Rust side to check against
the published schema."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import secrets
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard_client import Session

ROOT = Path(__file__).resolve().parents[3]

LINES = {
    "balance": "I'd like to check my balance",
    "details": "My name is Ada Lovelace, account 12345678, sort code 12-34-56",
    "my_balance": "My balance please",
    "unknown_payment": "I don't recognise a payment on my account",
    "dispute": "I want to dispute a payment",
    "dispute_tx": "dispute payment tx-1003",
}


def _local(extra: list[str]) -> Iterator[str]:
    """`$SWITCHBOARD_BIN local examples/banking` (and `extra` arguments) on a free port: its
    host:port."""
    binary = os.environ.get("SWITCHBOARD_BIN")
    if not binary:
        pytest.fail("SWITCHBOARD_BIN is not set: run ./run-tests.sh, or set it to a built switchboard binary")
    env = {**os.environ, "SWITCHBOARD_LOG": "warn", "NO_PROXY": "127.0.0.1,localhost"}
    args = [binary, "local", str(ROOT / "examples/banking"), "--port", "0", "--record-database-url", "off"]
    args += ["--sip-listen", "off", *extra]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    stderr: list[str] = []
    threading.Thread(target=lambda: stderr.extend(process.stderr or []), daemon=True).start()
    address = None
    assert process.stdout is not None
    for line in process.stdout:
        if found := re.search(r"Web page: http://([^/\s]+)/", line):
            address = found.group(1)
            break
    if address is None:
        process.kill()
        pytest.fail(f"switchboard local did not start: {''.join(stderr)}")
    threading.Thread(target=lambda: [None for _ in process.stdout or []], daemon=True).start()
    yield address
    process.kill()  # its graceful drain (5 s) is not under test here
    process.wait(timeout=30)


@pytest.fixture(scope="session")
def local() -> Iterator[str]:
    """`$SWITCHBOARD_BIN local examples/banking` on a free port: its host:port."""
    yield from _local([])


@pytest.fixture(scope="session")
def local_one_slot() -> Iterator[str]:
    """Local mode whose model quota allows one live session (the Example Bank's Agents run in
    `default/us-east-1`): its host:port."""
    yield from _local(["--capacity-quota", "default/us-east-1=1", "--capacity-poll-ms", "50"])


@pytest.fixture(scope="session")
def gateway() -> Iterator[tuple[str, str]]:
    """`$SWITCHBOARD_BIN gateway` with an API keys file of one key and an empty routing table
    (a gateway without Kubernetes): it authenticates every client, then refuses every agent
    as unknown. Its host:port and the key."""
    binary = os.environ["SWITCHBOARD_BIN"]
    with tempfile.TemporaryDirectory(prefix="switchboard-client-gateway-") as scratch:
        folder = Path(scratch)
        key = f"key-{secrets.token_hex(12)}"
        subprocess.run(
            ["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(folder / "gateway.pem")], check=True
        )
        (folder / "keys").write_text(f"clients {hashlib.sha256(key.encode()).hexdigest()}\n")
        routes = {"apiVersion": "switchboard.dev/v1alpha1", "kind": "RoutingTable", "routes": []}
        (folder / "routes.json").write_text(json.dumps(routes))
        args = [binary, "gateway", "--listen", "127.0.0.1:0", "--gateway-key-file", str(folder / "gateway.pem")]
        args += ["--routes-file", str(folder / "routes.json"), "--api-keys-file", str(folder / "keys")]
        env = {**os.environ, "SWITCHBOARD_LOG": "info", "NO_PROXY": "127.0.0.1,localhost"}
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        address = None
        assert process.stderr is not None
        seen = []
        for line in process.stderr:
            seen.append(line)
            if found := re.search(r"gateway serving /v1/session addr=(\S+)", line):
                address = found.group(1)
                break
        if address is None:
            process.kill()
            pytest.fail(f"switchboard gateway did not start: {''.join(seen)}")
        threading.Thread(target=lambda: [None for _ in process.stderr or []], daemon=True).start()
        yield address, key
        process.terminate()
        process.wait(timeout=30)


def url(address: str) -> str:
    return f"ws://{address}/v1/session"


async def connect(address: str, **options: Any) -> Session:
    """A session whose every server message is logged when `$SWITCHBOARD_PROTOCOL_LOG` is set."""
    session = await Session.connect(url(address), **options)
    log = os.environ.get("SWITCHBOARD_PROTOCOL_LOG")
    if log:

        def write(message: Any) -> None:
            with open(log, "a") as out:
                out.write(json.dumps(message) + "\n")

        session.on("message", write)
    return session


class Relay:
    """A TCP relay to `address` on a port of its own; `cut()` destroys every connection at
    once (no close frame: a dropped network)."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.target = (host, int(port))
        self.writers: set[asyncio.StreamWriter] = set()
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.cut()
        if self.server:
            self.server.close()
