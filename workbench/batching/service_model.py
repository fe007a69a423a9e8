"""Service-time model: one pipeline call's time per batch size, from profiler or load runs.

A batch of ``b`` items is sampled at quantile ``u`` by taking that quantile (linear between order
statistics) at the two nearest measured sizes and interpolating linearly in ``b``. A batch larger
than the largest measured size is an error; a smaller one than the smallest uses that size's
distribution (an overestimate, :meth:`ServiceModel.extrapolates_below`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..fingerprint import check_poolable
from ..record import Run, load_run
from ..units import NS_PER_S, ns_to_ms


@dataclass(frozen=True)
class ServiceModel:
    """Measured service times: ``samples[size]`` is a sorted int64 array (ns). ``order``: from runs,
    each measured call's quantile within its size's samples, in the order the calls ran (the
    simulator's ``draws="sequence"`` replays it, so that a slow spell stays a spell)."""

    samples: Mapping[int, np.ndarray]
    pipeline: str | None = None
    sources: tuple[str, ...] = ()
    mixed: tuple[tuple[str, object, object], ...] = ()  # fields that differ, pooled (allow_mixed)
    order: np.ndarray | None = None
    # (after idle, back to back): from one-executor load runs, the calls that found the executor
    # idle and those that waited behind another, each a model of its own (``samples`` and ``order``
    # above pool both); the simulator draws from the one its executor's state calls for
    states: tuple["ServiceModel", "ServiceModel"] | None = None

    def __post_init__(self) -> None:
        if not self.samples:
            raise ConfigError(
                "service model has no measurements: pass --service run folders of "
                "`workbench profile` at one or more batch sizes"
            )
        for size, values in self.samples.items():
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
                raise ConfigError(
                    f"service model: batch size must be an integer >= 1, got {size!r}"
                )
            if len(values) == 0:
                raise ConfigError(
                    f"service model has no successful measured requests at batch size {size}"
                )

    @classmethod
    def from_samples(cls, samples: Mapping[int, Iterable[float]], **kw) -> "ServiceModel":
        """A model from raw durations (ns) per batch size; values are sorted here."""
        arrays = {int(b): v if isinstance(v, np.ndarray) else list(v) for b, v in samples.items()}
        return cls({b: np.sort(np.asarray(v, dtype=np.float64)) for b, v in arrays.items()}, **kw)

    @property
    def sizes(self) -> list[int]:
        return sorted(int(b) for b in self.samples)

    def check(self, max_batch_size: int) -> None:
        """Raise ConfigError when batches of ``max_batch_size`` are beyond the measurements."""
        largest = self.sizes[-1]
        if max_batch_size > largest:
            raise ConfigError(
                f"max_batch_size {max_batch_size} is larger than the largest measured batch size {largest}; "
                f"profile the pipeline at --batch-size {max_batch_size} and add that run to --service"
            )

    def extrapolates_below(self, size: int) -> bool:
        return size < self.sizes[0]

    def bracket(self, size: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Sorted samples at the measured sizes around ``size`` and the weight of the upper one."""
        self.check(size)
        lo = max((b for b in self.sizes if b <= size), default=self.sizes[0])
        if lo >= size:  # a measured size, or one below the smallest (its samples)
            return self.samples[lo], self.samples[lo], 0.0
        hi = next(b for b in self.sizes if b > size)
        return self.samples[lo], self.samples[hi], (size - lo) / (hi - lo)

    def mean_ns(self, size: int) -> float:
        """Mean service time (ns) of a batch of ``size`` (means interpolate like the quantiles)."""
        lo, hi, w = self.bracket(size)
        return float((1 - w) * lo.mean() + w * hi.mean())

    def capacity_rps(self, max_batch_size: int, concurrency: int = 1) -> float:
        """Largest sustainable arrival rate: full batches back to back on every executor (requests/s)."""
        return concurrency * max_batch_size * NS_PER_S / self.mean_ns(max_batch_size)

    def describe(self) -> dict:
        """Plain data: measured sizes, counts and means (ms); with states, each state's too."""
        states = (
            {}
            if self.states is None
            else {"states": {n: m.describe()["sizes"] for n, m in zip(STATES, self.states)}}
        )
        return states | {
            "pipeline": self.pipeline,
            "sources": list(self.sources),
            "mixed": [{"field": f, "a": a, "b": b} for f, a, b in self.mixed],
            "sizes": {
                str(b): {
                    "count": int(len(self.samples[b])),
                    "mean_ms": ns_to_ms(float(np.mean(self.samples[b]))),
                }
                for b in self.sizes
            },
        }


def service_model_from_runs(
    runs: Iterable, min_batches: int = 5, allow_mixed: bool = False
) -> ServiceModel:
    """A model from runs (``Run`` s or folders) of one pipeline whose fingerprints differ only in
    ``batch_size`` (``allow_mixed`` pools them anyway, recording the differences). Profiler runs
    give their measured successful requests' times (from the send); load runs a sample per
    successful batch at its size, sizes seen in fewer than ``min_batches`` batches left out."""
    loaded = [item if isinstance(item, Run) else load_run(item) for item in runs]
    labels = [str(run.path) if run.path is not None else run.label for run in loaded]
    names = {run.meta.pipeline for run in loaded}
    if len(names) > 1:
        raise ConfigError(
            f"--service runs are of different pipelines ({', '.join(sorted(map(str, names)))}); "
            "pass runs of one pipeline"
        )
    mixed = tuple(check_poolable(loaded, labels, allow_mixed)) if loaded else ()
    calls = [  # (size, service ns, found the executor idle or None) per call, in the order it ran
        _load_calls(run, min_batches) if run.kind == "load" else _profile_calls(run, label)
        for run, label in zip(loaded, labels)
    ]
    meta = dict(
        pipeline=next(iter(names), None),
        sources=tuple(os.fspath(label) for label in labels),
        mixed=mixed,
    )
    sizes = np.concatenate([c[0] for c in calls]) if calls else np.zeros(0, dtype=np.int64)
    values = np.concatenate([c[1] for c in calls]) if calls else np.zeros(0, dtype=np.int64)
    model = _ordered(sizes, values, meta)
    if not calls or any(c[2] is None for c in calls):
        return model
    idle = np.concatenate([c[2] for c in calls])
    parts = [(sizes[k], values[k]) for k in (idle, ~idle)]
    enough = all(
        np.count_nonzero(part_sizes == b) >= STATE_MIN_CALLS
        for part_sizes, _ in parts
        for b in model.sizes
    )
    if not enough:  # one state too rare to draw from: the pooled calls for both
        return model
    return dataclasses.replace(model, states=tuple(_ordered(*part, meta) for part in parts))


STATES = ("after_idle", "back_to_back")
STATE_MIN_CALLS = 20  # per size and state, or the states are pooled


def _ordered(sizes: np.ndarray, values: np.ndarray, meta: dict) -> ServiceModel:
    """A model of the calls ``(sizes, values)`` with their ``order``."""
    samples = {int(b): values[sizes == b] for b in np.unique(sizes)}
    model = ServiceModel.from_samples(samples, **meta)
    return dataclasses.replace(model, order=_quantiles(model, sizes, values))


def _quantiles(model: ServiceModel, sizes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each call's quantile (0..1) within its size's sorted samples, the calls' order kept."""
    out = np.zeros(len(values))
    for b, sorted_values in model.samples.items():
        mine = sizes == b
        n = len(sorted_values)
        lo = np.searchsorted(sorted_values, values[mine], side="left")
        hi = np.searchsorted(sorted_values, values[mine], side="right") - 1
        out[mine] = (lo + hi) / 2 / (n - 1) if n > 1 else 0.5  # ties: their middle rank
    return out


def _profile_calls(run, label: str) -> tuple[np.ndarray, np.ndarray, None]:
    """``(sizes, service ns, None)`` of a profile run's measured successful requests, in order."""
    if run.kind != "profile":
        raise ConfigError(
            f"--service {label}: a {run.kind!r} run; the service model needs `workbench profile` "
            "or `workbench load` runs"
        )
    size = run.config.batch_size  # an integer >= 1 when present (checked when the run was read)
    if size is None:
        raise ConfigError(f"--service {label}: run.json has no config.batch_size")
    req = run.requests[~run.requests["warmup"].astype(bool) & run.requests["ok"].astype(bool)]
    durs = req["dur_ns"].to_numpy(dtype=np.int64)
    if "lag_ns" in req:  # a paced run times from the due time: the service is from the send
        durs = durs - req["lag_ns"].to_numpy(dtype=np.int64)
    if not len(durs):
        raise ConfigError(
            f"service model has no successful measured requests at batch size {size} ({label})"
        )
    if not durs.any():
        raise ConfigError(
            f"--service {label}: requests.parquet column 'dur_ns' is 0 for every measured request; "
            "not a service time (a damaged or hand-edited run)"
        )
    return np.full(len(durs), size, dtype=np.int64), durs, None


OCCUPANCY_COLUMNS = ("arrival_ns", "batch_wait_ns", "queue_wait_ns")


def _load_calls(run, min_batches: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(sizes, service ns, found the executor idle)`` of a load run's successful batches, in
    the order they ran; sizes seen in fewer than ``min_batches`` batches left out.

    With one executor the service is the executor's *occupancy*: from when it could take the
    batch (the batch closed, or the batch before ended, whichever is later) to the batch's end,
    so the hand-over to an idle executor (20-75 us a request in ``benchmarks/bench_sim_live.py``'s
    rounds) and the turnaround between queued batches, which the stage clocks do not see, are the
    server's, as a simulated server has them. With more
    executors (which one ran a batch is not recorded) it is the pipeline call's own time, and no
    batch says whether it found the executor idle (None). After an idle gap a call is slower than
    back to back (median occupancy 0.52-0.75 ms against 0.47-0.59 for the tabular example in
    ``benchmarks/bench_sim_live.py``'s rounds), so the simulator draws each batch from the calls
    of its executor's state."""
    req = run.requests[run.requests["batch"] >= 0]  # dispatched
    cols = {c: (c, "first") for c in (*OCCUPANCY_COLUMNS, "service_ns") if c in req}
    batches = req.groupby("batch").agg(size=("batch", "size"), ok=("ok", "all"), **cols)
    service = batches["service_ns"].to_numpy(dtype=np.int64)
    policy = getattr(getattr(run.meta, "load", None), "policy", None) or {}
    idle = None
    if all(c in batches for c in OCCUPANCY_COLUMNS) and policy.get("concurrency", 1) == 1:
        closed = (batches["arrival_ns"] + batches["batch_wait_ns"]).to_numpy(dtype=np.int64)
        end = closed + batches["queue_wait_ns"].to_numpy(dtype=np.int64) + service
        before = np.concatenate([[np.iinfo(np.int64).min], end[:-1]])
        service, idle = end - np.maximum(closed, before), closed >= before
    ok = batches["ok"].to_numpy(dtype=bool)
    sizes, service = batches["size"].to_numpy(dtype=np.int64)[ok], service[ok]
    counts = pd.Series(sizes).value_counts()
    kept = np.isin(sizes, counts[counts >= min_batches].index)
    return sizes[kept], service[kept], None if idle is None else idle[ok][kept]
