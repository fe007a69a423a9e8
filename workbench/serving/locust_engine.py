"""The Locust side of ``load --url --engine locust``: Locust's own master and workers, headless.

Importing this module imports Locust, which monkey-patches the process for
gevent: only the master and worker processes import it (``python -m
workbench.serving.locust_engine master ...``, ``python -m workbench
locust-worker --master HOST``), never the process that runs ``load``.

The protocol, over Locust's master/worker channel (custom messages):

1. the master waits for ``expect`` workers, then sends worker ``i`` its
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

The master writes the rows to a file for the ``load`` process, which joins
them into a ``served`` run exactly as ``load --url`` does
(:mod:`workbench.serving.locust_drive`). Workers on other machines share
the wall clock through NTP: their offsets are as good as that sync.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from urllib.parse import urlparse

import gevent
from geventhttpclient import HTTPClient
from locust.env import Environment

from .locust_drive import READY_LINE
from ..units import ns_to_ms, ns_to_s
from .protocol import (
    BATCH_HEADER,
    BATCH_SIZE_HEADER,
    CACHE_HIT_HEADER,
    REQUEST_ID_HEADER,
    TIMING_HEADER,
)

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
    """Serve one plan to ``expect`` workers and write their rows to ``results_file``; 0, or 2 with one line."""
    with open(plan_file, "rb") as f:
        plan = pickle.load(f)
    env = Environment(user_classes=[])
    runner = env.create_master_runner(master_bind_host=bind_host, master_bind_port=port)
    ready, rows = set(), {}
    watch = _watch(plan, runner)
    runner.register_message("wb_ready", lambda environment, msg, **kw: ready.add(msg.node_id))
    runner.register_message(
        "wb_results", lambda environment, msg, **kw: rows.__setitem__(msg.node_id, msg.data)
    )
    print(f"{READY_LINE} {port}", flush=True)
    try:
        workers = _wait(
            lambda: sorted(runner.clients.keys(), key=runner.get_worker_index),
            expect,
            connect_timeout_s,
        )
        if workers is None:
            return _fail(
                f"{len(runner.clients)} of {expect} Locust workers connected within {connect_timeout_s:g} s "
                f"(start them with: python -m workbench locust-worker --master HOST --master-port {port})"
            )
        workers = workers[:expect]
        for i, worker in enumerate(workers):
            runner.send_message("wb_plan", _share(plan, i, len(workers)), client_id=worker)
        warm_s = plan["timeout_s"] * (plan["warmup"] + 1) + 30
        if _wait(lambda: [w for w in workers if w in ready], expect, warm_s) is None:
            return _fail(
                f"{len(ready)} of {expect} Locust workers finished their warm-up within {warm_s:g} s"
            )
        start_wall_ns = time.time_ns() + START_LEAD_NS
        for worker in workers:
            runner.send_message("wb_start", {"start_wall_ns": start_wall_ns}, client_id=worker)
        span_s = (
            ns_to_s(plan["offsets_ns"][-1] if plan["offsets_ns"] else 0) + plan["timeout_s"] + 60
        )
        stopped: list = []

        def returned():
            """The workers that returned their rows; the first time the watch says stable, ``wb_stop``."""
            if watch is not None and not stopped and watch.stop(time.time_ns() - start_wall_ns):
                stopped.append(True)
                for worker in workers:
                    runner.send_message("wb_stop", None, client_id=worker)
            return [w for w in workers if w in rows]

        if _wait(returned, expect, span_s) is None:
            return _fail(
                f"{len(rows)} of {expect} Locust workers returned their requests within {span_s:g} s"
            )
        with open(results_file, "wb") as f:
            settled = None
            if watch is not None:
                settled = {"windows_run": watch.windows_run, "stable_after": watch.stable_after}
            all_rows = [row for w in workers for row in rows[w]]
            pickle.dump({"workers": workers, "rows": all_rows, "watch": settled}, f)
        return 0
    finally:
        runner.quit()


def _watch(plan: dict, runner):
    """The master's stability watch of a sweep point (None without one), fed by the workers' ``wb_progress``.

    Every request of the schedule is counted as sent up front: a window is judged
    once each request due in it has been reported finished.
    """
    if plan.get("watch") is None:
        return None
    from ..analysis.windows import StabilityWatch

    watch = StabilityWatch(**plan["watch"])
    for offset in plan["offsets_ns"]:
        watch.sent(offset)

    def on_progress(environment, msg, **kw):
        for due, sent, dur, ok in msg.data:
            watch.finished(due, sent, dur, ok)

    runner.register_message("wb_progress", on_progress)
    return watch


def _wait(found, count: int, timeout_s: float):
    """``found()`` once it has ``count`` entries (polling, gevent-friendly), or None after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        items = found()
        if len(items) >= count:
            return items
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


def run_worker(master_host: str, master_port: int) -> int:
    """Join the master, run the shares it sends, until it quits."""
    env = Environment(user_classes=[])
    runner = env.create_worker_runner(master_host=master_host, master_port=master_port)
    state: dict = {}

    def on_plan(environment, msg, **kw):
        state.update(plan=msg.data, client=_client(msg.data), stop=False, finished=[])
        gevent.spawn(_warm_then_ready, runner, state)

    def on_start(environment, msg, **kw):
        gevent.spawn(_send_share, runner, env, state, msg.data["start_wall_ns"])

    def on_stop(environment, msg, **kw):
        state["stop"] = True

    runner.register_message("wb_plan", on_plan)
    runner.register_message("wb_start", on_start)
    runner.register_message("wb_stop", on_stop)
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


def _warm_then_ready(runner, state: dict) -> None:
    client, path = state["client"]
    plan = state["plan"]
    for k in range(plan["warmup"]):
        try:
            client.request("POST", path, plan["payloads"][k % len(plan["payloads"])], OCTETS).read()
        except Exception:  # noqa: BLE001  (a server that does not answer fails the measured requests, said there)
            pass
    runner.send_message("wb_ready", None)


def _send_share(runner, env, state: dict, start_wall_ns: int) -> None:
    """Send each request of the share at its time (its own greenlet), wait for all, return the rows.

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
    runner.send_message("wb_results", [g.value for g in greenlets])


def _report(runner, state: dict) -> None:
    """Every ``POLL_S``, the requests finished since the last report (``wb_progress``) to the master."""
    while True:
        gevent.sleep(POLL_S)
        if state["finished"]:
            done, state["finished"][:] = list(state["finished"]), []
            runner.send_message("wb_progress", done)


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
    """Request ``k``, due ``offset_ns`` after ``origin``: its row for ``wb_results`` (offsets in ns)."""
    body = plan["payloads"][k % len(plan["payloads"])]
    rid = f"{plan['tag']}-{k}"
    sent = time.perf_counter_ns()
    status, headers, failed_body, error = None, {}, b"", None
    try:
        resp = client.request("POST", path, body, OCTETS | {REQUEST_ID_HEADER: rid})
        data = resp.read()
        status = resp.status_code
        headers = {
            name.lower(): value for name, value in resp.items() if name.lower() in KEPT_HEADERS
        }
        failed_body = data if status != 200 else b""
    except Exception as exc:  # noqa: BLE001  (recorded as the request's failure, like the workbench's client)
        error = ("network", type(exc).__name__, str(exc) or repr(exc))
    done = time.perf_counter_ns()
    if finished is not None:  # filed as client_tables files it: from the send, ok on a 200
        finished.append((offset_ns, sent - origin, done - sent, status == 200))
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
    return k, offset_ns, sent - origin, done - origin, status, headers, failed_body, error


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench.serving.locust_engine")
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
