"""The Locust engine's own messages: sealed with the run's secret, bounded, decoded once.

Locust's master/worker channel (ZeroMQ, msgpack) has no authentication: any
process that reaches the master's port can join it as a worker, and a worker
obeys whatever master it reaches. The workbench's messages ride on it sealed:

- master and workers share a secret (:data:`SECRET_ENV`; ``load`` makes one
  per run for the workers it starts, a user sets the same one on each machine
  for workers started elsewhere);
- a worker joins with ``wb_hello``: a fresh nonce and an HMAC-SHA256 of it
  under the secret; the master sends plans only to workers whose hello holds;
- every later message is an envelope ``[master nonce, seq, body, mac]``: the
  HMAC covers the direction, the message kind, the worker, both nonces and a
  counter that must grow by one, so a message is not forged, replayed,
  reflected or taken to another worker or run;
- a body is msgpack of plain values, decoded where it arrives (:func:`decoded_rows`),
  and no message may exceed :data:`MAX_MESSAGE_BYTES` (to the master) or
  :data:`MAX_PLAN_BYTES` (to a worker): ZeroMQ drops the connection of a peer
  that sends more.

Nothing here imports Locust.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from typing import Any

import msgpack

from workbench.errors import ConfigError

SECRET_ENV = "WORKBENCH_LOCUST_SECRET"
MIN_SECRET_CHARS = 16
MAX_MESSAGE_BYTES = 16 * 2**20  # any message a worker sends the master
MAX_PLAN_BYTES = 256 * 2**20  # a worker's share of the plan, bodies included
ROWS_PER_MESSAGE = (
    500  # rows of one wb_results message (each at most ~10 KiB: see the limits below)
)
MAX_HEADER_CHARS = 2048  # a kept response header's value
MAX_BODY_BYTES = 4096  # a failed response's body (its error is read from the start)
MAX_TEXT_CHARS = 1000  # each part of a request's error
MAX_NS = 2**62
# unit receive times kept per request of an event stream (the first ones; 9 KiB a row at most)
MAX_UNITS = 1024


class BadMessage(ValueError):
    """A message that is not sealed by this run's secret, or whose body does not decode."""


def new_secret() -> str:
    return secrets.token_hex(32)


def secret_from_env(where: str) -> bytes:
    """The run's secret from :data:`SECRET_ENV`; a ConfigError naming ``where`` it is needed without it."""
    secret = os.environ.get(SECRET_ENV, "")
    if len(secret) < MIN_SECRET_CHARS:
        raise ConfigError(
            f"{where} needs {SECRET_ENV}: the same secret of at least {MIN_SECRET_CHARS} characters "
            "on the load machine and on each worker's (e.g. openssl rand -hex 32)"
        )
    return secret.encode()


def hello(secret: bytes, node: str, worker_nonce: str) -> list:
    """A worker's ``wb_hello``: its nonce and the MAC that proves it holds the secret."""
    return [worker_nonce, _mac(secret, f"hello|{node}|{worker_nonce}".encode())]


def opened_hello(secret: bytes, node: str, data: Any) -> str:
    """The worker nonce of a ``wb_hello`` whose MAC holds (else :class:`BadMessage`)."""
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], str)):
        raise BadMessage("a wb_hello that is not [nonce, mac]")
    nonce, mac = data
    if not (32 <= len(nonce) <= 64 and isinstance(mac, bytes)):
        raise BadMessage("a wb_hello that is not [nonce, mac]")
    if not hmac.compare_digest(mac, _mac(secret, f"hello|{node}|{nonce}".encode())):
        raise BadMessage("a wb_hello not sealed with this run's secret")
    return nonce


class Channel:
    """One worker's sealed link with its master, seen from ``side`` (``"master"`` or ``"worker"``).

    ``master_nonce`` is None on a worker until the first sealed message from its master sets it.
    """

    def __init__(
        self, secret: bytes, node: str, worker_nonce: str, master_nonce: str | None, side: str
    ):
        self.secret, self.node, self.worker_nonce = secret, node, worker_nonce
        self.master_nonce, self.side = master_nonce, side
        self.sent = self.received = 0

    def seal(self, kind: str, obj: Any) -> list:
        body = msgpack.packb(obj, use_bin_type=True)
        self.sent += 1
        direction = "m2w" if self.side == "master" else "w2m"
        return [self.master_nonce, self.sent, body, self._mac(direction, kind, self.sent, body)]

    def open(self, kind: str, data: Any) -> Any:
        """The body of a sealed message of ``kind`` from the other side (else :class:`BadMessage`)."""
        if not (isinstance(data, list) and len(data) == 4):
            raise BadMessage(f"a {kind} that is not a sealed envelope")
        nonce, seq, body, mac = data
        if not (isinstance(nonce, str) and isinstance(body, bytes) and isinstance(mac, bytes)):
            raise BadMessage(f"a {kind} that is not a sealed envelope")
        if self.master_nonce is not None and nonce != self.master_nonce:
            raise BadMessage(f"a {kind} from another master or run")
        direction = "w2m" if self.side == "master" else "m2w"
        if seq != self.received + 1 or not hmac.compare_digest(
            mac, self._mac(direction, kind, seq, body, nonce)
        ):
            raise BadMessage(f"a {kind} not sealed with this run's secret (or out of sequence)")
        try:
            obj = msgpack.unpackb(body, raw=False, strict_map_key=True)
        except (ValueError, TypeError, msgpack.exceptions.ExtraData) as exc:
            raise BadMessage(f"a {kind} whose body does not decode ({exc})") from None
        self.received, self.master_nonce = seq, nonce
        return obj

    def _mac(self, direction: str, kind: str, seq: int, body: bytes, nonce=None) -> bytes:
        nonce = nonce if nonce is not None else self.master_nonce
        context = f"{direction}|{kind}|{self.node}|{self.worker_nonce}|{nonce}|{seq}|"
        return _mac(self.secret, context.encode() + body)


def _mac(secret: bytes, data: bytes) -> bytes:
    return hmac.new(secret, data, hashlib.sha256).digest()


def decoded_rows(rows: Any, share: dict[int, int], kept_headers: tuple[str, ...]) -> list[tuple]:
    """A worker's ``wb_results`` rows as typed tuples, each request of ``share`` (k -> due offset) at
    most once; :class:`BadMessage` naming the first row that does not fit.

    A row: ``[k, due_ns, sent_ns, done_ns, status, headers, body, error, units]`` (offsets from the
    worker's origin; status None with ``error`` ``[stage, type, message]`` for a request that got no
    response; ``units``: when each unit of an event stream arrived, at most :data:`MAX_UNITS`, in order
    between send and end, also those of a request whose stream was cut).
    """
    if not isinstance(rows, list):
        raise BadMessage("wb_results rows that are not a list")
    out, seen = [], set()
    for row in rows:
        if not (isinstance(row, list) and len(row) == 9):
            raise BadMessage(f"a row that is not 9 values: {str(row)[:80]}")
        k, due, sent, done, status, headers, body, error, units = row
        if not (_int(k) and k in share and k not in seen and due == share[k]):
            raise BadMessage(f"a row for request {str(k)[:20]} that is not this worker's, or twice")
        if not (_int(sent) and _int(done) and -MAX_NS < sent <= done < MAX_NS):
            raise BadMessage(f"request {k}: send and end offsets {sent!r}, {done!r} out of order")
        if not (_headers(headers, kept_headers) and isinstance(body, bytes)):
            raise BadMessage(f"request {k}: headers or body that do not decode")
        if len(body) > MAX_BODY_BYTES or not _outcome(status, error):
            raise BadMessage(f"request {k}: a status, body or error out of range")
        if not _units(units, sent, done):
            raise BadMessage(f"request {k}: unit times that are not in order between send and end")
        seen.add(k)
        error = tuple(error) if error else None
        out.append((k, due, sent, done, status, headers, body, error, units))
    return out


def decoded_progress(items: Any, limit: int) -> list[tuple[int, int, int, bool]]:
    """A worker's ``wb_progress``: at most ``limit`` ``[due, sent, end to end, ok]``."""
    if not (isinstance(items, list) and len(items) <= limit):
        raise BadMessage("wb_progress that is not a list of at most the worker's requests")
    for item in items:
        if not (isinstance(item, list) and len(item) == 4 and all(map(_int, item[:3]))):
            raise BadMessage(
                f"a wb_progress item that is not [due, sent, dur, ok]: {str(item)[:80]}"
            )
        if not (0 <= item[0] < MAX_NS and -MAX_NS < item[1] < MAX_NS and 0 <= item[2] < MAX_NS):
            raise BadMessage(f"a wb_progress item out of range: {str(item)[:80]}")
        if not isinstance(item[3], bool):
            raise BadMessage(f"a wb_progress item whose ok is not true or false: {str(item)[:80]}")
    return [tuple(item) for item in items]


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _units(units: Any, sent: int, done: int) -> bool:
    if not (isinstance(units, list) and len(units) <= MAX_UNITS and all(map(_int, units))):
        return False
    return all(a <= b for a, b in zip([sent, *units], [*units, done]))


def _headers(headers: Any, kept: tuple[str, ...]) -> bool:
    return isinstance(headers, dict) and all(
        k in kept and isinstance(v, str) and len(v) <= MAX_HEADER_CHARS for k, v in headers.items()
    )


def _outcome(status: Any, error: Any) -> bool:
    if status is not None:
        return _int(status) and 0 <= status <= 999 and error is None
    return (
        isinstance(error, list)
        and len(error) == 3
        and all(isinstance(e, str) and len(e) <= MAX_TEXT_CHARS for e in error)
    )
