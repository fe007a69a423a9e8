"""Notebook 12's cache levels (an LRU, then LRU + Redis) measured live there, and recorded by
``scripts/record_course_data.py`` in ``data/course/redis_l2.json`` for a machine without
``redis-server``. Plain data out, strict JSON.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from workbench.analysis.budget import budget, cache_split
from workbench.config import PipelineConfig
from workbench.runner import profile

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
