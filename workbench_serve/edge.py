"""``workbench serve``'s network edge: who may talk to it, how much, and for how long.

Two layers, each where the information is:

* :func:`workbench_serve.connection.edge_protocol`: a subclass of uvicorn's own httptools protocol
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
from dataclasses import asdict, dataclass, fields
from http import HTTPStatus
from urllib.parse import urlparse, urlsplit

from workbench.errors import ConfigError
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
    # the listen queue, and the most connections accepted per loop turn: a queue of 128 kept a
    # reconnecting flood's accepts and evictions going (probe p99 3.6x its own); 16 sheds it in the
    # kernel (1.1x), and a burst of more new connections than that waits for the client's SYN retry
    accept_backlog: int = 16
    client_strikes: int = (
        16  # refusals of one client address (4xx, pipelining, unread, slow head) ...
    )
    client_penalty_s: float = (
        10.0  # ... within this long hold its new connections unread for this long
    )

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
        """The ``Host`` names a server bound to ``bind`` answers (:func:`workbench_serve.hosts.allowed_hosts`,
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
    "client_penalty_s": "client-penalty",
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
