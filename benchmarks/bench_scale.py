"""Every summary scales: ``show``, ``audit``, ``compare`` and ``gate`` on runs of a million requests.

    python benchmarks/bench_scale.py [--requests 1000000] [--timeout 600]
        [--md benchmarks/results/scale.md] [--json benchmarks/results/scale.json]

Synthesizes two pairs of run folders through the record API (``Run`` + ``save_run``, the
writer the CLI uses), not by measuring for real:

* *profile*: a profile run's shape, the stages of the shipped ``tabular-cpu-bs1-fp32`` run
  (its ``run.json`` is the template) with log-normal stage times, 5 warm-up requests;
* *load*: an overloaded in-process ``load`` run whose queue built up: arrivals at 500,000
  requests/s into one executor serving batches of up to 8 in 40 us (200,000 requests/s), so
  the last request waits about 3 s (the template meta is a 20-request ``run_load`` of a
  trivial pipeline, made here).

Each pair is A and B (B's ``forward`` 3 % slower, another seed). Then, one subprocess each,
``show A --json``, ``audit A --json``, ``compare A B --json`` and ``gate A B``: wall time, CPU
time (user + system) and peak RSS of that process (``/usr/bin/time``), and its exit code. On a
shared machine the CPU seconds are the steadier figure: wall time includes waiting for a core.
Targets (issue 35): 10 s and 1 GB each. A command past ``--timeout`` is killed and reported as such.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from workbench import Pipeline  # noqa: E402
from workbench.batching import Arrivals, BatchPolicy  # noqa: E402
from workbench.batching.live import run_load  # noqa: E402
from workbench.record import STAGE_COLUMNS, Run, read_meta, save_run, typed_table  # noqa: E402
from workbench.record.tables import LOAD_REQUEST_COLUMNS, REQUEST_COLUMNS  # noqa: E402

TEMPLATE = ROOT / "data" / "runs" / "tabular-cpu-bs1-fp32"
TARGET_S, TARGET_MB = 10.0, 1024.0
RATE_RPS, BATCH, BATCH_NS = 500_000, 8, 40_000
COMMANDS = {
    "show": lambda a, b: ["show", str(a), "--json"],
    "audit": lambda a, b: ["audit", str(a), "--json"],
    "compare": lambda a, b: ["compare", str(a), str(b), "--json"],
    "gate": lambda a, b: ["gate", str(a), str(b)],
}


def stage_table(request, names, start, dur) -> pd.DataFrame:
    """The typed ``stages`` table: ``start`` and ``dur`` are (requests, stages) int64 arrays."""
    k = len(names)
    table = pd.DataFrame(
        {
            "request": np.repeat(request, k),
            "stage": np.tile(np.array(names, dtype=object), len(request)),
            "stage_index": np.tile(np.arange(k), len(request)),
            "start_ns": start.ravel(),
            "dur_ns": dur.ravel(),
            "device_dur_ns": pd.array([None] * dur.size, dtype="Int64"),
        }
    )
    return typed_table(table, STAGE_COLUMNS)


def profile_run(n: int, seed: int, slower: float) -> Run:
    """A profile run of ``n`` requests (5 of them warm-up) with the template's stages."""
    meta = read_meta(TEMPLATE / "run.json")
    names = list(meta.stages)
    rng = np.random.default_rng(seed)
    scale = np.array([1.0 + slower * (name == "forward") for name in names])
    dur = (rng.lognormal(np.log(100_000), 0.4, (n, len(names))) * scale).astype(np.int64)
    gap = rng.integers(1_000, 5_000, n)
    e2e = dur.sum(axis=1) + gap
    start = np.concatenate([[0], np.cumsum(e2e + 10_000)[:-1]])
    stage_start = start[:, None] + np.cumsum(dur, axis=1) - dur
    requests = pd.DataFrame(
        {
            "request": np.arange(n),
            "warmup": np.arange(n) < 5,
            "start_ns": start,
            "dur_ns": e2e,
            "ok": True,
            "batch_size": meta.config.batch_size or 1,
        }
    )
    timing = dataclasses.replace(meta.timing, warmup=5, requests=n - 5)
    meta = dataclasses.replace(meta, trace=None, stacks=None, timing=timing)
    stages = stage_table(np.arange(n), names, stage_start, dur)
    return Run(meta=meta, requests=typed_table(requests, REQUEST_COLUMNS), stages=stages)


def trivial_pipeline() -> Pipeline:
    pipe = Pipeline("trivial", items=lambda: iter(range(10**9)))
    pipe.add("prepare", lambda batch: batch)
    pipe.add("forward", lambda batch: batch)
    return pipe


def load_run(n: int, seed: int, slower: float, template) -> Run:
    """An overloaded load run: ``n`` Poisson arrivals at :data:`RATE_RPS` into one executor that
    serves the oldest :data:`BATCH` waiting requests in about :data:`BATCH_NS` per batch."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1e9 / RATE_RPS, n)).astype(np.int64)
    batch = np.arange(n) // BATCH
    nb = int(batch[-1]) + 1
    close = arrival[np.minimum(np.arange(nb) * BATCH + BATCH - 1, n - 1)]  # the batch is full
    parts = rng.normal(1.0, 0.1, (nb, 2)).clip(0.5) * [
        0.3 * BATCH_NS,
        0.7 * BATCH_NS * (1 + slower),
    ]
    parts = parts.astype(np.int64)
    service = parts.sum(axis=1) + 500
    done = np.cumsum(service)  # end = max over earlier batches j of close_j + their service since j
    end = done + np.maximum.accumulate(close - (done - service))
    begin = end - service
    arrival_b, close_r, begin_r = arrival, close[batch], begin[batch]
    batch_wait, queue_wait = close_r - arrival_b, begin_r - close_r
    requests = pd.DataFrame(
        {
            "request": np.arange(n),
            "warmup": False,
            "start_ns": arrival_b,
            "dur_ns": end[batch] - arrival_b,
            "ok": True,
            "batch_size": BATCH,
            "arrival_ns": arrival_b,
            "batch_wait_ns": batch_wait,
            "queue_wait_ns": queue_wait,
            "service_ns": service[batch],
            "batch": batch,
        }
    )
    names = ["batch_wait", "queue_wait", *template.pipeline_stages]
    dur = np.column_stack([batch_wait, queue_wait, parts[batch]])
    start = arrival_b[:, None] + np.cumsum(dur, axis=1) - dur
    start[:, 2:] += 250  # the executor's hand-off before the pipeline call
    load = dataclasses.replace(template.load, requests=n, batches=nb, failed=0, dropped=0)
    timing = dataclasses.replace(template.timing, warmup=0, requests=n)
    meta = dataclasses.replace(template, stages=names, timing=timing, load=load)
    columns = {**REQUEST_COLUMNS, **LOAD_REQUEST_COLUMNS}
    stages = stage_table(np.arange(n), names, start, dur)
    return Run(meta=meta, requests=typed_table(requests, columns), stages=stages)


def timed(args: list[str], timeout: float) -> dict:
    """One CLI command in its own process under ``/usr/bin/time`` (whose peak RSS is the command's
    alone, not this process's, which a forked child would inherit): wall seconds, CPU seconds (user
    + system), peak RSS (MB), exit code."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        command = [
            "/usr/bin/time",
            "-f",
            "%U %S %M",
            "-o",
            report.name,
            sys.executable,
            "-m",
            "workbench",
        ]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [*command, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
        wall = time.perf_counter() - t0
        kb = report.read().split()
    killed = proc.returncode < 0
    lines = err.decode(errors="replace").strip().splitlines()
    usage = kb[-3:] if len(kb) >= 3 and kb[-1].isdigit() else None  # user s, system s, peak KB
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(float(usage[0]) + float(usage[1]), 2) if usage else None,
        "peak_rss_mb": round(int(usage[2]) / 1024, 1) if usage else None,
        "exit": None if killed else proc.returncode,
        "timed_out": killed,
        "stderr_tail": lines[-1] if lines and proc.returncode not in (0, 1, 4) else None,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    parser.add_argument("--md", default=str(HERE / "results" / "scale.md"))
    parser.add_argument("--json", default=str(HERE / "results" / "scale.json"))
    args = parser.parse_args(argv)
    args.load_before = os.getloadavg()[0]
    template = run_load(
        trivial_pipeline(),
        arrivals=Arrivals("poisson", rate_rps=1000, count=20, seed=1),
        policy=BatchPolicy(BATCH, 1.0),
        warmup=1,
    ).meta
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        for shape in ("profile", "load"):
            folders = []
            t0 = time.perf_counter()
            for name, seed, slower in (("A", 1, 0.0), ("B", 2, 0.03)):
                if shape == "profile":
                    run = profile_run(args.requests, seed, slower)
                else:
                    run = load_run(args.requests, seed, slower, template)
                folders.append(save_run(run, Path(tmp) / f"{shape}-{name}"))
            print(
                f"{shape}: two runs of {args.requests:,} written in {time.perf_counter() - t0:.1f} s"
            )
            for command, make in COMMANDS.items():
                row = {"shape": shape, "command": command, **timed(make(*folders), args.timeout)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    write(rows, args)
    return 1 if any(map(over, rows)) else 0


def over(row: dict) -> bool:
    """Whether a command missed a target (or was killed)."""
    return row["timed_out"] or row["wall_s"] > TARGET_S or (row["peak_rss_mb"] or 0) > TARGET_MB


def write(rows: list[dict], args) -> None:
    lines = [
        "# Every summary scales (issue 35)",
        "",
        f"`python benchmarks/bench_scale.py --requests {args.requests}` on {platform.node()} "
        f"({os.cpu_count()} cores, shared: timings are from a busy machine, load average "
        f"{args.load_before:.1f} before and {os.getloadavg()[0]:.1f} after), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Targets: {TARGET_S:g} s and "
        f"{TARGET_MB:g} MB per command.",
        "",
        "| shape | command | wall s | CPU s (user + sys) | peak RSS MB | exit | within target |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        wall = f"killed at {args.timeout:g}" if r["timed_out"] else f"{r['wall_s']:.2f}"
        lines.append(
            f"| {r['shape']} | {r['command']} | {wall} | {r['cpu_s'] or '?'} | "
            f"{r['peak_rss_mb'] or '?'} | {r['exit']} | "
            f"{'no' if over(r) else 'yes'} |"
        )
    Path(args.md).write_text("\n".join(lines) + "\n")
    Path(args.json).write_text(
        json.dumps({"requests": args.requests, "rows": rows}, indent=1) + "\n"
    )


if __name__ == "__main__":
    sys.exit(main())
