"""The Locust side of ``load --url --engine locust``: Locust's own master and workers, headless.

Importing this module imports Locust, which monkey-patches the process for
gevent: only the master and worker processes import it (``python -m
workbench_serve.locust_engine master ...``, ``python -m workbench
locust-worker --master HOST``), never the process that runs ``load``.

The protocol, over Locust's master/worker channel (custom messages, each
sealed with the run's secret and decoded where it arrives: see
:mod:`workbench_serve.locust_wire`; this process's Locust sockets are
bounded and strict, see :func:`~workbench_serve.locust_guard.guard_rpc`):

1. each worker says ``wb_hello`` (its nonce, proved with the secret); the
   master waits for ``expect`` such workers, then sends worker ``i`` its
   share of the workbench's plan (``wb_plan``): the URL, the request bodies,
   the request-id tag, and the requests ``k`` with ``k % workers == i`` with
   their send offsets (the workbench's arrival process, drawn once in the
   ``load`` process);
2. each worker opens its connections, sends its warm-up requests, answers
   ``wb_ready``;
3. the master sends one start time on the wall clock (``wb_start``); each
   worker turns it into its own ``perf_counter_ns`` origin and sends every
   request of its share at origin + offset, each on its own greenlet (open
   loop), with ``X-Request-Id: TAG-k``;
4. each worker returns one row per request (``wb_results``): offsets of due,
   send and end (ns from the origin), HTTP status, the headers the workbench
   reads, the body of a failed response, or the error of one that got none.
   Each request is also fired as Locust's ``request`` event (Locust's own
   statistics see it).

A sweep point's plan carries its stability rule (``watch``: window, percent,
at most how many windows). Then each worker also reports, every
``POLL_S``, the requests that finished (``wb_progress``: due and send offsets,
end to end, ok); the master keeps a
:class:`~workbench.analysis.windows.StabilityWatch` over the whole schedule
and, once the last three windows agree, tells every worker to send nothing
more (``wb_stop``); what is in flight finishes and is returned as in step 4.

A worker that stops (Locust's heartbeat), is late or sends what does not
decode fails alone: its requests are written as lost, with the reason.

The master writes the rows to a file for the ``load`` process, which joins
them into a ``served`` run exactly as ``load --url`` does
(:mod:`workbench_serve.locust_drive`). Workers on other machines share
the wall clock through NTP: their offsets are as good as that sync.
"""

from __future__ import annotations

import argparse
import pickle
import secrets
import sys
import time
from functools import partial
from urllib.parse import urlparse

import gevent
from geventhttpclient import HTTPClient
from locust.env import Environment

from locust.runners import STATE_MISSING

from workbench.errors import ConfigError
from .locust_drive import READY_LINE
from .locust_guard import guard_rpc
from .locust_wire import (
    MAX_BODY_BYTES,
    MAX_HEADER_CHARS,
    MAX_PLAN_BYTES,
    MAX_TEXT_CHARS,
    MAX_UNITS,
    ROWS_PER_MESSAGE,
    SECRET_ENV,
    BadMessage,
    Channel,
    decoded_progress,
    decoded_rows,
    hello,
    opened_hello,
    secret_from_env,
)
from workbench.units import ns_to_ms, ns_to_s
from .protocol import (
    BATCH_HEADER,
    BATCH_SIZE_HEADER,
    CACHE_HIT_HEADER,
    REQUEST_ID_HEADER,
    TIMING_HEADER,
)
from .sse import END, SSE_TYPE, Decoder, StreamIncomplete, decoded_end
from workbench.analysis.windows import StabilityWatch

KEPT_HEADERS = tuple(
    h.lower()
    for h in (TIMING_HEADER, BATCH_HEADER, BATCH_SIZE_HEADER, CACHE_HIT_HEADER, REQUEST_ID_HEADER)
)
# the start time is this far ahead of the master's clock (messages, clock reads)
START_LEAD_NS = 500_000_000
POLL_S = 0.05
CONNECTIONS = 256
OCTETS = {"Content-Type": "application/octet-stream"}


def run_master(
    plan_file: str,
    results_file: str,
    bind_host: str,
    port: int,
    expect: int,
    connect_timeout_s: float,
) -> int:
    """Serve one plan to ``expect`` workers and write their rows to ``results_file``; 0, or 2 with one line.

    A worker that dies, stalls or sends what does not decode fails alone: its requests are written
    as lost with the reason, the others' rows are kept. Exit 2 only when no worker could be started.
    """
    try:
        secret = secret_from_env("the Locust master")
    except ConfigError as exc:
        return _fail(str(exc))
    with open(plan_file, "rb") as f:
        plan = pickle.load(f)
    guard_rpc()
    env = Environment(user_classes=[])
    runner = env.create_master_runner(master_bind_host=bind_host, master_bind_port=port)
    master = Master(runner, plan, secret)
    print(f"{READY_LINE} {port}", flush=True)
    try:
        if _wait(lambda: len(master.channels) >= expect, connect_timeout_s) is None:
            return _fail(
                f"{len(master.channels)} of {expect} Locust workers connected within "
                f"{connect_timeout_s:g} s (start them with: {SECRET_ENV}=... python -m workbench "
                f"locust-worker --master HOST --master-port {port})"
            )
        too_big = master.send_plans(list(master.channels)[:expect])
        if too_big:
            return _fail(too_big)
        warm_s = plan["timeout_s"] * (plan["warmup"] + 1) + 30
        master.wait_all(master.ready, warm_s, f"did not finish its warm-up within {warm_s:g} s")
        if not master.active():
            return _fail(f"no Locust worker finished its warm-up: {'; '.join(master.notes())}")
        start_wall_ns = time.time_ns() + START_LEAD_NS
        master.start(start_wall_ns)
        span_s = ns_to_s(max(plan["offsets_ns"], default=0)) + plan["timeout_s"] + 60
        master.wait_all(
            master.done, span_s, f"did not return its requests within {span_s:g} s", start_wall_ns
        )
        with open(results_file, "wb") as f:
            pickle.dump(master.results(), f)
        return 0
    finally:
        runner.quit()


class Master:
    """What the master knows of each worker: its sealed channel, share, state, rows or why it failed."""

    def __init__(self, runner, plan: dict, secret: bytes) -> None:
        self.runner, self.plan, self.secret = runner, plan, secret
        self.nonce = secrets.token_hex(16)
        self.channels: dict[
            str, Channel
        ] = {}  # workers whose wb_hello held, in the order they came
        self.shares: dict[str, dict] = {}
        self.ready, self.done, self.failed = set(), set(), {}
        self.rows: dict[str, list] = {}
        self.ignored = 0  # messages from processes that are not this run's workers
        self.watch = _watch(plan)
        self.stopped = False
        runner.register_message("wb_hello", self.on_hello)
        for kind in ("wb_ready", "wb_progress", "wb_results"):
            runner.register_message(kind, partial(self.on_sealed, kind))

    def on_hello(self, environment, msg, **kw) -> None:
        if msg.node_id in self.channels or self.shares:
            return  # once each, and nobody joins once the plans are out
        try:
            worker_nonce = opened_hello(self.secret, msg.node_id, msg.data)
        except BadMessage:
            self.ignored += 1
            return
        self.channels[msg.node_id] = Channel(
            self.secret, msg.node_id, worker_nonce, self.nonce, "master"
        )

    def on_sealed(self, kind: str, environment, msg, **kw) -> None:
        node = msg.node_id
        if node not in self.shares:
            self.ignored += 1
            return
        if node in self.failed or node in self.done:
            return
        try:
            body = self.channels[node].open(kind, msg.data)
            if kind == "wb_ready":
                self.ready.add(node)
            elif kind == "wb_progress":
                for item in decoded_progress(body, len(self.shares[node]["ks"])):
                    if self.watch is not None:
                        self.watch.finished(*item)
            else:
                self._results(node, body)
        except BadMessage as exc:
            self.fail(node, f"sent {exc}")

    def _results(self, node: str, body) -> None:
        if not (isinstance(body, dict) and isinstance(body.get("last"), bool)):
            raise BadMessage("wb_results that are not {rows, last}")
        share = self.shares[node]
        rows = decoded_rows(
            body.get("rows"), dict(zip(share["ks"], share["offsets_ns"])), KEPT_HEADERS
        )
        kept = self.rows.setdefault(node, [])
        if {row[0] for row in kept} & {row[0] for row in rows}:
            raise BadMessage("a request's row twice")
        kept.extend(rows)
        if body["last"]:
            self.done.add(node)

    def send_plans(self, workers: list[str]) -> str | None:
        """Each worker its share, sealed; the reason when a share is over :data:`MAX_PLAN_BYTES`."""
        for i, node in enumerate(workers):
            share = _share(self.plan, i, len(workers))
            sealed = self.channels[node].seal("wb_plan", share)
            if len(sealed[2]) > MAX_PLAN_BYTES - 4096:
                return (
                    f"a Locust worker's share of the plan is {len(sealed[2]) / 2**20:.0f} MiB, over "
                    f"{MAX_PLAN_BYTES // 2**20} MiB: fewer or smaller request bodies, or more workers"
                )
            self.shares[node] = share
            self.runner.send_message("wb_plan", sealed, client_id=node)
        return None

    def start(self, start_wall_ns: int) -> None:
        for node in self.active():
            self._send(node, "wb_start", {"start_wall_ns": start_wall_ns})

    def active(self) -> list[str]:
        return [node for node in self.shares if node not in self.failed]

    def fail(self, node: str, reason: str) -> None:
        if node not in self.failed and node not in self.done:
            self.failed[node] = reason
            self.rows.pop(node, None)

    def wait_all(self, reached: set, timeout_s: float, late: str, start_wall_ns=None) -> None:
        """Until every active worker is in ``reached`` or failed (a lost heartbeat fails a worker),
        then fail those that are not, ``late``. With ``start_wall_ns``, the watch may stop the workers."""

        def settled() -> bool:
            for node in self.active():
                client = self.runner.clients.get(node)
                if client is None or client.state == STATE_MISSING:
                    self.fail(node, "stopped answering (no heartbeat for 3 s)")
            if start_wall_ns is not None and self.watch is not None and not self.stopped:
                if self.watch.stop(time.time_ns() - start_wall_ns):
                    self.stopped = True
                    for node in self.active():
                        self._send(node, "wb_stop", True)
            return all(node in reached for node in self.active())

        if _wait(settled, timeout_s) is None:
            for node in self.active():
                if node not in reached:
                    self.fail(node, late)

    def _send(self, node: str, kind: str, obj) -> None:
        self.runner.send_message(kind, self.channels[node].seal(kind, obj), client_id=node)

    def notes(self) -> list[str]:
        index = {node: i for i, node in enumerate(self.shares)}
        notes = [
            f"Locust worker {index[node]} ({node}) {reason}: its {len(self.shares[node]['ks'])} "
            "requests are lost"
            for node, reason in self.failed.items()
        ]
        if self.ignored:
            notes.append(
                f"the Locust master ignored {self.ignored} messages from processes that are not "
                f"this run's workers (no {SECRET_ENV})"
            )
        return notes

    def results(self) -> dict:
        """What the ``load`` process reads: the rows, the requests lost with their reason, the notes."""
        settled = None
        if self.watch is not None:
            settled = {
                "windows_run": self.watch.windows_run,
                "stable_after": self.watch.stable_after,
            }
        lost = [
            (k, offset, f"Locust worker {node} {reason}")
            for node, reason in self.failed.items()
            for k, offset in zip(self.shares[node]["ks"], self.shares[node]["offsets_ns"])
        ]
        rows = [row for node in self.shares if node in self.done for row in self.rows[node]]
        return {"rows": rows, "lost": lost, "notes": self.notes(), "watch": settled}


def _watch(plan: dict):
    """The master's stability watch of a sweep point (None without one), fed by the workers' ``wb_progress``.

    Every request of the schedule is counted as sent up front: a window is judged
    once each request due in it has been reported finished.
    """
    if plan.get("watch") is None:
        return None

    watch = StabilityWatch(**plan["watch"])
    for offset in plan["offsets_ns"]:
        watch.sent(offset)
    return watch


def _wait(settled, timeout_s: float):
    """True once ``settled()`` is (polling, gevent-friendly), or None after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if settled():
            return True
        gevent.sleep(POLL_S)
    return None


def _fail(message: str) -> int:
    print(f"workbench load --engine locust: {message}", file=sys.stderr, flush=True)
    return 2


def _share(plan: dict, index: int, workers: int) -> dict:
    """Worker ``index``'s part of the plan: requests ``k`` with ``k % workers == index``."""
    ks = list(range(index, len(plan["offsets_ns"]), workers))
    return {k: plan[k] for k in ("url", "tag", "payloads", "timeout_s")} | {
        "warmup": plan["warmup"] if index == 0 else 0,
        "ks": ks,
        "offsets_ns": [plan["offsets_ns"][k] for k in ks],
        "worker": index,
        "report": plan.get("watch") is not None,
    }


def run_worker(master_host: str, master_port: int, secret: str) -> int:
    """Join the master, say hello with the run's ``secret``, run the one share the master seals for it."""
    guard_rpc()
    env = Environment(user_classes=[])
    runner = env.create_worker_runner(master_host=master_host, master_port=master_port)
    channel = Channel(secret, runner.client_id, secrets.token_hex(16), None, "worker")
    state: dict = {}

    def opened(kind: str, msg):
        try:
            return channel.open(kind, msg.data)
        except BadMessage as exc:  # not this worker's master: said, not obeyed
            print(f"locust-worker: ignored {exc}", file=sys.stderr, flush=True)
            return None

    def on_plan(environment, msg, **kw):
        plan = opened("wb_plan", msg)
        if plan is not None and "plan" not in state:
            state.update(plan=plan, client=_client(plan), stop=False, finished=[], channel=channel)
            gevent.spawn(_warm_then_ready, runner, state)

    def on_start(environment, msg, **kw):
        start = opened("wb_start", msg)
        if start is not None and "plan" in state:
            gevent.spawn(_send_share, runner, env, state, start["start_wall_ns"])

    def on_stop(environment, msg, **kw):
        if opened("wb_stop", msg) is True and "plan" in state:
            state["stop"] = True

    runner.register_message("wb_plan", on_plan)
    runner.register_message("wb_start", on_start)
    runner.register_message("wb_stop", on_stop)
    runner.send_message("wb_hello", hello(secret, runner.client_id, channel.worker_nonce))
    runner.greenlet.join()
    return 0


def _client(plan: dict) -> tuple[HTTPClient, str]:
    url = urlparse(plan["url"])
    client = HTTPClient(
        url.hostname,
        url.port or (443 if url.scheme == "https" else 80),
        ssl=url.scheme == "https",
        concurrency=CONNECTIONS,
        connection_timeout=plan["timeout_s"],
        network_timeout=plan["timeout_s"],
    )
    return client, url.path.rstrip("/") + "/predict"


def _sealed_send(runner, state: dict, kind: str, obj) -> None:
    runner.send_message(kind, state["channel"].seal(kind, obj))


def _post(
    client: HTTPClient,
    path: str,
    body: bytes,
    headers: dict,
    timeout_s: float,
    units: list | None = None,
    origin: int = 0,
) -> tuple[int, dict[str, str], bytes]:
    """One request and its whole response within ``timeout_s`` (a server sending 1 byte a second is
    cut there: geventhttpclient's own timeout is per read); ``RequestTimeout`` past it. Returns the
    status, the kept headers (:data:`KEPT_HEADERS`, lower-case) and the body; an event stream's are
    those of its end event, and when each unit arrived goes into ``units`` (:func:`_streamed`)."""
    with gevent.Timeout(timeout_s, RequestTimeout(f"no whole response within {timeout_s:g} s")):
        resp = client.request("POST", path, body, headers)
        got = {name.lower(): value for name, value in resp.items()}
        if got.get("content-type", "").startswith(SSE_TYPE):
            return _streamed(resp, [] if units is None else units, origin)
        return resp.status_code, _kept(got), resp.read()


def _streamed(resp, units: list, origin: int) -> tuple[int, dict[str, str], bytes]:
    """An event stream (:mod:`workbench_serve.sse`) read line by line as it arrives: each unit's
    arrival (ns from ``origin``, the first :data:`MAX_UNITS`) appended to ``units``, then its end
    event's status, kept headers and body; ``StreamIncomplete`` when the stream ends without one."""
    decoder, end, n = Decoder(), None, 0
    while line := resp.readline(b"\n"):
        for name, data in decoder.feed(line):
            if name == END:
                end = decoded_end(data)
            else:
                n += 1
                if len(units) < MAX_UNITS:
                    units.append(time.perf_counter_ns() - origin)
    if end is None:
        raise StreamIncomplete(f"the stream ended after {n} units without its end event")
    status, headers, body = end
    return status, _kept(headers), body


def _kept(headers: dict[str, str]) -> dict[str, str]:
    return {k: v[:MAX_HEADER_CHARS] for k, v in headers.items() if k in KEPT_HEADERS}


class RequestTimeout(Exception):
    """A request not answered in full within ``--timeout``."""


def _warm_then_ready(runner, state: dict) -> None:
    client, path = state["client"]
    plan = state["plan"]
    for k in range(plan["warmup"]):
        try:
            _post(
                client, path, plan["payloads"][k % len(plan["payloads"])], OCTETS, plan["timeout_s"]
            )
        except Exception:  # noqa: BLE001  (a server that does not answer fails the measured requests, said there)
            pass
    _sealed_send(runner, state, "wb_ready", None)


def _send_share(runner, env, state: dict, start_wall_ns: int) -> None:
    """Send each request of the share at its time (its own greenlet), wait for all, return the rows
    (:data:`ROWS_PER_MESSAGE` a message, the last one marked).

    After ``wb_stop`` nothing more is sent; the rows are those of the requests sent.
    """
    plan, (client, path) = state["plan"], state["client"]
    origin = time.perf_counter_ns() + (start_wall_ns - time.time_ns())
    finished = state["finished"] if plan.get("report") else None
    reporter = gevent.spawn(_report, runner, state) if finished is not None else None
    greenlets = []
    for k, offset in zip(plan["ks"], plan["offsets_ns"]):
        wait_ns = origin + offset - time.perf_counter_ns()
        if wait_ns > 0:
            gevent.sleep(ns_to_s(wait_ns))
        if state["stop"]:
            break
        args = (client, path, plan, env, k, offset, origin, finished)
        greenlets.append(gevent.spawn(_send_one, *args))
    gevent.joinall(greenlets)
    if reporter is not None:
        reporter.kill()
    rows = [g.value for g in greenlets]
    for first in range(0, max(len(rows), 1), ROWS_PER_MESSAGE):
        chunk = rows[first : first + ROWS_PER_MESSAGE]
        last = first + ROWS_PER_MESSAGE >= len(rows)
        _sealed_send(runner, state, "wb_results", {"rows": chunk, "last": last})


def _report(runner, state: dict) -> None:
    """Every ``POLL_S``, the requests finished since the last report (``wb_progress``) to the master."""
    while True:
        gevent.sleep(POLL_S)
        if state["finished"]:
            done, state["finished"][:] = list(state["finished"]), []
            _sealed_send(runner, state, "wb_progress", done)


def _send_one(
    client: HTTPClient,
    path: str,
    plan: dict,
    env,
    k: int,
    offset_ns: int,
    origin: int,
    finished: list | None = None,
) -> tuple:
    """Request ``k``, due ``offset_ns`` after ``origin``: its row for ``wb_results`` (offsets in ns;
    headers, body and error cut to what the master accepts)."""
    body = plan["payloads"][k % len(plan["payloads"])]
    rid = f"{plan['tag']}-{k}"
    sent = time.perf_counter_ns()
    status, headers, failed_body, error, units = None, {}, b"", None, []
    try:
        status, headers, data = _post(
            client, path, body, OCTETS | {REQUEST_ID_HEADER: rid}, plan["timeout_s"], units, origin
        )
        failed_body = data[:MAX_BODY_BYTES] if status != 200 else b""
    except Exception as exc:  # noqa: BLE001  (recorded as the request's failure, like the workbench's client)
        error = ("network", type(exc).__name__, (str(exc) or repr(exc))[:MAX_TEXT_CHARS])
    done = time.perf_counter_ns()
    if finished is not None:  # filed as client_tables files it: from the due time, ok on a 200
        late = max(0, sent - origin - offset_ns)
        finished.append((offset_ns, offset_ns, done - sent + late, status == 200))
    why = f"HTTP {status}" if status is not None else error[2]
    failure = None if status == 200 else RuntimeError(why)
    env.events.request.fire(
        request_type="POST",
        name="/predict",
        response_time=ns_to_ms(done - sent),
        response_length=0,
        exception=failure,
        context={},
    )
    return k, offset_ns, sent - origin, done - origin, status, headers, failed_body, error, units


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench_serve.locust_engine")
    sub = p.add_subparsers(dest="role", required=True)
    m = sub.add_parser("master")
    m.add_argument("plan")
    m.add_argument("results")
    m.add_argument("--bind", default="127.0.0.1")
    m.add_argument("--port", type=int, default=5557)
    m.add_argument("--expect-workers", type=int, required=True)
    m.add_argument("--connect-timeout", type=float, default=60.0)
    args = p.parse_args(argv)  # workers start as ``python -m workbench locust-worker``
    return run_master(
        args.plan, args.results, args.bind, args.port, args.expect_workers, args.connect_timeout
    )


if __name__ == "__main__":
    sys.exit(main())
