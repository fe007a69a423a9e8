"""The open-loop HTTP load generator of ``workbench load --url``: asyncio in its own process.

Each request is sent at its scheduled time whatever the earlier ones are
doing (open loop). Where the generator's time goes, and what keeps it on
schedule (generator lag p99 under 1 ms up to 1,000 req/s on a 2-core machine
with the server on it):

- Sockets: :mod:`workbench_serve.http1`, a keep-alive HTTP/1.1 client on
  asyncio protocols (aiohttp spent about 2.5 times the CPU per request: see
  there). ``Server-Timing`` and the other values are parsed after the run.
- Timing: a chain of timer callbacks, no task per request; each wakes
  ``spin_ns`` (100 us) before the send is due and spins on the clock for
  the rest, so the loop's wake-up latency (about 0.1 ms: the kernel's 50 us
  timer slack for a normal thread, then the loop) is not lag. Measured on
  the quiet 2-core machine at 1,000 req/s, lag p50 / p99: no spin 0.10 /
  0.51 ms, 100 us 0.007 / 0.13 ms, 200 us 0.007 / 0.47 ms (a longer spin
  holds the loop's reads back and costs CPU). Before the pool parses a
  read, it sends what has fallen due, so a burst of responses (a batch
  answered at once) never holds a send back. The loop uses ``select()``,
  whose timeout is in microseconds (epoll's is in whole milliseconds, late
  by up to 1 ms).
- The garbage collector is frozen and paused during the schedule (a
  collection is a pause of the generator).
- What is left is the machine: when other processes are runnable, the
  kernel may run one of them for a time slice (3-4 ms seen here) while a
  send is due. That lag is measured and flagged, never hidden.

A request's lag is when its bytes were handed to the socket minus when it
was due (ns): a wait for a free connection of the pool (``connections``) or
for a new connection is inside it, so a client out of sockets shows as lag,
never as server latency (``pool_wait_ns`` says how much of it). Its end to
end runs from that send to the whole response read. The ``Server-Timing``
of each response is kept as it came (see :mod:`workbench_serve.protocol`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import selectors
import signal
import ssl
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlparse

import numpy as np

from workbench.batching.policy import BatchPolicy
from workbench.errors import ConfigError, note_terminated
from workbench.record import Config
from workbench.record.sections import MetaError
from workbench.units import ns_to_s, s_to_ns
from .http1 import BadResponse, Pool, Response, ServerDisconnected, request_bytes
from .sse import END, BadEvent, StreamIncomplete, decoded_end
from .protocol import (
    BATCH_HEADER,
    BATCH_SIZE_HEADER,
    CACHE_HIT_HEADER,
    MAX_METRICS,
    REQUEST_ID_HEADER,
    TIMING_HEADER,
    parse_server_timing,
)

# wake this early and spin on the clock to the send time (see the module docstring)
SPIN_NS = 100_000
SETTLE_NS = 2_000_000  # the first send is due this long after the schedule starts
# after Ctrl-C, what the requests in flight get to finish before they are abandoned
INTERRUPT_GRACE_S = 2.0
PRECONNECT = 16  # connections opened before the schedule (up to ``connections``)


@dataclass
class Result:
    """One request as the client saw it (clock readings in ns).

    ``sent_ns``: its bytes handed to the socket (for a request that never went
    out, when it failed); lag = ``sent_ns - due_ns``, of which ``pool_wait_ns``
    was spent waiting for a connection. ``done_ns``: the whole response read.
    """

    request_id: str
    due_ns: int
    sent_ns: int
    done_ns: int
    status: int | None = None
    error: tuple[str, str, str] | None = None
    server_stages: list[tuple[str, int]] = field(default_factory=list)
    server_total_ns: int | None = None
    batch: int = -1
    batch_size: int = 1
    pool_wait_ns: int = 0
    cache_hit: float | None = None
    # when each unit of an event stream was received (:mod:`workbench_serve.sse`), also of a
    # request whose stream was cut; empty for a plain response
    unit_ns: list[int] = field(default_factory=list)


@dataclass
class Drive:
    """What one load run sent: the results in schedule order and each request's lag (ns)."""

    results: list[Result]
    lags_ns: np.ndarray
    origin_ns: int
    server_before: dict | None
    server_after: dict | None
    # Ctrl-C stopped the schedule: ``results`` are the requests sent before it
    interrupted: bool = False
    # what the run should say of itself (a Locust worker that failed)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """Where requests go: ``host``, ``port``, TLS or not, the ``Host`` header and the path prefix of ``url``."""

    host: str
    port: int
    tls: bool
    authority: str
    base: str

    @classmethod
    def from_url(cls, url: str) -> "Target":
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConfigError(f"--url {url!r}: expected http://HOST:PORT")
        try:
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
        except ValueError:
            raise ConfigError(f"--url {url!r}: the port is not a number from 0 to 65535") from None
        return cls(
            parsed.hostname,
            port,
            parsed.scheme == "https",
            parsed.netloc.rpartition("@")[2],
            parsed.path.rstrip("/"),
        )

    def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> bytes:
        return request_bytes(method, self.base + path, self.authority, headers or {}, body)


def drive(
    url: str,
    payloads: list[bytes],
    schedule_ns: np.ndarray,
    *,
    tag: str = "wb",
    warmup: int = 5,
    connections: int = 256,
    timeout_s: float = 30.0,
    clock=time.perf_counter_ns,
    spin_ns: int = SPIN_NS,
    watch=None,
) -> Drive:
    """Send ``payloads[k % len]`` to ``url + '/predict'`` at ``schedule_ns[k]`` after the start; wait for all.

    watch: a :class:`workbench.analysis.windows.StabilityWatch` (a sweep point): asked before each
    send, it stops the schedule at the window boundary where the point is stable; the requests in
    flight then finish and are the run's last (``watch.windows_run`` says how many windows were sent).
    """
    if not payloads:
        raise ConfigError("no request bodies to send")
    target = Target.from_url(url)
    timeout_ns = s_to_ns(timeout_s)

    async def run() -> Drive:
        pool = Pool(target.host, target.port, limit=connections, clock=clock, tls=target.tls)
        watchdog = Watchdog(pool, timeout_ns)
        try:
            before = await _health(pool, target, url)
            await _warm_up(pool, target, url, payloads, warmup)
            # best effort: more open on demand
            await pool.connect(min(connections, PRECONNECT) - pool.open_count)
            schedule = Schedule(
                pool, target, payloads, schedule_ns.tolist(), tag, clock, spin_ns, watch
            )
            await schedule.run()
            try:  # a server that went silent must not hold the run (or a Ctrl-C) for the whole --timeout
                after = await asyncio.wait_for(
                    _health(pool, target, url, after_run=True), min(ns_to_s(timeout_ns), 2.0)
                )
            except asyncio.TimeoutError:
                after = None
        finally:
            watchdog.cancel()
            await pool.close()
        results = [schedule.result(k) for k in range(schedule.limit)]
        lags = np.array([r.sent_ns - r.due_ns for r in results], dtype=np.int64).clip(min=0)
        return Drive(results, lags, schedule.origin_ns, before, after, schedule.interrupted)

    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


class Schedule:
    """The open-loop send schedule: a chain of timer callbacks; what each request got back, by index."""

    def __init__(
        self,
        pool: Pool,
        target: Target,
        payloads: list[bytes],
        offsets_ns: list[int],
        tag: str,
        clock,
        spin_ns: int,
        watch=None,
    ) -> None:
        self.pool, self.clock, self.spin_ns, self.tag, self.watch = pool, clock, spin_ns, tag, watch
        self.offsets, self.n = offsets_ns, len(offsets_ns)
        self.prefix = (
            f"POST {target.base}/predict HTTP/1.1\r\nHost: {target.authority}\r\n"
            f"Content-Type: application/octet-stream\r\n{REQUEST_ID_HEADER}: "
        ).encode("latin-1")
        self.tails = [b"\r\nContent-Length: %d\r\n\r\n" % len(p) + p for p in payloads]
        self.sent: list[int | None] = [None] * self.n
        self.queued: list[int | None] = [None] * self.n
        self.outcome: list[Any] = [None] * self.n
        self.events: list[Any] = [()] * self.n
        self.ended = [0] * self.n
        self.origin_ns, self.k, self.pending = 0, 0, self.n
        # how many are sent; Ctrl-C or the watch lowers it to those sent so far
        self.limit, self.interrupted = self.n, False

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self.finished = loop.create_future()
        self.call_later = loop.call_later
        self._loop = loop
        gc_was = gc.isenabled()
        gc.collect()
        gc.freeze()  # the objects made so far are never scanned again
        gc.disable()
        handles_sigint = _catch_sigint(loop, self.interrupt)
        try:
            self.origin_ns = self.clock() + SETTLE_NS
            if self.n:
                self.pool.before_read = self._send_due
                self._fire()
                await self.finished
        finally:
            if handles_sigint and not self.interrupted:
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)
            self.pool.before_read = None
            gc.unfreeze()
            if gc_was:
                gc.enable()

    def interrupt(self) -> None:
        """Ctrl-C (first): send nothing more; the requests in flight get :data:`INTERRUPT_GRACE_S` more
        (or their timeout, if sooner) to finish, then fail as ``Abandoned``: the run is saved either way.

        The handler is removed, so a second Ctrl-C raises ``KeyboardInterrupt`` and abandons the run.
        """
        self._loop.remove_signal_handler(signal.SIGINT)
        self._loop.remove_signal_handler(signal.SIGTERM)
        self.interrupted = True
        self._stop_here()
        self._loop.call_later(
            INTERRUPT_GRACE_S,
            self.pool.abandon,
            f"no response within {INTERRUPT_GRACE_S:g} s of Ctrl-C",
        )

    def _fire(self) -> None:
        """Send every request that is due (spinning through the last ``spin_ns``); re-arm for the next one."""
        clock, offsets, origin = self.clock, self.offsets, self.origin_ns
        while self.k < self.limit:
            due = origin + offsets[self.k]
            now = clock()
            if due - now > self.spin_ns:
                self.call_later(ns_to_s(due - now - self.spin_ns), self._fire)
                return
            while now < due:
                now = clock()
            self._submit_next()

    def _send_due(self) -> None:
        """Send the requests already due, no spin (the pool calls this before it parses each read)."""
        clock, offsets, origin = self.clock, self.offsets, self.origin_ns
        while self.k < self.limit and origin + offsets[self.k] <= clock():
            self._submit_next()

    def _stop_here(self) -> None:
        """Send nothing more (Ctrl-C, or the watch found the point stable); what is in flight finishes."""
        self.pending -= self.limit - self.k
        self.limit = self.k
        self._finish_if_done()

    def _finish_if_done(self) -> None:
        if self.pending == 0 and not self.finished.done():
            self.finished.set_result(None)

    def _submit_next(self) -> None:
        """Send request ``k`` (unless the watch stops the schedule before it)."""
        k = self.k
        if self.watch is not None:
            if self.watch.stop(self.offsets[k]):
                return self._stop_here()
            self.watch.sent(self.offsets[k])
        data = self.prefix + f"{self.tag}-{k}".encode() + self.tails[k % len(self.tails)]
        if self.pool.submit(data, partial(self._done, k)) is None:
            self.queued[k] = self.clock()
        self.k += 1

    def _done(self, k: int, sent_ns: int | None, outcome, events=()) -> None:
        self.sent[k], self.outcome[k], self.ended[k] = sent_ns, outcome, self.clock()
        self.events[k] = events
        if (
            self.watch is not None
        ):  # filed as client_tables files it: from the due time, ok on a 200
            response = isinstance(outcome, Response)
            sent = sent_ns if sent_ns is not None else self.ended[k]
            end = outcome.done_ns if response else self.ended[k]
            due = self.offsets[k]
            late = max(0, sent - self.origin_ns - due)
            self.watch.finished(due, due, end - sent + late, response and outcome.status == 200)
        self.pending -= 1
        self._finish_if_done()

    def result(self, k: int) -> Result:
        """Request ``k`` as a :class:`Result` (headers parsed here, after the run)."""
        due = self.origin_ns + self.offsets[k]
        outcome, sent, queued = self.outcome[k], self.sent[k], self.queued[k]
        if sent is None:  # never went out: it waited for a connection until it failed
            sent = self.ended[k]
        rid = f"{self.tag}-{k}"
        if isinstance(outcome, Response) and outcome.events is not None:
            result = streamed_result(rid, due, sent, outcome.done_ns, outcome.events)
        elif isinstance(outcome, Response):
            r = outcome
            result = response_result(rid, due, sent, r.done_ns, r.status, r.headers, r.body)
        else:
            error = ("network", type(outcome).__name__, str(outcome) or repr(outcome))
            result = Result(rid, due, sent, self.ended[k], None, error)
            result.unit_ns = [at for at, name, _ in self.events[k] if name != END]
        result.pool_wait_ns = sent - queued if queued is not None else 0
        return result


def _catch_sigint(loop, handler) -> bool:
    """Route SIGINT, and SIGTERM (noted: the command exits 143), to ``handler`` on ``loop`` (False where that is
    impossible: not the main thread)."""

    def on_sigterm() -> None:
        note_terminated()
        handler()

    try:
        loop.add_signal_handler(signal.SIGINT, handler)
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (RuntimeError, ValueError, NotImplementedError):
        return False
    return True


class Watchdog:
    """Every quarter of the timeout (at most 250 ms), fail the pool's requests older than the timeout."""

    def __init__(self, pool: Pool, timeout_ns: int) -> None:
        self.pool, self.timeout_ns = pool, timeout_ns
        self.every_s = min(timeout_ns / 4e9, 0.25)
        self.loop = asyncio.get_running_loop()
        self.handle = self.loop.call_later(self.every_s, self._tick)

    def _tick(self) -> None:
        self.pool.expire(self.timeout_ns)
        self.handle = self.loop.call_later(self.every_s, self._tick)

    def cancel(self) -> None:
        self.handle.cancel()


def _read_headers(result: Result, headers: dict[str, str]) -> None:
    try:
        result.server_stages, result.server_total_ns = parse_server_timing(
            headers.get(TIMING_HEADER.lower())
        )
    except ValueError as exc:
        result.error = ("network", "BadServerTiming", str(exc))
    try:
        result.batch = _bounded_int(headers, BATCH_HEADER, -1, -1, 2**53)
        result.batch_size = _bounded_int(headers, BATCH_SIZE_HEADER, 1, 1, 2**31)
        hit = headers.get(CACHE_HIT_HEADER.lower())
        result.cache_hit = float(hit[:40]) if hit is not None else None
        if result.cache_hit is not None and not 0.0 <= result.cache_hit <= 1.0:
            raise ValueError(f"{CACHE_HIT_HEADER} {hit[:40]!r} is not a fraction from 0 to 1")
    except ValueError as exc:
        result.batch, result.batch_size, result.cache_hit = -1, 1, None
        result.error = ("network", "BadHeader", str(exc))
    if result.error is not None and result.error[1] in ("BadServerTiming", "BadHeader"):
        result.server_stages, result.server_total_ns = [], None  # kept out of the joined budget


def _bounded_int(headers: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    text = headers.get(name.lower())
    if text is None:
        return default
    text = text.strip()
    if (
        not (text.lstrip("-").isascii() and text.lstrip("-").isdigit())
        or len(text) > 20
        or not low <= int(text) <= high
    ):
        raise ValueError(f"{name} {text[:40]!r} is not a whole number from {low} to {high}")
    return int(text)


def _http_error(status: int, body: bytes) -> tuple[str, str, str]:
    """(stage, type, message) of a non-200 reply: the stage the server named, else ``server``."""
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and "stage" in obj:
        return str(obj["stage"]), str(obj.get("type", f"HTTP{status}")), str(obj.get("error", ""))
    return "server", f"HTTP{status}", body[:200].decode(errors="replace")


def _unreachable(url: str, exc: BaseException) -> ConfigError:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ConfigError(
            f"--url {url}: the server's TLS certificate was not accepted ({exc.verify_message}); "
            "a server whose certificate comes from a private CA is trusted with "
            "SSL_CERT_FILE=/path/to/ca.pem"
        )
    if isinstance(exc, ssl.SSLError):
        return ConfigError(
            f"--url {url}: the TLS handshake failed ({exc.reason or exc}); is it an https server?"
        )
    return ConfigError(
        f"--url {url}: cannot connect ({exc}); is the server running "
        f"(python -m workbench serve ...) and is the address right?"
    )


async def _warm_up(pool: Pool, target: Target, url: str, payloads: list[bytes], n: int) -> None:
    """A few requests in sequence before the schedule (connection set up, server paths warm).

    An unreachable or broken server is a ConfigError here, before any timing.
    """
    for k in range(n):
        try:
            await pool.fetch(target.request("POST", "/predict", payloads[k % len(payloads)]))
        except TimeoutError:
            raise ConfigError(
                f"--url {url}: no answer to a warm-up request within the timeout"
            ) from None
        except ServerDisconnected as exc:
            raise ConfigError(f"--url {url}: {exc} (a warm-up request)") from None
        except BadResponse as exc:
            raise ConfigError(f"--url {url}: not an HTTP/1.x server ({exc})") from None
        except OSError as exc:
            raise _unreachable(url, exc) from None


async def _health(pool: Pool, target: Target, url: str, after_run: bool = False) -> dict | None:
    """``GET /healthz`` of a workbench server (its CPU time), or None for another server.

    Before the run an unreachable server is a ConfigError; after it (the
    server stopped mid-run) it is None: the requests answered so far are
    the run, and the rest are its failures.
    """
    try:
        resp = await pool.fetch(target.request("GET", "/healthz"))
    except (TimeoutError, ServerDisconnected, BadResponse):
        return None
    except OSError as exc:
        if after_run:
            return None
        raise _unreachable(url, exc) from None
    return decoded_health(resp.body) if resp.status == 200 else None


def decoded_health(body: bytes) -> dict | None:
    """A workbench server's ``/healthz`` (None for another server), each value decoded with its range.

    Keys: ``cpu_s``, ``stages``, ``pipeline``, ``stream`` (a streaming pipeline's streaming stage),
    ``config``, ``policy`` where present and valid;
    ``notes``: one line per value left out (the server's answer is data, not a fact to trust).
    """
    try:
        obj = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    out, notes = {}, []
    for key, (decode, wanted) in HEALTH_FIELDS.items():
        value = decode(obj[key]) if key in obj else None
        if value is not None:
            out[key] = value
        elif key in obj:
            notes.append(f"/healthz {key} {json.dumps(obj[key])[:60]} is not {wanted}: left out")
    return out | {"notes": notes}


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _seconds(value) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1e9
    return float(value) if ok else None


def _name(value) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


def _stage_list(value) -> list[str] | None:
    ok = isinstance(value, list) and len(value) <= MAX_METRICS
    ok = ok and all(isinstance(v, str) and 0 < len(v) <= 200 for v in value)
    return value if ok and len(set(value)) == len(value) else None


def _config(value) -> dict | None:
    try:
        return Config.from_dict(value).to_dict()
    except MetaError:
        return None


def _policy(value) -> dict | None:
    keys = ("max_batch_size", "max_wait_ms", "concurrency")
    try:
        return BatchPolicy(*(value[k] for k in keys)).params()
    except (TypeError, KeyError, ConfigError):
        return None


# each /healthz value the client reads: its decoder (None: does not fit) and what it should be
HEALTH_FIELDS = {
    "cpu_s": (_seconds, "a number of seconds from 0 to 1e9"),
    "stages": (_stage_list, "a list of distinct stage names"),
    "pipeline": (_name, "a name"),
    "stream": (_name, "a stage name"),
    "config": (_config, "a pipeline config"),
    "policy": (_policy, "a batching policy"),
}


def summary_of_server(drive_: Drive) -> dict[str, Any]:
    """The server's CPU seconds during the run, from its ``/healthz`` before and after (None if not a
    workbench server, or its CPU time went backwards: a restarted server)."""
    b, a = drive_.server_before or {}, drive_.server_after or {}
    if "cpu_s" not in b or "cpu_s" not in a or a["cpu_s"] < b["cpu_s"]:
        return {"server_cpu_s": None}
    return {"server_cpu_s": round(a["cpu_s"] - b["cpu_s"], 4)}


def streamed_result(
    request_id: str, due_ns: int, sent_ns: int, done_ns: int, events: list[tuple[int, str, str]]
) -> Result:
    """A :class:`Result` of an event-stream response (:mod:`workbench_serve.sse`): its units' receive
    times, then its ``end`` event read as a plain response's status, headers and body. A stream that
    ended without an ``end`` event failed (``StreamIncomplete``); its units are kept."""
    units = [at for at, name, _ in events if name != END]
    ends = [data for _, name, data in events if name == END]
    try:
        if not ends:
            raise StreamIncomplete(
                f"the stream ended after {len(units)} units without its end event"
            )
        status, headers, body = decoded_end(ends[-1])
    except BadEvent as exc:
        error = ("network", type(exc).__name__, str(exc))
        result = Result(request_id, due_ns, sent_ns, done_ns, None, error)
    else:
        result = response_result(request_id, due_ns, sent_ns, done_ns, status, headers, body)
    result.unit_ns = units
    return result


def response_result(
    request_id: str,
    due_ns: int,
    sent_ns: int,
    done_ns: int,
    status: int | None,
    headers: dict[str, str],
    body: bytes,
    error: tuple[str, str, str] | None = None,
    units: list[int] | None = None,
) -> Result:
    """A :class:`Result` of a request another client sent (the Locust engine), read as this client reads one.

    ``headers``: lower-case names; ``error``: (stage, type, message) of a request that got no response;
    ``units``: when each unit of its event stream arrived (the headers, status and body then those of
    its ``end`` event, :func:`workbench_serve.sse.decoded_end`).
    """
    result = _response_result(request_id, due_ns, sent_ns, done_ns, status, headers, body, error)
    result.unit_ns = list(units or ())
    return result


def _response_result(
    request_id: str,
    due_ns: int,
    sent_ns: int,
    done_ns: int,
    status: int | None,
    headers: dict[str, str],
    body: bytes,
    error: tuple[str, str, str] | None,
) -> Result:
    if status is not None and not 100 <= status <= 599:
        error, status = (
            ("network", "BadResponse", f"HTTP status {status} is not from 100 to 599"),
            None,
        )
    if status is None:
        return Result(request_id, due_ns, sent_ns, done_ns, None, error)
    result = Result(request_id, due_ns, sent_ns, done_ns, status)
    _read_headers(result, headers)
    if status != 200:
        result.error = _http_error(status, body)
    return result
