"""The open-loop load generator: submit each request at its scheduled time, never later silently.

Open loop: the schedule does not wait for responses (a closed-loop client slows down exactly when
the server does, hiding the queue). A request sent late (sleep granularity, the GIL, a busy core)
records its lag, and its end to end is timed from its due time (as wrk2 does), so coordinated
omission cannot hide the lag. A run whose lag p99 reaches :data:`LAG_P99_LIMIT_MS` is marked
``behind_schedule``: ``gate`` will not judge it (exit 4).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..analysis.stats import percentiles
from ..timing import Clock
from ..units import ms_to_ns, ns_to_ms, ns_to_s

Submit = Callable[[Any], tuple[int, int]]
# A generator lag p99 at or above this marks a run behind its schedule (and noisy): about 5x what
# the generator holds on a quiet machine (benchmarks/results/loadgen.md).
LAG_P99_LIMIT_MS = 1.0


def generate(
    schedule_ns: np.ndarray,
    items: Sequence[Any],
    submit: Submit,
    *,
    start_ns: int,
    clock: Clock = time.perf_counter_ns,
    sleep: Callable[[float], None] = time.sleep,
    cancel: Any = None,
    stop: Callable[[int], bool] | None = None,
) -> np.ndarray:
    """Submit ``items[k]`` at ``start_ns + schedule_ns[k]``; return each submission's lag (int64 ns,
    ``max(0, arrival_ns - due)``, ``submit(item) -> (request id, arrival_ns)``). ``cancel.is_set()``
    or ``stop(offset)`` stops early (fewer lags); Ctrl-C propagates with the lags as ``lags_ns``."""
    lags = np.zeros(len(schedule_ns), dtype=np.int64)
    k = 0
    try:
        for k, offset in enumerate(schedule_ns.tolist()):
            due = start_ns + offset
            now = clock()
            if now < due:
                sleep(ns_to_s(due - now))
            if (cancel is not None and cancel.is_set()) or (stop is not None and stop(offset)):
                return lags[:k]
            _, arrival = submit(items[k])
            lags[k] = max(0, arrival - due)
    except KeyboardInterrupt as stop:
        stop.lags_ns = lags[:k]  # request k was not submitted (or its lag not taken)
        raise
    return lags


def lag_percentiles(lags_ns: np.ndarray) -> dict[str, float]:
    """``{p50_ms, p99_ms, max_ms}`` of the generator's lag (0 for an empty run)."""
    if lags_ns.size == 0:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    p50, p99 = percentiles(lags_ns, [50, 99])
    return {
        "p50_ms": ns_to_ms(float(p50)),
        "p99_ms": ns_to_ms(float(p99)),
        "max_ms": ns_to_ms(float(lags_ns.max())),
    }


def lag_summary(lags_ns: np.ndarray, late_threshold_ms: float = 1.0) -> dict[str, Any]:
    """The load meta's lag keys: worst and p99 lag, ``late_requests`` (lag > threshold) and
    ``behind_schedule``."""
    lag = lag_percentiles(lags_ns)
    return {
        "generator_lag_ms": lag["max_ms"],
        "generator_lag_p99_ms": lag["p99_ms"],
        "late_requests": int((lags_ns > ms_to_ns(late_threshold_ms)).sum()),
        "late_threshold_ms": late_threshold_ms,
        "behind_schedule": behind_schedule(lag["p99_ms"]),
        "lag_p99_limit_ms": LAG_P99_LIMIT_MS,
    }


def behind_schedule(lag_p99_ms: float | None) -> bool:
    """Whether a run's ``load.generator_lag_p99_ms`` (None: not scheduled) reaches the limit."""
    return lag_p99_ms is not None and lag_p99_ms >= LAG_P99_LIMIT_MS


def lag_noise(noise: dict[str, Any], lag: dict[str, float]) -> dict[str, Any]:
    """A run's noise record with ``generator_lag_p99_ms``, and ``noisy`` for a lag at the limit."""
    out = dict(noise) | {"generator_lag_p99_ms": lag["p99_ms"]}
    if lag["p99_ms"] < LAG_P99_LIMIT_MS:
        return out
    reasons = list(out.get("reasons") or []) if out.get("noisy") is not None else []
    reasons.append(
        f"the load generator fell behind its schedule: lag p99 {lag['p99_ms']:.3f} ms "
        f"(max {lag['max_ms']:.3f} ms) >= {LAG_P99_LIMIT_MS:g} ms: the client could not hold this "
        "rate here (a busy machine, or a rate above what it can send)"
    )
    fix = "a lower --rate, or the load generator on another machine"
    return out | {
        "noisy": True,
        "reasons": reasons,
        "fix": fix if not out.get("fix") else f"{out['fix']} or {fix}",
    }
