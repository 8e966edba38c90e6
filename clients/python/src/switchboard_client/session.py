"""A session with a Switchboard gateway (or local mode), on asyncio and `websockets`:
connect with credentials, send and receive the protocol's typed messages, audio in binary
frames, and resume after a dropped connection with the newest resume token and the number
of the last message read."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from .audio import DEFAULT_INPUT, DEFAULT_OUTPUT, Format, resolve_format
from .protocol import BidiErrorMessage, BidiSessionQueuedMessage, ClientMessage, ServerMessage, SessionStart

#: Pauses (seconds) between attempts to resume a dropped connection, as `switchboard chat`
#: makes them: about 30 s in all, the gateway's resume window.
DEFAULT_RESUME_PAUSES = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0)

#: Close codes after which a session may be resumed: none received (the connection
#: dropped), the server going away (1001) or asking to try again (1013).
_RESUMABLE = {None, 1005, 1006, 1001, 1013}

#: The `session_start` fields only the gateway sets (signed); a client never sends them.
_GATEWAY_ONLY = ("resume_token", "last_seq", "memory", "history", "handoff", "context")


@dataclass(frozen=True)
class AudioChunk:
    """Reply audio, from a binary frame or a decoded `bidi_audio_stream`."""

    data: bytes
    format: Format


@dataclass(frozen=True)
class Closed:
    """How the session's connection ended."""

    code: int
    reason: str
    #: The `bidi_error` that came with the close, if any.
    error: BidiErrorMessage | None = None


@dataclass(frozen=True)
class Reconnecting:
    """The connection dropped and the session is being resumed."""

    attempt: int
    code: int | None


class SessionRefused(Exception):
    """A session could not start: the server refused it (`code`, with its `bidi_error`) or could not be reached."""

    def __init__(self, message: str, code: int, error: BidiErrorMessage | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.error = error


Handler = Callable[[Any], None]


class Session:
    """One session. `Session.connect` opens it; `on` subscribes to its events (every server
    message `type`, and `message`, `audio`, `reconnecting`, `resumed`, `closed`); `async for`
    reads its messages in order; the send methods write client messages.

    A connection that drops is resumed by itself: `reconnecting`, the messages missed, then
    `resumed`; what is sent meanwhile is sent once the session is back.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        start: SessionStart | None = None,
        resume_pauses: Sequence[float] = DEFAULT_RESUME_PAUSES,
        start_timeout: float = 15.0,
    ) -> None:
        given = [name for name in _GATEWAY_ONLY if name in (start or {})]
        if given:
            raise ValueError(f"session_start cannot carry {', '.join(given)}: only the gateway sets them")
        self.url = url
        self._credential = token or api_key
        self._start: SessionStart = start or {}
        self._resume_pauses = tuple(resume_pauses)
        self._start_timeout = start_timeout
        #: The session's id (`bidi_connection_start.session_id`).
        self.session_id = ""
        #: The agent serving the session now (it changes with handoffs).
        self.agent = ""
        #: `voice`, `text` or `hybrid`.
        self.mode = ""
        #: The newest resume token (through a gateway).
        self.resume_token: str | None = None
        #: The number of the last message received (through a gateway).
        self.last_seq: int | None = None
        audio = self._start.get("audio") or {}
        #: The caller's audio format, as negotiated.
        self.input_format = resolve_format(audio.get("input"), DEFAULT_INPUT)
        #: The reply audio's format, as negotiated.
        self.output_format = resolve_format(audio.get("output"), DEFAULT_OUTPUT)
        self._socket: ClientConnection | None = None
        self._handlers: dict[str, list[Handler]] = {}
        self._queued: list[str | bytes] = []
        self._inbox: asyncio.Queue[ServerMessage | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        # Set when the gateway queues the starting session (`bidi_session_queued`).
        self._in_queue = asyncio.Event()
        self._resuming = False
        self._ending = False
        self._last_error: BidiErrorMessage | None = None
        self._over: Closed | None = None
        self._closed = asyncio.Event()

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        start: SessionStart | None = None,
        resume_pauses: Sequence[float] = DEFAULT_RESUME_PAUSES,
        start_timeout: float = 15.0,
        on_queued: Callable[[BidiSessionQueuedMessage], None] | None = None,
    ) -> Session:
        """Opens a session: connects, sends `session_start`, waits for `bidi_connection_start`.

        `api_key` or `token` (a JWT) go as `Authorization: Bearer`, when the gateway asks for
        one. `start` holds `session_start`'s settings (agent, modalities, voice, model, audio).
        Raises `SessionRefused` with the close code and the server's `bidi_error`.

        A session the gateway queues for a slot of the model quota (`bidi_session_queued`)
        waits for its turn past `start_timeout`, as long as the gateway keeps its place;
        `on_queued` is called with each of those messages (its place, the estimate, what to
        tell the person waiting). Cancelling the call leaves the queue.
        """
        session = cls(
            url, api_key=api_key, token=token, start=start, resume_pauses=resume_pauses, start_timeout=start_timeout
        )
        if on_queued is not None:
            session.on("bidi_session_queued", on_queued)
        await session._open(cast(ClientMessage, {"type": "session_start", **session._start}))
        return session

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # Receiving

    def on(self, event: str, handler: Handler) -> Callable[[], None]:
        """Calls `handler` with each `event`; returns what unsubscribes it."""
        handlers = self._handlers.setdefault(event, [])
        handlers.append(handler)

        def off() -> None:
            if handler in handlers:
                handlers.remove(handler)

        return off

    async def next(self, event: str, predicate: Callable[[Any], bool] | None = None, timeout: float = 30.0) -> Any:
        """The next `event` (after this call) for which `predicate` holds; `TimeoutError`
        after `timeout` seconds, `ConnectionError` when the session ends first."""
        loop = asyncio.get_running_loop()
        found: asyncio.Future[Any] = loop.create_future()

        def take(value: Any) -> None:
            if not found.done() and (predicate is None or predicate(value)):
                found.set_result(value)

        def ended(closed: Closed) -> None:
            if not found.done():
                found.set_exception(ConnectionError(f"the session ended ({closed.code} {closed.reason}) before {event}"))

        off = self.on(event, take)
        off_closed = self.on("closed", ended) if event != "closed" else (lambda: None)
        try:
            return await asyncio.wait_for(found, timeout)
        except TimeoutError:
            raise TimeoutError(f"no {event} within {timeout} s") from None
        finally:
            off()
            off_closed()

    def __aiter__(self) -> AsyncIterator[ServerMessage]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[ServerMessage]:
        while (message := await self._inbox.get()) is not None:
            yield message

    async def closed(self) -> Closed:
        """Waits until the session is over."""
        await self._closed.wait()
        assert self._over is not None
        return self._over

    # Sending

    async def send(self, message: ClientMessage) -> None:
        """Sends a client message (queued while the session is being resumed)."""
        await self._write(json.dumps(message))

    async def send_raw(self, text: str) -> None:
        """Sends a text frame as it is, for what the types do not allow (testing a server, a
        newer message); the server answers a bad one with a `bidi_error`."""
        await self._write(text)

    async def send_text(self, text: str, id: str | None = None) -> str:
        """Sends a typed line; returns its id (`input_id` on the line that takes it up)."""
        id = id or f"c-{uuid.uuid4().hex[:12]}"
        await self.send({"type": "bidi_text_input", "text": text, "id": id})
        return id

    async def send_audio(self, audio: bytes) -> None:
        """Sends the caller's audio, raw in the negotiated input format (PCM16 16 kHz mono
        by default), as binary frames of at most one second each (the server's limit)."""
        step = self.input_format.bytes_per_second
        for at in range(0, len(audio), step):
            await self._write(bytes(audio[at : at + step]))

    async def end_audio_input(self) -> None:
        """Push-to-talk released: the caller's turn ends now."""
        await self.send({"type": "bidi_audio_input_end"})

    async def audio_played(self, ms: float) -> None:
        """After a `bidi_interruption`: how much of the interrupted reply was played (ms)."""
        await self.send({"type": "bidi_audio_played", "audio_played_ms": max(0, round(ms))})

    async def consent(self, tool_use_id: str, approved: bool) -> None:
        """Answers a `consent_request`."""
        await self.send({"type": "tool_consent", "tool_use_id": tool_use_id, "approved": approved})

    async def cancel(self) -> None:
        """Stops the current reply, its tool calls and consent waits."""
        await self.send({"type": "bidi_cancel"})

    async def update(self, *, voice: str | None = None, modalities: list[str] | None = None) -> None:
        """Changes the voice and/or modalities mid-session (`bidi_session_updated` confirms)."""
        message: dict[str, Any] = {"type": "session_update"}
        if voice is not None:
            message["voice"] = voice
        if modalities is not None:
            message["modalities"] = modalities
        await self.send(cast(ClientMessage, message))

    async def close(self) -> Closed:
        """Ends the session (it cannot be resumed) and waits for the socket to close."""
        if self._over is None:
            self._ending = True
            socket = self._socket
            if socket is not None and not self._resuming:
                with contextlib.suppress(ConnectionClosed):
                    await socket.send(json.dumps({"type": "close"}))
                try:
                    await asyncio.wait_for(self._closed.wait(), 10)
                except TimeoutError:
                    await socket.close()
            if self._over is None:
                self._finish(Closed(1000, "closed by the client"))
        return await self.closed()

    # The connection

    async def _write(self, frame: str | bytes) -> None:
        if self._over is not None:
            raise ConnectionError("the session is over")
        if self._socket is not None and not self._resuming:
            try:
                await self._socket.send(frame)
                return
            except ConnectionClosed:
                pass
        self._queued.append(frame)

    def _emit(self, event: str, value: Any) -> None:
        for handler in list(self._handlers.get(event, [])):
            try:
                handler(value)
            except Exception as error:  # a handler's bug must not stop the session's reader
                asyncio.get_running_loop().call_exception_handler(
                    {"message": f"a handler of {event} failed", "exception": error}
                )

    async def _open(self, start: ClientMessage) -> None:
        headers = {"Authorization": f"Bearer {self._credential}"} if self._credential else {}
        try:
            socket = await asyncio.wait_for(
                connect(self.url, additional_headers=headers, max_size=4 * 1024 * 1024, ping_interval=None),
                self._start_timeout,
            )
        except (OSError, InvalidHandshake, TimeoutError) as error:
            raise SessionRefused(f"cannot connect to {self.url}: {error}", 0) from error
        self._socket = socket
        self._started = asyncio.get_running_loop().create_future()
        self._last_error = None
        self._in_queue = asyncio.Event()
        self._reader = asyncio.create_task(self._read(socket, self._started))
        # A server that refuses at once (a credential, an agent) may close before this is
        # sent: the refusal is read from what it sent and said in `_started`.
        with contextlib.suppress(ConnectionClosed):
            await socket.send(json.dumps(start))
        # The start timeout ends when the session starts, or when the gateway queues it for a
        # slot of the model quota: it then waits for its turn as long as the gateway keeps its
        # place. Cancelled (or timed out), the connection closes and the place is given up.
        queued = asyncio.ensure_future(self._in_queue.wait())
        either: set[asyncio.Future[Any]] = {self._started, queued}
        try:
            done, _ = await asyncio.wait(either, timeout=self._start_timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                raise SessionRefused(f"the session did not start within {self._start_timeout} s", 0)
            await asyncio.shield(self._started)
        except (SessionRefused, asyncio.CancelledError):
            if not self._started.done():
                self._reader.cancel()
                await socket.close()
            raise
        finally:
            queued.cancel()

    async def _read(self, socket: ClientConnection, started: asyncio.Future[None]) -> None:
        try:
            async for frame in socket:
                self._receive(frame, started)
        except ConnectionClosed:
            pass
        code = socket.close_code
        reason = socket.close_reason or ""
        if not started.done():
            why = (self._last_error["message"] if self._last_error else "") or reason or "the connection closed"
            started.set_exception(
                SessionRefused(f"the session was refused ({code}): {why}", code or 1006, self._last_error)
            )
            return
        if started.cancelled() or started.exception() is not None:
            return  # this connection never started (a start that timed out): `_open` said so
        if socket is not self._socket or self._over is not None:
            return
        if self._ending or code not in _RESUMABLE or not self.resume_token or not self._resume_pauses:
            error = self._last_error if code != 1000 else None
            self._finish(Closed(code or 1006, reason, error))
            return
        self._resuming = True
        asyncio.create_task(self._resume(code))

    def _receive(self, frame: str | bytes, started: asyncio.Future[None]) -> None:
        if self.last_seq is not None:
            self.last_seq += 1
        if isinstance(frame, bytes):
            self._emit("audio", AudioChunk(frame, self.output_format))
            return
        try:
            message = cast(ServerMessage, json.loads(frame))
            kind = message["type"]
        except (ValueError, KeyError, TypeError):
            return
        if message["type"] == "bidi_connection_start":
            self.session_id = message["session_id"]
            self.agent = message["agent"]
            self.mode = message["mode"]
            self.resume_token = message.get("resume_token") or self.resume_token
            seq = message.get("seq")
            if seq is not None:
                self.last_seq = seq
            resumed = self._resuming
            self._resuming = False
            if not started.done():
                started.set_result(None)
            if resumed:
                self._emit("resumed", message)
            asyncio.get_running_loop().create_task(self._flush())
        elif message["type"] == "bidi_session_queued":
            if not started.done():
                self._in_queue.set()
        elif message["type"] == "bidi_error":
            self._last_error = message
        elif message["type"] == "bidi_audio_stream":
            fmt = message.get("format")
            chunk_format = resolve_format(fmt, self.output_format) if fmt else self.output_format
            self._emit("audio", AudioChunk(base64.b64decode(message["audio"]), chunk_format))
        self._inbox.put_nowait(message)
        self._emit(kind, message)
        self._emit("message", message)

    async def _flush(self) -> None:
        while self._queued and self._socket is not None and not self._resuming:
            frame = self._queued.pop(0)
            try:
                await self._socket.send(frame)
            except ConnectionClosed:
                self._queued.insert(0, frame)
                return

    async def _resume(self, code: int | None) -> None:
        failure: Exception | None = None
        for attempt, pause in zip(itertools.count(1), self._resume_pauses, strict=False):
            await asyncio.sleep(pause)
            if self._ending:
                break
            self._emit("reconnecting", Reconnecting(attempt, code))
            try:
                start = {"type": "session_start", "resume_token": self.resume_token, "last_seq": self.last_seq}
                await self._open(cast(ClientMessage, start))
                return
            except SessionRefused as error:
                failure = error
                # A refusal that says the token is no good (4410) will not change by trying again.
                if error.code not in _RESUMABLE and error.code != 0:
                    break
        refused = failure if isinstance(failure, SessionRefused) else None
        self._finish(
            Closed(
                refused.code if refused else (code or 1006),
                f"the session could not be resumed: {failure or 'no attempt made'}",
                refused.error if refused else None,
            )
        )

    def _finish(self, closed: Closed) -> None:
        if self._over is not None:
            return
        self._over = closed
        self._resuming = False
        self._inbox.put_nowait(None)
        self._emit("closed", closed)
        self._closed.set()
