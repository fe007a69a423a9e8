"""Service-time model: one pipeline call's time per batch size, from profiler or load runs.

A batch of ``b`` items is sampled at quantile ``u`` by taking that quantile (linear between order
statistics) at the two nearest measured sizes and interpolating linearly in ``b``. A batch larger
than the largest measured size is an error; a smaller one than the smallest uses that size's
distribution (an overestimate, :meth:`ServiceModel.extrapolates_below`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..fingerprint import check_poolable
from ..record import Run, load_run
from ..units import NS_PER_S, ns_to_ms


@dataclass(frozen=True)
class ServiceModel:
    """Measured service times: ``samples[size]`` is a sorted int64 array (ns)."""

    samples: Mapping[int, np.ndarray]
    pipeline: str | None = None
    sources: tuple[str, ...] = ()
    mixed: tuple[tuple[str, object, object], ...] = ()  # fields that differ, pooled (allow_mixed)

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
        """Plain data: measured sizes, counts and means (ms)."""
        return {
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
    pooled: dict[int, list[np.ndarray]] = {}
    sources = []
    for run, label in zip(loaded, labels):
        per_size = (
            _load_samples(run, min_batches) if run.kind == "load" else _profile_samples(run, label)
        )
        for size, values in per_size.items():
            pooled.setdefault(size, []).append(values)
        sources.append(os.fspath(label))
    samples = {b: np.concatenate(v) for b, v in pooled.items()}
    return ServiceModel.from_samples(
        samples, pipeline=next(iter(names), None), sources=tuple(sources), mixed=mixed
    )


def _profile_samples(run, label: str) -> dict[int, np.ndarray]:
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
    if len(durs) and not durs.any():
        raise ConfigError(
            f"--service {label}: requests.parquet column 'dur_ns' is 0 for every measured request; "
            "not a service time (a damaged or hand-edited run)"
        )
    return {size: durs}


def _load_samples(run, min_batches: int) -> dict[int, np.ndarray]:
    req = run.requests
    ok = req.groupby("batch")["ok"].all()
    batches = (
        req[req["batch"].isin(ok[ok].index) & (req["batch"] >= 0)]
        .groupby("batch")
        .agg(size=("batch", "size"), service_ns=("service_ns", "first"))
    )
    sizes = batches.groupby("size")["service_ns"]
    return {int(b): g.to_numpy(dtype=np.int64) for b, g in sizes if len(g) >= min_batches}
