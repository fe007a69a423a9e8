"""A small HTTP/1.1 keep-alive client on asyncio protocols: the load generator's sockets.

Why not aiohttp or httpx: a load generator spends its time between sends
handling responses, and a send that falls due while a response is being
handled goes out late (the generator's lag). aiohttp took about 2.5 times
the CPU per request (a task, a response object, header multidicts, trace
hooks: 420-430 against 155-190 us a request at 1,000 req/s, event loop and
socket calls included); here a request is one ``transport.write`` of
prebuilt bytes and a response is parsed once from the bytes received:
status line, headers into a dict, the body framed by ``Content-Length``,
``Transfer-Encoding: chunked`` or the end of the connection.

No pipelining: a connection carries one request at a time. :class:`Pool`
keeps up to ``limit`` connections, hands out the most recently used idle
one, opens one spare in the background when the last idle one is taken (so
a send rarely waits for a connect), and queues a request when all are busy.
Every request ends in exactly one ``done(sent_ns, outcome)`` call:
``sent_ns`` is when its bytes were handed to the socket (None when it never
went out), ``outcome`` a :class:`Response` or the exception that ended it.
A ``text/event-stream`` response (:mod:`workbench_serve.sse`) is read as it
arrives: each event is ``(received_ns, name, data)``, timed by the read that
completed it (``data`` kept for the ``end`` event only), in ``Response.events``; a request that fails after its first
event ends in ``done(sent_ns, exception, events)`` instead, its events kept.
Clock readings are integer ns of the injected ``clock``.
"""

from __future__ import annotations

import asyncio
import ssl  # asyncio imports it anyway
from collections import deque
from dataclasses import dataclass
from typing import Callable

from workbench.units import ns_to_s
from .sse import END, SSE_TYPE, BadEvent, Decoder

MAX_HEAD_BYTES = 65_536  # a response head (status line and headers)
MAX_HEADER_LINES = 256
# a response body, however framed (the workbench's are bytes to kilobytes)
MAX_BODY_BYTES = 64 * 2**20
MAX_INTERIM = 32  # 1xx interim responses before the real one
_HEX = frozenset(b"0123456789abcdefABCDEF")


class ServerDisconnected(ConnectionError):
    """The server closed the connection before its response was complete."""


class Abandoned(Exception):
    """The request was given up on (Ctrl-C) before its response came."""


class BadResponse(ValueError):
    """The bytes the server sent are not an HTTP/1.x response."""


class HeadTooLarge(BadResponse):
    """A response head over :data:`MAX_HEAD_BYTES` or :data:`MAX_HEADER_LINES`."""


class BodyTooLarge(BadResponse):
    """A response body over the parser's ``max_body_bytes`` (Content-Length, chunks or until the end)."""


class BadChunk(BadResponse):
    """A chunk size that is not a bounded hexadecimal number (negative, signed, huge, empty)."""


class TooManyInterim(BadResponse):
    """More than :data:`MAX_INTERIM` ``1xx`` responses before the real one."""


class ExtraBytes(BadResponse):
    """Bytes after a complete response, or with no request in flight (a wrong ``Content-Length``)."""


@dataclass(slots=True)
class Response:
    """One response: status, headers (lower-case names; repeats joined by ``", "``), body, when it was complete (ns)."""

    status: int
    headers: dict[str, str]
    body: bytes
    done_ns: int
    events: list[tuple[int, str, str]] | None = None  # an event stream's, see the module docstring


Event = tuple[int, str, str]
Done = Callable[..., None]  # done(sent_ns, outcome), or (sent_ns, exception, events): see above


def request_bytes(
    method: str, path: str, host: str, headers: dict[str, str], body: bytes = b""
) -> bytes:
    """An HTTP/1.1 request with ``Content-Length`` framing (keep-alive is HTTP/1.1's default)."""
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    if body or method not in ("GET", "HEAD"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class ResponseParser:
    """Incremental parser of HTTP/1.x responses: :meth:`feed` returns the responses the bytes completed.

    Each is ``(status, headers, body, keep_alive)``. A body without
    ``Content-Length`` or chunked framing runs to the end of the connection
    (:meth:`feed_eof`). Raises :class:`BadResponse` (a subclass naming the
    kind) naming what was wrong; everything it holds is bounded: the head by
    :data:`MAX_HEAD_BYTES`, the body by ``max_body_bytes``, ``1xx`` responses
    by :data:`MAX_INTERIM`.
    """

    def __init__(self, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.max_body_bytes = max_body_bytes
        self._interim = 0
        self._buf = bytearray()
        self._head: tuple[int, dict[str, str], bool] | None = None
        self._need: int | None = None  # body bytes still expected (Content-Length framing)
        self._chunked = False
        self._until_eof = False
        self._body = bytearray()
        self._events: Decoder | None = None  # a text/event-stream body's decoder
        self.events: list[
            tuple[str, str]
        ] = []  # events completed by the last feed (taken by the caller)

    @property
    def sse(self) -> bool:
        """Whether the response being read is an event stream (``text/event-stream``)."""
        return self._events is not None

    @property
    def busy(self) -> bool:
        """Whether part of a response has arrived."""
        return bool(self._buf) or self._head is not None

    def feed(self, data: bytes) -> list[tuple[int, dict[str, str], bytes, bool]]:
        self._buf += data
        out = []
        while True:
            if self._head is None and not self._read_head():
                return out
            body = self._read_body()
            if body is None:
                return out
            status, headers, keep_alive = self._head
            out.append((status, headers, body, keep_alive))
            self._head, self._body = None, bytearray()

    def feed_eof(self) -> tuple[int, dict[str, str], bytes, bool] | None:
        """The response a closed connection completed (a body read to the end), else None."""
        if self._head is not None and self._until_eof:
            status, headers, _ = self._head
            self._head = None
            return status, headers, bytes(self._body + self._buf), False
        return None

    def _read_head(self) -> bool:
        while True:  # a loop, not recursion: interim (1xx) responses are skipped, up to MAX_INTERIM
            end = self._buf.find(b"\r\n\r\n", 0, MAX_HEAD_BYTES + 4)
            if end < 0:
                if len(self._buf) > MAX_HEAD_BYTES:
                    raise HeadTooLarge(f"no end of the response head within {MAX_HEAD_BYTES} bytes")
                return False
            lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
            del self._buf[: end + 4]
            if len(lines) > MAX_HEADER_LINES:
                raise HeadTooLarge(
                    f"a response head of {len(lines)} lines (the limit is {MAX_HEADER_LINES})"
                )
            version, _, rest = lines[0].partition(" ")
            code = rest.partition(" ")[0]
            if not version.startswith("HTTP/1.") or not (code.isdigit() and code.isascii()):
                raise BadResponse(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
            if len(code) != 3 or not 100 <= int(code) <= 599:
                raise BadResponse(f"a status code from 100 to 599 expected: {lines[0][:80]!r}")
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    raise BadResponse(f"a header line without ':': {line[:80]!r}")
                name, value = name.strip().lower(), value.strip()
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
            status = int(code)
            if 100 <= status < 200:  # an interim response (100 Continue): the real one follows
                self._interim += 1
                if self._interim > MAX_INTERIM:
                    raise TooManyInterim(
                        f"more than {MAX_INTERIM} interim (1xx) responses before the real one"
                    )
                continue
            self._interim = 0
            self._frame(status, headers, version)
            return True

    def _frame(self, status: int, headers: dict[str, str], version: str) -> None:
        conn = headers.get("connection", "").lower()
        keep_alive = "close" not in conn if version == "HTTP/1.1" else "keep-alive" in conn
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        sse = headers.get("content-type", "").lower().startswith(SSE_TYPE)
        self._events = Decoder() if sse else None
        self._until_eof, self._need = False, None
        if self._chunked:
            pass
        elif "content-length" in headers:
            lengths = {v.strip() for v in headers["content-length"].split(",")}
            length = lengths.pop()
            if lengths or not (length.isascii() and length.isdigit()):
                raise BadResponse(
                    f"Content-Length {headers['content-length'][:40]!r} is not a number"
                )
            if len(length) > 18 or int(length) > self.max_body_bytes:
                raise BodyTooLarge(
                    f"Content-Length {length[:20]} is over the limit of {self.max_body_bytes} bytes"
                )
            self._need = int(length)
        elif status in (204, 304):
            self._need = 0
        else:
            self._until_eof, keep_alive = True, False
        self._head = (status, headers, keep_alive)

    def _read_body(self) -> bytes | None:
        if self._need is not None:
            if len(self._buf) < self._need:
                return None
            body = bytes(self._buf[: self._need])
            del self._buf[: self._need]
            self._decode(body)
            return body
        if self._chunked:
            return self._read_chunks()
        self._body += self._buf  # until the connection ends
        self._decode(self._buf)
        self._buf.clear()
        self._check_body(len(self._body))
        return None

    def _decode(self, piece) -> None:
        if self._events is not None:
            try:
                self.events += self._events.feed(bytes(piece))
            except BadEvent as exc:
                raise BadResponse(str(exc)) from None

    def _check_body(self, n: int) -> None:
        if n > self.max_body_bytes:
            raise BodyTooLarge(f"a response body over the limit of {self.max_body_bytes} bytes")

    def _read_chunks(self) -> bytes | None:
        while True:
            end = self._buf.find(b"\r\n")
            if end < 0:
                return None
            if end > 1024:
                raise BadChunk(f"a chunk-size line of {end} bytes")
            size_text = bytes(self._buf[:end]).split(b";")[0].strip()
            # int() would take "-5", "+5", "0x5", "5_0"
            if not size_text or not _HEX.issuperset(size_text):
                raise BadChunk(f"chunk size {size_text[:20]!r} is not hexadecimal")
            if len(size_text.lstrip(b"0")) > 16:
                raise BodyTooLarge(
                    f"chunk size {size_text[:20]!r} is over the limit of {self.max_body_bytes} bytes"
                )
            size = int(size_text, 16)
            self._check_body(len(self._body) + size)
            if size == 0:  # the last chunk, then trailers (if any) up to an empty line
                head_end = self._buf.find(b"\r\n\r\n", end)
                if head_end < 0:
                    if len(self._buf) > MAX_HEAD_BYTES:
                        raise HeadTooLarge(f"no end of the trailers within {MAX_HEAD_BYTES} bytes")
                    return None
                del self._buf[: head_end + 4]
                return bytes(self._body)
            if len(self._buf) < end + 2 + size + 2:
                return None
            self._body += self._buf[end + 2 : end + 2 + size]
            self._decode(self._buf[end + 2 : end + 2 + size])
            del self._buf[: end + 2 + size + 2]


class Connection(asyncio.Protocol):
    """One keep-alive connection of a :class:`Pool`: one request in flight at a time."""

    def __init__(self, pool: "Pool") -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = ResponseParser()
        self.done: Done | None = None
        self.sent_ns = 0
        self.closed = False
        self.events: list[Event] = []  # the in-flight response's events so far

    def connection_made(self, transport) -> None:
        self.transport = transport

    def send(self, data: bytes, done: Done) -> int:
        """Write one request now; return when it was handed to the socket (ns)."""
        self.done, self.events = done, []
        self.sent_ns = self.pool.clock()
        self.transport.write(data)
        return self.sent_ns

    def data_received(self, data: bytes) -> None:
        now = self.pool.clock()
        # bytes with no request in flight: a wrong framing, or a refusal at connect (503)
        if self.done is None and self in self.pool.idle:
            self.pool.idle.remove(self)  # so the sends below never go on it
        if self.pool.before_read is not None:
            self.pool.before_read()  # sends that fell due go first, not behind a burst of responses
        try:
            if self.done is None:
                first = bytes(data[:80]).split(b"\r\n")[0].decode("latin-1")
                raise ExtraBytes(
                    f"{len(data)} bytes from the server with no request in flight ({first!r})"
                )
            complete = self.parser.feed(data)
            if self.parser.events:
                # a unit's data is not kept (its time is what the run records), the end event's is
                self.events += [(now, n, t if n == END else "") for n, t in self.parser.events]
                self.parser.events = []
            if len(complete) > 1:  # no pipelining: one response per request
                raise ExtraBytes(f"a response (status {complete[-1][0]}) to no request")
            if complete and self.parser.busy:
                length = complete[0][1].get("content-length", "?")[:20]
                raise ExtraBytes(
                    f"bytes after the end of a {complete[0][0]} response (its Content-Length "
                    f"{length} is shorter than its body?)"
                )
        except BadResponse as exc:
            self.fail(exc)
            return
        if not complete:
            return
        status, headers, body, keep_alive = complete[0]
        done, self.done = self.done, None
        if not keep_alive:
            self._close()
        events = self.events if self.parser.sse else None
        done(self.sent_ns, Response(status, headers, body, now, events))
        if not self.closed:
            self.pool.released(self)

    def eof_received(self) -> bool:
        self.closed = True  # no new request on it from now on (connection_lost follows)
        if self in self.pool.idle:
            self.pool.idle.remove(self)
        return False  # close our side too

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        last = self.parser.feed_eof()
        done, self.done = self.done, None
        if done is not None and last is not None:
            events = self.events if self.parser.sse else None
            done(self.sent_ns, Response(*last[:3], self.pool.clock(), events))
        elif done is not None:
            why = f": {exc}" if exc else ""
            message = f"the server closed the connection before the response was complete{why}"
            self._failed(done, ServerDisconnected(message))
        self.pool.lost(self)

    def fail(self, exc: BaseException) -> None:
        """End the request in flight with ``exc`` and drop the connection (it cannot be trusted again)."""
        done, self.done = self.done, None
        self._close(abort=True)
        if done is not None:
            self._failed(done, exc)

    def _failed(self, done: Done, exc: BaseException) -> None:
        """End the request in flight with ``exc`` (with the events it got, if any)."""
        if self.events:
            done(self.sent_ns, exc, self.events)
        else:
            done(self.sent_ns, exc)

    def _close(self, abort: bool = False) -> None:
        if not self.closed:
            self.closed = True
            (self.transport.abort if abort else self.transport.close)()


class Pool:
    """Up to ``limit`` keep-alive connections to one ``host:port`` (TLS when ``tls``); see the module docstring."""

    def __init__(self, host: str, port: int, *, limit: int, clock, tls: bool = False) -> None:
        if limit < 1:
            raise ValueError(f"a pool needs at least one connection, got limit={limit}")
        self.host, self.port, self.limit, self.clock = host, port, limit, clock
        self.ssl = ssl.create_default_context() if tls else None
        self.idle: list[Connection] = []
        self.busy: set[Connection] = set()
        self.opening = 0
        self.waiting: deque[tuple[bytes, Done, int]] = deque()
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task] = set()
        # called as each read arrives, before it is parsed
        self.before_read: Callable[[], None] | None = None

    @property
    def open_count(self) -> int:
        return len(self.idle) + len(self.busy) + self.opening

    def submit(self, data: bytes, done: Done) -> int | None:
        """Send ``data`` on an idle connection now (return the send time, ns), or queue it (return None)."""
        # drop the connections closed since they went idle (connection_lost follows)
        while self.idle and self.idle[-1].closed:
            self.idle.pop()
        if self.idle:
            conn = self.idle.pop()
            sent_ns = self._send(conn, data, done)
            if not self.idle and self.open_count < self.limit:
                self._open_in_background()  # a spare, so the next send does not wait for a connect
            return sent_ns
        self.waiting.append((data, done, self.clock()))
        if self.open_count < self.limit and self.opening < len(self.waiting):
            self._open_in_background()
        return None

    async def connect(self, n: int) -> int:
        """Open up to ``n`` more idle connections (within the limit); how many opened.

        Best effort, ahead of the requests: a connection that cannot be opened
        now is opened when a request needs it, and a failure then is that
        request's, recorded with it.
        """
        n = max(0, min(n, self.limit - self.open_count))
        self.opening += n
        try:
            conns = await asyncio.gather(
                *(self._connect() for _ in range(n)), return_exceptions=True
            )
        finally:
            self.opening -= n
        opened = [c for c in conns if isinstance(c, Connection) and not c.closed]
        self.idle.extend(opened)
        return len(opened)

    async def fetch(self, data: bytes) -> Response:
        """One request, awaited (warm-up, health); its failure raises."""
        future = self._loop.create_future()

        def done(sent_ns, outcome, events=()):
            if not future.done():
                (future.set_exception if isinstance(outcome, BaseException) else future.set_result)(
                    outcome
                )

        self.submit(data, done)
        return await future

    def released(self, conn: Connection) -> None:
        """``conn`` finished a response and stays open: the oldest queued request goes on it, else it idles."""
        self.busy.discard(conn)
        if self.waiting:
            data, done, _ = self.waiting.popleft()
            self._send(conn, data, done)
        else:
            self.idle.append(conn)

    def lost(self, conn: Connection) -> None:
        """``conn`` closed: forget it, and open a replacement if requests are queued."""
        self.busy.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)
        if self.waiting and self.open_count < self.limit:
            self._open_in_background()

    def expire(self, timeout_ns: int) -> None:
        """Fail requests older than ``timeout_ns``: in flight (their connection is dropped) or still queued."""
        now = self.clock()
        for conn in [c for c in self.busy if c.done is not None and now - c.sent_ns > timeout_ns]:
            conn.fail(TimeoutError(f"no complete response within {ns_to_s(timeout_ns):g} s"))
        while self.waiting and now - self.waiting[0][2] > timeout_ns:
            _, done, _ = self.waiting.popleft()
            done(None, TimeoutError(f"no free connection within {ns_to_s(timeout_ns):g} s"))

    def abandon(self, why: str) -> None:
        """Fail every request in flight (its connection dropped) or queued with ``Abandoned(why)``."""
        for conn in [c for c in self.busy if c.done is not None]:
            conn.fail(Abandoned(why))
        while self.waiting:
            _, done, _ = self.waiting.popleft()
            done(None, Abandoned(why))

    async def close(self) -> None:
        """Close every connection and stop the connects in progress (their sockets are closed when this returns)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for conn in [*self.idle, *self.busy]:
            conn._close()
        self.idle.clear()
        await asyncio.sleep(0)  # let each transport's connection_lost run (it closes the socket)

    def _send(self, conn: Connection, data: bytes, done: Done) -> int:
        self.busy.add(conn)
        return conn.send(data, done)

    async def _connect(self) -> Connection:
        _, conn = await self._loop.create_connection(
            lambda: Connection(self), self.host, self.port, ssl=self.ssl
        )
        return conn

    def _open_in_background(self) -> None:
        self.opening += 1
        task = self._loop.create_task(self._open_one())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _open_one(self) -> None:
        try:
            try:
                conn = await self._connect()
            finally:
                self.opening -= 1
        except OSError as exc:
            if self.waiting:  # the request that asked for this connection fails with the reason
                _, done, _ = self.waiting.popleft()
                done(None, exc)
            if self.waiting and self.open_count < self.limit:
                self._open_in_background()  # each queued request gets its own try
            return
        if not conn.closed:
            self.released(conn)
