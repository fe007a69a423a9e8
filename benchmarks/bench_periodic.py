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
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench import Pipeline  # noqa: E402
from workbench.analysis.periodic import periodic_spikes  # noqa: E402
from workbench.runner import DEFAULT_MIN_DURATION_S, Pace, profile  # noqa: E402

HOLD_SHARE = 0.12  # the lock is held 12 % of each period (30 ms of 250)


def snapshot_pipeline(period_ms: float, hold_ms: float, stop: threading.Event):
    """A factory: ``fetch`` takes the lock a thread holds ``hold_ms`` every ``period_ms``."""

    def build(config):
        lock = threading.Lock()

        def snapshot():
            while not stop.wait(period_ms / 1e3):
                with lock:
                    time.sleep(hold_ms / 1e3)

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


def measure(period_ms: float, min_duration_s: float, utilization: float) -> dict:
    hold_ms = HOLD_SHARE * period_ms
    stop = threading.Event()
    started = time.perf_counter()
    try:
        run = profile(
            snapshot_pipeline(period_ms, hold_ms, stop),
            requests=600,
            traced=0,
            max_duration_s=max(3 * min_duration_s, 10.0),
            pace=Pace(utilization=utilization, min_duration_s=min_duration_s),
            sample_stacks=False,
        )
    finally:
        stop.set()
    wall_s = time.perf_counter() - started
    pacing = run.meta.timing.pacing
    found = periodic_spikes(run.requests, run.stages, run.stage_names) or {}
    return {
        "period_ms": period_ms,
        "hold_ms": hold_ms,
        "found_period_ms": found.get("period_ms"),
        "found_width_ms": found.get("width_ms"),
        "share_of_requests": found.get("share_of_requests"),
        "stage": found.get("stage"),
        "paced_p99_ms": pacing["paced"]["p99_ms"],
        "closed_p99_ms": pacing["closed_loop"]["p99_ms"],
        "rate_rps": pacing["rate_rps"],
        "requests": run.meta.timing.requests,
        "stopped_by": run.meta.timing.stopped_by,
        "wall_s": wall_s,
    }


def markdown(rows: list[dict], args) -> str:
    load = os.getloadavg()[0]
    lines = [
        "# bench_periodic: a lock held every PERIOD ms, seen by a paced profile",
        "",
        f"`python benchmarks/bench_periodic.py --periods {' '.join(f'{p:g}' for p in args.periods)} "
        f"--min-duration {args.min_duration:g} --utilization {args.utilization:g}`; "
        f"load average {load:.1f} on {os.cpu_count()} cores at the end (a busy machine when above 1 "
        "per core). Hold = 12 % of the period; the request's own work 0.5 ms.",
        "",
        "| period ms | hold ms | found period ms | width ms | share | stage | paced p99 ms | "
        "closed p99 ms | rate/s | requests | stopped by | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        found = r["found_period_ms"]
        lines.append(
            f"| {r['period_ms']:g} | {r['hold_ms']:.3g} | "
            + (
                f"{found:.4g} | {r['found_width_ms']:.3g} | {r['share_of_requests']:.1%} | {r['stage']}"
                if found
                else "none | | | "
            )
            + f" | {r['paced_p99_ms']:.3g} | {r['closed_p99_ms']:.3g} | {r['rate_rps']:.0f} | "
            f"{r['requests']} | {r['stopped_by']} | {r['wall_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--periods", nargs="+", type=float, default=[250, 100, 50, 25, 10])
    parser.add_argument("--min-duration", type=float, default=DEFAULT_MIN_DURATION_S)
    parser.add_argument("--utilization", type=float, default=0.3)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = [measure(p, args.min_duration, args.utilization) for p in args.periods]
    text = markdown(rows, args)
    print(text)
    if args.md:
        args.md.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "load_1m": os.getloadavg()[0]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
