"""Measurements of the course's pattern notebooks (11, 13), recorded by
``scripts/record_course_data.py`` in ``data/course/*.json`` for a machine that cannot measure.
"""

from __future__ import annotations

import gc
import itertools
import platform
import threading
import time
from collections import deque
from typing import Any

import numpy as np

from ..pipeline import Pipeline
from ..units import NS_PER_US, ns_to_s


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
