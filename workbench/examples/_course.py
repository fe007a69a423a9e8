"""Measurements of the course's pattern notebooks (11-13), made live there and recorded by
``scripts/record_course_data.py`` in ``data/course/*.json`` for a machine that cannot measure (no
``redis-server``, no time for a ``torch.compile``). Plain data out, strict JSON.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import platform
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..analysis.budget import budget, cache_split
from ..config import PipelineConfig
from ..pipeline import Pipeline
from ..runner import profile
from ..units import NS_PER_US, ns_to_s

CACHE_MIX = {"n_keys": 500, "zipf_s": 1.1}


@contextlib.contextmanager
def local_redis(timeout_s: float = 20.0) -> Iterator[str | None]:
    """``redis://127.0.0.1:PORT/0`` of a throwaway ``redis-server``, or None: not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tempfile.TemporaryDirectory()
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(
        [binary, *args, "--dir", folder.name],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"redis-server did not listen within {timeout_s} s"
                    ) from None
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        folder.cleanup()


def cache_levels(
    redis_url: str, l1_size: int = 50, requests: int = 400, warmup: int = 20
) -> dict[str, Any]:
    """The tabular example (batch 1, one thread) on the same seeded Zipf keys behind an LRU of
    ``l1_size`` responses, then LRU + an empty Redis: per level the hit rate, the end-to-end
    p50/p99 and a miss's tail."""
    levels = {}
    for kind in ("lru", "redis"):
        options = {**CACHE_MIX, "cache": kind, "cache_size": l1_size, "redis_url": redis_url}
        config = PipelineConfig(batch_size=1, threads=1, options=options)
        run = profile("tabular", config, requests=requests, warmup=warmup, traced=0)
        measured = run.requests[~run.requests["warmup"].astype(bool)]
        e2e = budget(run)["end_to_end"]
        parts = {name: budget(part)["end_to_end"] for name, part in cache_split(run).items()}
        levels[kind] = {
            "hit_rate": float(measured["attr.cache_hit"].astype(float).mean()),
            "p50_ms": e2e["p50_ms"],
            "p99_ms": e2e["p99_ms"],
            "hit_p50_ms": parts["hit"]["p50_ms"],
            "miss_p50_ms": parts["miss"]["p50_ms"],
            "miss_p99_ms": parts["miss"]["p99_ms"],
            "misses": int(parts["miss"]["count"]),
            "noise": run.meta.noise.to_dict(),
        }
        run.close()
    return {"l1_size": l1_size, "requests": requests, "keys": CACHE_MIX, "levels": levels}


def compile_cost(calls: int = 200, batch: int = 8) -> dict[str, Any]:
    """Eager against ``torch.compile`` on a small MLP, one thread, CPU: ``compile_s`` (the first
    call), the median and interquartile range of ``calls`` calls each (``*_us``)."""
    import torch  # 1-2 s and 300 MB: only for the compile measurement

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256),
        torch.nn.GELU(),
        torch.nn.Linear(256, 256),
        torch.nn.GELU(),
        torch.nn.Linear(256, 8),
    ).eval()
    x = torch.randn(batch, 64)
    with torch.inference_mode():
        compiled = torch.compile(model)
        started = time.perf_counter_ns()
        compiled(x)
        compile_ns = time.perf_counter_ns() - started
        out: dict[str, Any] = {"compile_s": ns_to_s(compile_ns), "calls": calls, "batch": batch}
        for name, fn in (("eager", model), ("compiled", compiled)):
            fn(x)
            times = []
            for _ in range(calls):
                t0 = time.perf_counter_ns()
                fn(x)
                times.append(time.perf_counter_ns() - t0)
            q25, q50, q75 = np.percentile(np.asarray(times) / NS_PER_US, [25, 50, 75])
            out |= {f"{name}_us": float(q50), f"{name}_iqr_us": [float(q25), float(q75)]}
    return out | {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
    }


# Notebook 13's pipeline: a tail made in time (a periodic job holding a lock) and by the collector
SNAPSHOT_JOB = {"period_ms": 250, "hold_ms": 30, "records": 20_000, "churn": 40}
_JOBS: list[tuple[threading.Event, threading.Thread]] = []


class Record:
    """A parsed record that points back at its parent: a small reference cycle."""

    __slots__ = ("key", "parent", "child")

    def __init__(self, key: int, parent: "Record | None" = None) -> None:
        self.key, self.parent, self.child = key, parent, None


def copy_table(table: dict[int, int]) -> dict[int, int]:
    """The snapshot's copy: a pure-Python walk over the table (a few ms of CPU)."""
    out = {}
    for key, value in table.items():
        out[key] = value
    return out


def snapshot_pipeline(config) -> Any:
    """Notebook 13's pipeline, a tail made in time: ``parse -> lookup -> score`` (about 0.3 ms a
    request) beside a thread that every ``period_ms`` holds the table's lock (which ``lookup``
    takes) ``hold_ms``, until :func:`stop_background_jobs`. ``parse`` keeps ``records`` cyclic
    records and adds ``churn`` a request: garbage that only a generation-2 collection frees, each
    walking every record kept (options: :data:`SNAPSHOT_JOB`)."""
    opts = {k: config.options.get(k, v) for k, v in SNAPSHOT_JOB.items()}
    lock, stop = threading.Lock(), threading.Event()
    table = {i: i * 7 for i in range(5_000)}

    def snapshot_forever() -> None:
        while not stop.wait(opts["period_ms"] / 1000 - opts["hold_ms"] / 1000):
            with lock:
                started = time.perf_counter()
                copy_table(table)
                time.sleep(max(0.0, opts["hold_ms"] / 1000 - (time.perf_counter() - started)))

    thread = threading.Thread(target=snapshot_forever, name="snapshot", daemon=True)
    _JOBS.append((stop, thread))
    kept: deque = deque(maxlen=opts["records"])
    kept.extend(Record(i, Record(-i)) for i in range(opts["records"]))
    for r in kept:
        r.parent.child = r
    gc.collect()  # the build's own garbage: the first full collection is not a request's
    p = Pipeline("snapshot", items=lambda: itertools.count())

    @p.stage(role="preprocess")
    def parse(batch):
        for key in batch:
            for k in range(opts["churn"]):
                parent = Record(-key)
                parent.child = Record(key * 1000 + k, parent)
                kept.append(parent.child)
        return batch

    @p.stage(role="io")
    def lookup(batch):
        with lock:
            return [table[key % len(table)] for key in batch]

    @p.stage(role="compute")
    def score(values):
        started, n = time.perf_counter(), 0
        while time.perf_counter() - started < 0.0002:
            n += 1
        return [float(v) for v in values]

    thread.start()
    return p


def stop_background_jobs() -> int:
    """Stop every ``snapshot`` thread :func:`snapshot_pipeline` started; the number stopped."""
    stopped = 0
    while _JOBS:
        stop, thread = _JOBS.pop()
        stop.set()
        thread.join()
        stopped += 1
    return stopped
