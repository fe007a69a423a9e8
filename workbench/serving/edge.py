"""``workbench serve``'s network edge: who may talk to it, how much, and for how long.

Two layers, each where the information is:

* :func:`edge_protocol`: a subclass of uvicorn's own httptools protocol
  (uvicorn takes a protocol class as ``http=``), for what only the
  connection sees: the request head's size (431) and the body's (413, from
  ``Content-Length`` before anything is read, or as chunks arrive), the time
  to send the head and then the body (408: a slowloris connection is closed),
  and the number of open connections: at the limit a new connection closes
  the one idle the longest (nginx's way with keep-alive connections), and
  gets 503 with ``Retry-After`` only when none is idle.
  uvicorn has ``limit_concurrency`` and ``timeout_keep_alive``; the first
  answers 503 without ``Retry-After`` and only once a head has been read, so
  the connection limit is here; the second is used as it is.
* :func:`refusal`: per request, before the handler: the ``Host`` allow-list
  (DNS rebinding: loopback names by default), the ``Origin`` of state-changing
  requests (a web page's cross-origin ``POST``, even ``no-cors``, carries one),
  the ``X-Request-Id`` length (400) and the admission limit on requests
  queued in the batcher (503 with ``Retry-After``). ``/shutdown`` takes the
  ``--control-token`` (``X-Workbench-Token``) and is off without one
  (signals stop the server).

Every refusal is counted by reason; the limits and the counts go into the
run (``serving.edge``).
"""

from __future__ import annotations

import hmac
from collections import Counter
from dataclasses import asdict, dataclass, fields
from http import HTTPStatus
from urllib.parse import urlparse, urlsplit

from ..errors import ConfigError
from . import hosts

TOKEN_HEADER = "X-Workbench-Token"
STATE_CHANGING = ("POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class EdgeLimits:
    """The edge's settings (see docs/serving.md, which lists each with its default)."""

    allow_hosts: tuple[str, ...] = ()  # ``Host`` names answered besides the loopback names and the
    #                                               bound address (a wildcard bind: this machine's); "*": any
    control_token: str | None = None  # ``X-Workbench-Token`` of ``POST /shutdown`` (None: off)
    max_header_bytes: int = 16_384  # request line + headers -> 431
    max_body_bytes: int = 1_048_576  # -> 413
    max_request_id_chars: int = 128  # -> 400
    header_timeout_s: float = 10.0  # head not complete this long after its first byte -> 408
    body_timeout_s: float = 10.0  # body not complete this long after the head -> 408
    keep_alive_s: float = 5.0  # idle keep-alive connection closed (uvicorn's timeout_keep_alive)
    max_connections: int = 512  # open connections; one more -> 503 + Retry-After
    max_client_connections: int = 256  # open connections of one client address -> 503 + Retry-After
    max_pipelined: int = (
        16  # requests read ahead of their response on one connection -> 503, closed
    )
    send_timeout_s: float = 10.0  # responses left unread this long (send buffer full) -> closed
    max_pending: int = 1024  # requests queued or running; one more -> 503 + Retry-After
    retry_after_s: int = 1
    accept_backlog: int = 128  # the listen queue, and the most connections accepted per loop turn

    def __post_init__(self) -> None:
        for f in fields(self):  # every count (int) is at least 1, every duration (float) above 0
            value, flag = getattr(self, f.name), _FLAGS.get(f.name, f.name.replace("_", "-"))
            if f.type == "int" and value < 1:
                raise ConfigError(f"--{flag} {value}: must be at least 1")
            if f.type == "float" and not value > 0:  # also false for nan
                raise ConfigError(f"--{flag} {value}: must be more than 0 seconds")
        if self.control_token is not None and len(self.control_token) < 16:
            raise ConfigError(
                "--control-token: use at least 16 characters (e.g. python -c "
                "'import secrets; print(secrets.token_urlsafe())')"
            )

    def answered(self, bind: str = "127.0.0.1") -> frozenset[str]:
        """The ``Host`` names a server bound to ``bind`` answers (:func:`workbench.serving.hosts.allowed_hosts`,
        the room's rule: loopback names, the bound address or, for a wildcard bind, this machine's)."""
        return hosts.allowed_hosts(bind, [h for h in self.allow_hosts if h != "*"])

    def params(self, bind: str = "127.0.0.1") -> dict:
        """The settings for the run record (the token itself is not recorded; the hosts as answered)."""
        out = asdict(self)
        out["allow_hosts"] = ["*"] if "*" in self.allow_hosts else sorted(self.answered(bind))
        out["control_token"] = "set" if self.control_token else None
        return out


# the flags whose names are not the field's
_FLAGS = {
    "max_request_id_chars": "max-request-id",
    "retry_after_s": "retry-after",
    "header_timeout_s": "header-timeout",
    "body_timeout_s": "body-timeout",
    "keep_alive_s": "keep-alive-timeout",
    "send_timeout_s": "send-timeout",
}


def host_allowed(
    limits: EdgeLimits, host_header: str | None, answered: frozenset[str] | None = None
) -> bool:
    """Whether a ``Host`` header (or an Origin's host name) is one the server answers."""
    if "*" in limits.allow_hosts:
        return True
    return hosts.host_allowed(host_header, answered if answered is not None else limits.answered())


def refusal(
    limits: EdgeLimits,
    method: str,
    path: str,
    headers: dict[str, str],
    pending: int,
    answered: frozenset[str] | None = None,
) -> tuple[int, str, str] | None:
    """``(status, reason key, message)`` when the request is refused at the edge, else None.

    ``headers``: lower-case names. ``pending``: requests queued or running now. ``answered``: the
    server's ``Host`` names (:meth:`EdgeLimits.answered` of its bind address; default loopback's).
    """
    answered = answered if answered is not None else limits.answered()
    host = headers.get("host")
    if not host_allowed(limits, host, answered):
        if not host:
            return 421, "host", "no Host header"
        guard = "(DNS rebinding guard; add a name with --allow-host)"
        return 421, "host", f"Host {host[:80]!r} is not served here {guard}"
    origin = headers.get("origin")
    if method in STATE_CHANGING and origin is not None:
        name = urlparse(origin).hostname if origin != "null" else None
        if name is None or not host_allowed(limits, f"[{name}]" if ":" in name else name, answered):
            why = f"Origin {origin[:80]!r} may not send {method} here (a web page of another site)"
            return 403, "origin", why
    rid = headers.get("x-request-id")
    if rid is not None and len(rid) > limits.max_request_id_chars:
        limit = f"the limit is {limits.max_request_id_chars} (--max-request-id)"
        return 400, "request_id", f"X-Request-Id is {len(rid)} characters; {limit}"
    if path.endswith("/predict") and pending >= limits.max_pending:
        limit = f"the limit is {limits.max_pending} (--max-pending)"
        return 503, "pending", f"{pending} requests are queued; {limit}: retry later"
    return None


VERSIONS = ("1.0", "1.1")


def head_refusal(
    limits: EdgeLimits,
    version: str,
    target: bytes,
    headers: list[tuple[bytes, bytes]],
    answered: frozenset[str] | None = None,
) -> tuple[int, str, str] | None:
    """``(status, reason key, message)`` when a request head is not strict HTTP/1.x, else None.

    ``version``: the request line's (``"1.1"``); ``target``: its request target as sent;
    ``headers``: ``(lower-case name, value)`` in order, repeats kept. An absolute-form target
    (``http://host/path``) names the host the request is for (RFC 9112 3.2.2): it must be one the
    server answers, as ``Host`` must (:func:`refusal`), and a request carries one ``Host`` (3.2).
    """
    if version not in VERSIONS:
        return 505, "version", f"HTTP/{version[:8]} is not served here (HTTP/1.1 and 1.0 are)"
    given = sum(name == b"host" for name, _ in headers)
    if given > 1:
        return 400, "host", f"{given} Host headers: a request carries exactly one"
    if target.startswith(b"/"):
        return None
    url = urlsplit(target[:2048].decode("latin-1"))
    if url.scheme.lower() not in ("http", "https") or not url.netloc:
        return 400, "target", f"request target {target[:80]!r}: send a path or an http:// URL"
    if not host_allowed(limits, url.netloc.rpartition("@")[2], answered or limits.answered()):
        guard = "(DNS rebinding guard; add a name with --allow-host)"
        return 421, "host", f"request target host {url.netloc[:80]!r} is not served here {guard}"
    return None


def token_ok(limits: EdgeLimits, given: str | None) -> bool:
    """Whether ``given`` is the control token (compared in constant time); False when none is set."""
    return (
        limits.control_token is not None
        and given is not None
        and hmac.compare_digest(given.encode(), limits.control_token.encode())
    )


def response_bytes(status: int, message: str, retry_after_s: int | None = None) -> bytes:
    """A complete ``Connection: close`` response with a plain-text body."""
    body = (message + "\n").encode("utf-8", "replace")
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "Content-Type: text/plain; charset=utf-8",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if retry_after_s is not None:
        lines.append(f"Retry-After: {retry_after_s}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# A connection silent this long since it opened, or a head still arriving this long after its first
# byte, is stalled: first to give up its slot at the connection limit (idle floods, slowloris); a
# well-formed client sends its head in one packet as soon as it has connected.
STALLED_S = 1.0


class StopParsing(Exception):
    """Raised from a parser callback to stop parsing a connection's input (httptools stops at once)."""


def edge_protocol(limits: EdgeLimits, refused: Counter, answered: frozenset[str] | None = None):
    """uvicorn's httptools protocol with the connection-level limits of ``limits``; refusals counted in
    ``refused``; ``answered``: the server's ``Host`` names (:meth:`EdgeLimits.answered`)."""
    import httptools
    from uvicorn.protocols.http.flow_control import FlowControl
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    answered = answered if answered is not None else limits.answered()
    clients: Counter = Counter()  # open connections per client address

    class Flow(FlowControl):
        """Reading stays paused while a request waits behind the one in flight (pipelining), so a
        connection holds at most one read of requests ahead of its responses."""

        def __init__(self, transport, protocol) -> None:
            super().__init__(transport)
            self.protocol = protocol

        def resume_reading(self) -> None:
            if not self.protocol.pipeline and not self.protocol._draining:
                super().resume_reading()

    class EdgeProtocol(HttpToolsProtocol):
        """Phases of a connection: ``head`` (reading a request head), ``body``, ``idle`` (between requests)."""

        def connection_made(self, transport) -> None:
            self._phase, self._head_bytes, self._body_bytes = "head", 0, 0
            self._rejected, self._draining, self._deferred = False, False, None
            self._timer = self._send_timer = None
            self._served, self._marks, self._framing, self._head_size, self._own = 0, 0, 0, 0, None
            super().connection_made(transport)
            self.flow = Flow(transport, self)
            self._client = self.client[0] if self.client else ""
            clients[self._client] += 1
            self._idle_since = self._head_since = self.loop.time()
            if clients[self._client] > limits.max_client_connections and not self._evict_one(True):
                self._reject(
                    503,
                    "client_connections",
                    f"this client has {clients[self._client] - 1} connections open and busy; the "
                    f"limit is {limits.max_client_connections} (--max-client-connections): "
                    "retry later",
                    True,
                )
                return
            if len(self.connections) > limits.max_connections and not self._evict_one(False):
                self._reject(
                    503,
                    "connections",
                    f"{len(self.connections) - 1} connections are open and busy; the "
                    f"limit is {limits.max_connections} (--max-connections): retry later",
                    True,
                )
                return
            self._arm(limits.header_timeout_s, "header")

        def _victim_rank(self, now: float) -> tuple | None:
            """Where this connection stands in line to be closed for a new one (lowest first), or None
            when it is busy. Stalled first (silent since it opened, or a head still arriving, for
            :data:`STALLED_S`), then just opened and silent, then between two requests; within a kind,
            the client holding the most connections first, then the longest waiting."""
            if self._rejected or self._draining:
                return None
            if not (self.cycle is None or self.cycle.response_complete):
                return None  # a request of it is being answered
            if self._phase == "idle" or (self._phase == "head" and self._head_bytes == 0):
                since = self._idle_since
                kind = 2 if self._served else (0 if now - since >= STALLED_S else 1)
            elif self._phase == "head" and now - self._head_since >= STALLED_S:
                kind, since = 0, self._head_since
            else:
                return None
            return kind, -clients[self._client], since, self._head_bytes > 0

        def _evict_one(self, own: bool) -> bool:
            """Close one connection for this new one (``own``: one of the same client's), as nginx
            reuses idle keep-alive connections, but sparing a client between two requests while any
            silent connection or slow head is there: a flood of idle connections or slow heads cannot
            lock well-formed clients out. False: all are busy."""
            now, best, victim = self.loop.time(), None, None
            for c in self.connections:
                if c is self or (own and getattr(c, "_client", None) != self._client):
                    continue
                rank = c._victim_rank(now) if hasattr(c, "_victim_rank") else None
                if rank is not None and (best is None or rank < best):
                    best, victim = rank, c
            if victim is None:
                return False
            victim._rejected = True
            victim._cancel()
            victim.transport.close()
            refused["evicted_slow_head" if best[3] else "evicted_idle"] += 1
            return True

        def connection_lost(self, exc) -> None:
            self._cancel()
            self._unpause_timer()
            clients[self._client] -= 1
            if clients[self._client] <= 0:
                del clients[self._client]
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._draining:  # past --max-pipelined: nothing more is read from this connection
                self.transport.pause_reading()
            if self._rejected or self._draining:
                return
            # the first bytes of the next request on a kept-alive connection
            if self._phase == "idle":
                self._phase, self._head_bytes, self._head_since = "head", 0, self.loop.time()
                self._arm(limits.header_timeout_s, "header")
            if self._phase == "head":
                self._head_bytes += len(data)
            marks, body = self._marks, self._body_bytes
            self._feed(data)
            if self._rejected or self._draining:
                return
            if self._phase == "head":
                self._check_head(self._head_bytes)
            elif self._phase == "body" and marks == self._marks:
                # no chunk or request ended in this read: what was not body is one chunk's size line or the
                # trailers after the last chunk, held by the parser until their line ends
                self._framing += len(data) - (self._body_bytes - body)
                self._check_head(self._framing, "chunk framing or trailers")

        def _feed(self, data: bytes) -> None:
            """uvicorn's ``data_received``, but a parse stopped on purpose (nothing more is read from a
            connection past ``--max-pipelined``: the rest of its read is not parsed) answers nothing."""
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()
            except httptools.HttpParserError:
                if not self._draining:
                    self.logger.warning("Invalid HTTP request received.")
                    self.send_400_response("Invalid HTTP request received.")

        def on_message_begin(self) -> None:
            if self._draining:
                raise StopParsing  # the parser stops where it is; the rest of the read is dropped
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            if self._rejected or self._draining:
                return
            self._phase, self._body_bytes, self._framing, self._own = "body", 0, 0, None
            self._marks += 1
            self._cancel()
            # a head read in one go
            self._head_size = len(self.url) + sum(len(k) + len(v) + 4 for k, v in self.headers)
            if not self._check_head(self._head_size):
                return
            refuse = head_refusal(
                limits, self.parser.get_http_version(), self.url, self.headers, answered
            )
            if refuse is not None:
                self._reject(*refuse)
                return
            length = next((v for k, v in self.headers if k == b"content-length"), b"0")
            if length.strip().isdigit() and int(length) > limits.max_body_bytes:
                self._reject(
                    413,
                    "body_bytes",
                    f"a body of {int(length)} bytes is over the limit of "
                    f"{limits.max_body_bytes} (--max-body-bytes)",
                )
                return
            super().on_headers_complete()
            self._own = self.cycle
            if len(self.pipeline) > limits.max_pipelined:
                self._reject(
                    503,
                    "pipelined",
                    f"more than {limits.max_pipelined} requests were sent ahead of their responses "
                    "(--max-pipelined): only the first was answered; send the rest again on a new "
                    "connection",
                    True,
                )
            elif not self.pipeline:  # a queued request's body is read once it is its turn
                self._arm(limits.body_timeout_s, "body")

        def on_header(self, name: bytes, value: bytes) -> None:
            if self._phase != "body":
                super().on_header(name, value)
                return
            # a trailer (after the last chunk): counted with the head against its limit, not kept
            self._head_size += len(name) + len(value) + 4
            if not self._rejected and not self._draining:
                self._check_head(self._head_size, "request head and trailers")

        def on_chunk_complete(self) -> None:
            self._marks += 1
            self._framing = 0

        def _check_head(self, head_bytes: int, what: str = "request head") -> bool:
            """Refuse a request head (or its trailers) over the limit (431); False when it was refused."""
            if head_bytes <= limits.max_header_bytes:
                return True
            self._reject(
                431,
                "header_bytes",
                f"the {what} is over {limits.max_header_bytes} bytes (--max-header-bytes)",
            )
            return False

        def on_body(self, body: bytes) -> None:
            if self._rejected or self._draining:
                return
            self._body_bytes += len(body)
            if self._body_bytes > limits.max_body_bytes:
                self._reject(
                    413,
                    "body_bytes",
                    f"the body is over the limit of {limits.max_body_bytes} bytes "
                    "(--max-body-bytes)",
                )
                return
            super().on_body(body)

        def on_message_complete(self) -> None:
            if self._rejected or self._draining:
                return
            self._cancel()
            self._phase, self._marks, self._own = "idle", self._marks + 1, None
            self._idle_since = self.loop.time()
            super().on_message_complete()

        def on_response_complete(self) -> None:
            self._served += 1
            self._idle_since = self.loop.time()
            last = not self.pipeline
            super().on_response_complete()
            if (
                self._deferred is not None and last
            ):  # a refusal waiting for the responses owed before it
                self._rejected = True
                self.transport.write(self._deferred)
                self.transport.close()
            elif self._phase == "body" and self._timer is None and not self.pipeline:
                self._arm(limits.body_timeout_s, "body")  # the queued request whose turn it is

        def pause_writing(self) -> None:
            """The client is not reading its responses: it has ``send_timeout_s`` to start again."""
            super().pause_writing()
            if self._send_timer is None:
                self._send_timer = self.loop.call_later(limits.send_timeout_s, self._unread)

        def resume_writing(self) -> None:
            self._unpause_timer()
            super().resume_writing()

        def _unpause_timer(self) -> None:
            if self._send_timer is not None:
                self._send_timer.cancel()
                self._send_timer = None

        def _unread(self) -> None:
            self._send_timer = None
            refused["send_timeout"] += 1
            self._rejected = True
            self._cancel()
            self.transport.abort()  # close() would wait for the unread bytes to be taken

        def _arm(self, seconds: float, what: str) -> None:
            self._cancel()
            self._timer = self.loop.call_later(seconds, self._expired, what, seconds)

        def _cancel(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expired(self, what: str, seconds: float) -> None:
            self._timer = None
            if self._rejected or self.transport.is_closing():
                return
            if what == "header" and self._head_bytes == 0:  # opened and never used: close quietly
                refused["idle_connection"] += 1
                self._rejected = True
                self.transport.close()
                return
            self._reject(
                408,
                f"{what}_timeout",
                f"the request {'head' if what == 'header' else 'body'} was not "
                f"complete within {seconds:g} s (--{what}-timeout)",
            )

        def _reject(self, status: int, reason: str, message: str, retry: bool = False) -> None:
            """Answer ``status`` and close. When responses to earlier requests are owed (pipelining),
            they go first: nothing more is read, and the refusal is sent after the last of them."""
            self._cancel()
            refused[reason] += 1
            raw = response_bytes(status, message, limits.retry_after_s if retry else None)
            cycle, own = self.cycle, self._own
            if own is None and cycle is not None and not cycle.response_complete or self.pipeline:
                if reason == "pipelined":
                    self.pipeline.clear()  # a client that far ahead: the waiting ones are not run either
                elif own is not None and own is self.pipeline[0][0]:
                    self.pipeline.popleft()  # it was queued: it will not run
                self._draining, self._deferred = True, raw
                return
            self._rejected = True
            if cycle is None or cycle.response_complete or not cycle.response_started:
                self.transport.write(raw)
            self.transport.close()

    return EdgeProtocol
