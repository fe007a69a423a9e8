"""How late a paced sender wakes: ``time.sleep`` with Linux's default timer slack against 1 ns.

Question (issue 37, the sim/live check of a 0.7-ms pipeline): the in-process ``load`` generator and
the paced ``profile`` sleep until each request's due time. Linux lets a sleeping thread wake up to
its timer slack (50 us by default) late, and the generator's median lag was 0.09 ms, 10-15 % of the
request. ``workbench.timing.fine_timer_slack`` sets the sending thread's slack to 1 ns.

Two measures, in interleaved blocks (``--blocks`` of ``--sleeps`` each, the order alternating):

* the overshoot of ``time.sleep(--sleep-ms)`` past its deadline, default slack and 1 ns;
* the lag of ``workbench.batching.live.generate`` (as shipped: 1 ns) on a Poisson schedule at
  ``--rate`` requests/s whose submit does nothing, against the same loop with the default slack.

Run: ``python benchmarks/bench_timer_slack.py [--sleep-ms 0.7] [--sleeps 500] [--blocks 6]
[--rate 1000] [--md PATH]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.batching.arrivals import Arrivals  # noqa: E402
from workbench.batching.live import generate  # noqa: E402
from workbench.timing import PR_GET_TIMERSLACK, PR_SET_TIMERSLACK, _prctl  # noqa: E402

SETTINGS = ("default", "1 ns")


def overshoot_us(sleep_s: float, sleeps: int) -> np.ndarray:
    """How far past its deadline each of ``sleeps`` sleeps of ``sleep_s`` woke (us)."""
    out = np.zeros(sleeps)
    for k in range(sleeps):
        deadline = time.perf_counter_ns() + int(sleep_s * 1e9)
        time.sleep(sleep_s)
        out[k] = (time.perf_counter_ns() - deadline) / 1e3
    return out


def generator_lag_us(rate: float, sleeps: int, seed: int) -> np.ndarray:
    """``generate``'s lags (us) on ``sleeps`` Poisson arrivals at ``rate``, a submit that does nothing."""
    schedule = Arrivals("poisson", rate_rps=rate, count=sleeps, seed=seed).times_ns()
    lags = generate(
        schedule,
        [None] * len(schedule),
        lambda item: (0, time.perf_counter_ns()),
        start_ns=time.perf_counter_ns() + 1_000_000,
    )
    return lags / 1e3


def with_slack(setting: str, measure):
    """``measure()`` with the thread's slack at the default (50 us) or at 1 ns, restored after.
    ``generate`` sets 1 ns itself; under "default" its setting is left out (patched)."""
    prctl, live = _prctl(), sys.modules["workbench.batching.live"]
    old, shipped = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), live.fine_timer_slack
    try:
        prctl(PR_SET_TIMERSLACK, 1 if setting == "1 ns" else 50_000, 0, 0, 0)
        if setting == "default":
            live.fine_timer_slack = contextlib.nullcontext
        return measure()
    finally:
        live.fine_timer_slack = shipped
        prctl(PR_SET_TIMERSLACK, old, 0, 0, 0)


def percentiles(values: np.ndarray) -> str:
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return f"{p50:.1f} | {p90:.1f} | {p99:.1f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sleep-ms", type=float, default=0.7)
    parser.add_argument("--sleeps", type=int, default=500)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args(argv)
    if _prctl() is None:
        print("bench_timer_slack: Linux only (prctl); nothing measured")
        return 0
    sleeps = {s: [] for s in SETTINGS}
    lags = {s: [] for s in SETTINGS}
    for block in range(args.blocks):
        for setting in SETTINGS if block % 2 == 0 else SETTINGS[::-1]:
            sleeps[setting].append(
                with_slack(setting, lambda: overshoot_us(args.sleep_ms / 1e3, args.sleeps))
            )
            lags[setting].append(
                with_slack(setting, lambda b=block: generator_lag_us(args.rate, args.sleeps, b))
            )
    load = os.getloadavg()
    lines = [
        "# bench_timer_slack: how late a paced sender wakes",
        "",
        f"`python benchmarks/bench_timer_slack.py --sleep-ms {args.sleep_ms:g} --sleeps "
        f"{args.sleeps} --blocks {args.blocks} --rate {args.rate:g}`; load average {load[0]:.1f} "
        f"{load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores at the end.",
        "",
        "| measure | timer slack | p50 us | p90 us | p99 us |",
        "|---|---|---|---|---|",
    ]
    for name, table in (
        (f"sleep({args.sleep_ms:g} ms) past its deadline", sleeps),
        (f"generate's lag at {args.rate:g}/s", lags),
    ):
        for setting in SETTINGS:
            lines.append(f"| {name} | {setting} | {percentiles(np.concatenate(table[setting]))} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
