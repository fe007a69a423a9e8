"""How fast the batching simulator runs, on one core, against SimPy and the reference rule.

    python benchmarks/bench_simulator.py [--requests 1000000] [--repeat 3] [--json PATH]

Cases: the worst case for the loop (max_batch_size 1: one batch per request),
a batching case near saturation, and bursty arrivals. The process is pinned to
one CPU. Peers, run on the same arrivals with the same service times:

- SimPy 4 (process-based discrete-event simulation), the batcher written the
  obvious SimPy way; skipped with a note when ``simpy`` is not importable
  (it is not in requirements.lock: ``pip install simpy==4.1.2`` to compare);
- ``tests.support.dispatch.dispatch_schedule``, the event-by-event reference.

Peers are run on fewer requests (``--peer-requests``) and compared in
requests per second; each peer's mean end to end is checked against ours.
Goal: 10^6 requests in under 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.batching.arrivals import Arrivals  # noqa: E402
from tests.support.dispatch import dispatch_schedule  # noqa: E402
from workbench.batching.policy import BatchPolicy  # noqa: E402
from workbench.batching.service_model import ServiceModel  # noqa: E402
from workbench.batching.simulator import simulate  # noqa: E402
from workbench.batching.summary import load_summary  # noqa: E402

MS = 1_000_000


def model() -> ServiceModel:
    """A service model like a profiled one: 500 samples per size at sizes 1, 2, 4, 8, 16 (ms: 1 + 0.25 per item)."""
    rng = np.random.default_rng(0)
    return ServiceModel.from_samples(
        {b: (1 + 0.25 * b) * MS * rng.gamma(20, 1 / 20, 500) for b in (1, 2, 4, 8, 16)}
    )


CASES = [
    ("mb1 w0 poisson rho0.7", BatchPolicy(1, 0.0), "poisson", 0.7),
    ("mb16 w5 poisson rho0.9", BatchPolicy(16, 5.0), "poisson", 0.9),
    ("mb8 w2 bursty rho0.6", BatchPolicy(8, 2.0), "bursty", 0.6),
    ("mb16 w2 c2 poisson rho0.8", BatchPolicy(16, 2.0, 2), "poisson", 0.8),
]


def time_ours(m, arrivals, policy, repeat: int) -> tuple[float, dict]:
    best, summary = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        sim = simulate(m, arrivals, policy)
        summary = load_summary(sim.requests, policy.concurrency)
        best = min(best, time.perf_counter() - t0)
    return best, summary


def simpy_e2e_mean_ms(
    arrivals_ns: np.ndarray, service_of_size, policy: BatchPolicy
) -> float | None:
    """The same batcher in SimPy: a source, a batcher process, ``concurrency`` executors (a Resource)."""
    try:
        import simpy
    except ImportError:
        return None
    env, queue, done = simpy.Environment(), [], []
    signal = [env.event()]
    executors = simpy.Resource(env, policy.concurrency)
    b, w = policy.max_batch_size, policy.max_wait_ns

    def source():
        for a in arrivals_ns.tolist():
            if a > env.now:
                yield env.timeout(a - env.now)
            queue.append(a)
            ev, signal[0] = signal[0], env.event()
            ev.succeed()

    def execute(batch, request):
        yield env.timeout(service_of_size(len(batch)))
        executors.release(request)
        done.extend(env.now - a for a in batch)

    def batcher():
        slot_free = float("-inf")
        while True:  # env.run() returns once the source is done and nothing is scheduled
            if not queue:
                yield signal[0]
                continue
            due = queue[0] + w
            if len(queue) >= b:
                due = min(due, queue[b - 1])
            due = max(due, slot_free)
            if env.now < due:
                yield env.timeout(due - env.now) | signal[0]
                continue
            batch = [a for a in queue[:b] if a <= due]
            del queue[: len(batch)]
            request = executors.request()
            yield request  # the closed batch waits here: the one-deep handoff
            slot_free = env.now
            env.process(execute(batch, request))

    env.process(source())
    env.process(batcher())
    env.run()
    return float(np.mean(done)) / MS


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--peer-requests", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    m, rows = model(), []
    fixed = ServiceModel.from_samples(
        {s: [(1 + 0.25 * s) * MS] for s in (1, 16)}
    )  # deterministic: peers agree exactly
    print(
        f"{'case':<28}{'requests':>10}{'ours s':>9}{'ours req/s':>12}{'simpy req/s':>13}{'ratio':>8}"
        f"{'reference req/s':>17}{'ratio':>8}{'agree':>7}"
    )
    for name, policy, process, rho in CASES:
        rate = rho * m.capacity_rps(policy.max_batch_size, policy.concurrency)
        arrivals = Arrivals(process, rate_rps=rate, count=args.requests, seed=0)
        secs, summary = time_ours(m, arrivals, policy, args.repeat)
        peer_arr = Arrivals(process, rate_rps=rate, count=args.peer_requests, seed=0).times_ns()
        ours_small = load_summary(simulate(fixed, peer_arr, policy).requests)["end_to_end"][
            "mean_ms"
        ]
        t0 = time.perf_counter()
        simpy_mean = simpy_e2e_mean_ms(peer_arr, lambda s: (1 + 0.25 * s) * MS, policy)
        simpy_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        dispatch_schedule(
            peer_arr, [(1 + 0.25 * policy.max_batch_size) * MS] * len(peer_arr), policy
        )
        ref_s = time.perf_counter() - t0
        ours_rps = args.requests / secs
        simpy_rps = args.peer_requests / simpy_s if simpy_mean is not None else None
        ref_rps = args.peer_requests / ref_s
        agree = simpy_mean is None or abs(simpy_mean - ours_small) <= 1e-6 * max(1.0, ours_small)
        rows.append(
            {
                "case": name,
                "requests": args.requests,
                "seconds": secs,
                "requests_per_s": ours_rps,
                "simpy_requests_per_s": simpy_rps,
                "reference_requests_per_s": ref_rps,
                "simpy_mean_ms": simpy_mean,
                "ours_mean_ms_same_input": ours_small,
                "simpy_agrees": agree,
                "p99_ms": summary["end_to_end"]["p99_ms"],
                "mean_batch_size": summary["mean_batch_size"],
            }
        )
        fmt = lambda x: f"{x:,.0f}" if x else "-"  # noqa: E731
        print(
            f"{name:<28}{args.requests:>10}{secs:>9.3f}{fmt(ours_rps):>12}{fmt(simpy_rps):>13}"
            f"{(f'{ours_rps / simpy_rps:.1f}x' if simpy_rps else '-'):>8}{fmt(ref_rps):>17}"
            f"{(f'{ours_rps / ref_rps:.1f}x' if ref_rps else '-'):>8}{str(agree):>7}"
        )
    if simpy_mean is None:
        print("simpy not importable: peer column skipped (pip install simpy==4.1.2 to compare)")
    print(
        f"goal: 10^6 requests under 2 s on one core; worst case here {max(r['seconds'] for r in rows):.3f} s"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"cases": rows, "cpu_pinned": True}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
