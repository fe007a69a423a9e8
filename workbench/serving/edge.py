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
from urllib.parse import urlparse

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


def edge_protocol(limits: EdgeLimits, refused: Counter):
    """uvicorn's httptools protocol with the connection-level limits of ``limits``; refusals counted in ``refused``."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class EdgeProtocol(HttpToolsProtocol):
        """Phases of a connection: ``head`` (reading a request head), ``body``, ``idle`` (between requests)."""

        def connection_made(self, transport) -> None:
            self._phase, self._head_bytes, self._body_bytes = "head", 0, 0
            self._rejected, self._timer = False, None
            super().connection_made(transport)
            self._idle_since = self.loop.time()
            if len(self.connections) > limits.max_connections and not self._evict_one():
                self._reject(
                    503,
                    "connections",
                    f"{len(self.connections) - 1} connections are open and busy; the "
                    f"limit is {limits.max_connections} (--max-connections): retry later",
                    True,
                )
                return
            self._arm(limits.header_timeout_s, "header")

        def _evictable(self) -> bool:
            """Open with nothing in progress: between requests, or connected and silent."""
            quiet = self._phase == "idle" or (self._phase == "head" and self._head_bytes == 0)
            answered = self.cycle is None or self.cycle.response_complete
            return quiet and answered and not self._rejected

        def _evict_one(self) -> bool:
            """At the connection limit, close the connection idle the longest (as nginx reuses idle keep-alive
            connections): a flood of idle connections cannot lock well-formed clients out. False: all are busy."""
            idle = [
                c
                for c in self.connections
                if c is not self and getattr(c, "_evictable", None) and c._evictable()
            ]
            if not idle:
                return False
            victim = min(idle, key=lambda c: c._idle_since)
            victim._rejected = True
            victim._cancel()
            victim.transport.close()
            refused["evicted_idle"] += 1
            return True

        def connection_lost(self, exc) -> None:
            self._cancel()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._rejected:
                return
            # the first bytes of the next request on a kept-alive connection
            if self._phase == "idle":
                self._phase, self._head_bytes = "head", 0
                self._arm(limits.header_timeout_s, "header")
            if self._phase == "head":
                self._head_bytes += len(data)
            super().data_received(data)
            if not self._rejected and self._phase == "head":
                self._check_head(self._head_bytes)

        def on_headers_complete(self) -> None:
            if self._rejected:
                return
            self._phase, self._body_bytes = "body", 0
            self._cancel()
            # a head read in one go
            if not self._check_head(
                len(self.url) + sum(len(k) + len(v) + 4 for k, v in self.headers)
            ):
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
            self._arm(limits.body_timeout_s, "body")

        def _check_head(self, head_bytes: int) -> bool:
            """Refuse a request head over the limit (431); False when it was refused."""
            if head_bytes <= limits.max_header_bytes:
                return True
            self._reject(
                431,
                "header_bytes",
                f"the request head is over {limits.max_header_bytes} bytes (--max-header-bytes)",
            )
            return False

        def on_body(self, body: bytes) -> None:
            if self._rejected:
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
            if self._rejected:
                return
            self._cancel()
            self._phase = "idle"
            self._idle_since = self.loop.time()
            super().on_message_complete()

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
            self._rejected = True
            self._cancel()
            refused[reason] += 1
            if self.cycle is None or not self.cycle.response_started:
                self.transport.write(
                    response_bytes(status, message, limits.retry_after_s if retry else None)
                )
            self.transport.close()

    return EdgeProtocol
