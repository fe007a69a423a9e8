"""What a paced ``profile`` sees of a periodic job, and how long its default run takes.

Question (issue 37, items 1 and 4): a background thread takes a lock the requests need for
``hold`` ms every ``period`` ms (a cache snapshot). A paced profile (``--utilization``, Poisson
arrivals after the closed-loop reference) is searched for periodic spikes
(``workbench.analysis.periodic``); which is the smallest period it finds, and what wall time does
the default paced run (``--min-duration`` default) take?

Per period: the period and width found (or none), the share of requests in the spikes, the stage
named, the paced p99 against the closed-loop p99, and the run's wall time (s, the closed-loop
reference included). The requests' own work is 0.5 ms of busy loop in ``score``.

Run: ``python benchmarks/bench_periodic.py [--periods 250 100 50 25 10] [--min-duration 3]
[--utilization 0.3] [--md PATH] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench import Pipeline  # noqa: E402
from workbench.analysis.periodic import periodic_spikes  # noqa: E402
from workbench.runner import (  # noqa: E402
    DEFAULT_MIN_DURATION_S,
    DEFAULT_UTILIZATION,
    Pace,
    profile,
)

HOLD_SHARES = (0.08, 0.16)  # the lock is held 8-16 % of each period (20-40 ms of 250), 12 % mean


def snapshot_pipeline(period_ms: float, stop: threading.Event):
    """A factory: ``fetch`` takes the lock a thread holds 8-16 % of ``period_ms`` (seeded uniform)
    from every multiple of ``period_ms`` (a timer job: its period does not drift by the holds)."""

    def build(config):
        lock, rng = threading.Lock(), random.Random(0)

        def snapshot():
            due = time.monotonic()
            while True:
                due += period_ms / 1e3
                if stop.wait(max(due - time.monotonic(), 0.0)):
                    return
                with lock:
                    time.sleep(rng.uniform(*HOLD_SHARES) * period_ms / 1e3)

        threading.Thread(target=snapshot, daemon=True).start()
        p = Pipeline("snapshot", items=lambda: itertools.count())

        def fetch(batch):
            with lock:
                return batch

        def score(batch):
            t = time.perf_counter()
            while time.perf_counter() - t < 0.0005:
                pass
            return batch

        p.add("fetch", fetch)
        p.add("score", score, role="compute")
        return p

    return build


def measure(
    period_ms: float, min_duration_s: float, utilization: float, save: Path | None = None
) -> dict:
    hold_ms = sum(HOLD_SHARES) / 2 * period_ms
    stop = threading.Event()
    started = time.perf_counter()
    try:
        run = profile(  # profile's default run: 600 closed loop, then paced up to 30 s
            snapshot_pipeline(period_ms, stop),
            traced=0,
            pace=Pace(utilization=utilization, min_duration_s=min_duration_s),
        )
    finally:
        stop.set()
    wall_s = time.perf_counter() - started
    if save is not None:
        run.save(save / f"lock-{period_ms:g}ms-{time.time_ns()}")
    pacing = run.meta.timing.pacing
    found = periodic_spikes(run.requests, run.stages, run.stage_names) or {}
    period, width = found.get("period_ms"), found.get("width_ms")
    return {
        "period_ms": period_ms,
        "hold_ms": hold_ms,
        "within_10pct": period is not None
        and abs(period / period_ms - 1) <= 0.1
        and abs(width / hold_ms - 1) <= 0.1,
        "found_period_ms": found.get("period_ms"),
        "found_width_ms": found.get("width_ms"),
        "share_of_requests": found.get("share_of_requests"),
        "stage": found.get("stage"),
        "paced_p99_ms": pacing["paced"]["p99_ms"],
        "service_p99_ms": pacing["service"]["p99_ms"],
        "closed_p99_ms": pacing["closed_loop"]["p99_ms"],
        "rate_rps": pacing["rate_rps"],
        "requests": run.meta.timing.requests,
        "stopped_by": run.meta.timing.stopped_by,
        "wall_s": wall_s,
    }


def markdown(rows: list[dict], args) -> str:
    load = os.getloadavg()[0]
    lines = [
        "# bench_periodic: a lock held every PERIOD ms, seen by profile's default paced run",
        "",
        f"`python benchmarks/bench_periodic.py --periods {' '.join(f'{p:g}' for p in args.periods)} "
        f"--min-duration {args.min_duration:g} --utilization {args.utilization:g} "
        f"--repeat {args.repeat}`; load average {load:.1f} on {os.cpu_count()} cores at the end (a "
        "busy machine when above 1 per core). Hold = 8-16 % of the period (mean 12 %), from every "
        "multiple of it; the request's own work 0.5 ms. Paced p99 from the due time, service p99 "
        "from the send. Within 10 %: the period and the width both within 10 % of the period and "
        "the mean hold.",
        "",
        "| period ms | mean hold ms | found period ms | width ms | within 10 % | share | stage | "
        "paced p99 ms | service p99 ms | closed p99 ms | rate/s | requests | stopped by | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        found = r["found_period_ms"]
        lines.append(
            f"| {r['period_ms']:g} | {r['hold_ms']:.3g} | "
            + (
                f"{found:.4g} | {r['found_width_ms']:.3g} | {'yes' if r['within_10pct'] else 'no'} "
                f"| {r['share_of_requests']:.1%} | {r['stage']}"
                if found
                else "none | | no | | "
            )
            + f" | {r['paced_p99_ms']:.3g} | {r['service_p99_ms']:.3g} | {r['closed_p99_ms']:.3g} "
            f"| {r['rate_rps']:.0f} | {r['requests']} | {r['stopped_by']} | {r['wall_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--periods", nargs="+", type=float, default=[250, 100, 50, 25, 10])
    parser.add_argument("--min-duration", type=float, default=DEFAULT_MIN_DURATION_S)
    parser.add_argument("--utilization", type=float, default=DEFAULT_UTILIZATION)
    parser.add_argument("--repeat", type=int, default=1, help="runs per period")
    parser.add_argument("--save", type=Path, help="a folder to save each run folder in")
    parser.add_argument("--md", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = [
        measure(p, args.min_duration, args.utilization, args.save)
        for p in args.periods
        for _ in range(args.repeat)
    ]
    text = markdown(rows, args)
    print(text)
    if args.md:
        args.md.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "load_1m": os.getloadavg()[0]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
