"""Resident memory during a timing run, and the rule that flags a steady leak (docs/json.md).

Every :data:`SAMPLE_EVERY` measured requests the runner reads the RSS (``/proc/self/statm``) and
fits a line through (requests, RSS in MB of 10**6 bytes): ``leak_suspected`` when the slope, the
fit's R² and the growth all exceed their thresholds.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None

SAMPLE_EVERY = 10
LEAK_SLOPE_MB_PER_100 = 1.0
LEAK_R2 = 0.8
LEAK_GROWTH_MB = 50.0
MB = 1_000_000

RssReader = Callable[[], "int | None"]


def rss_bytes() -> int | None:
    """The process's RSS in bytes (elsewhere than Linux the peak, rising under a leak too)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


class MemorySampler:
    """RSS readings every :data:`SAMPLE_EVERY` requests after ``start`` (the warm-up) are done;
    :meth:`summary` gives run.json's ``memory`` section."""

    def __init__(self, read_rss: RssReader = rss_bytes, *, start: int = 0):
        self.read_rss, self.start = read_rss, start
        self.requests: list[int] = []  # measured requests done at each sample
        self.rss_bytes: list[int] = []

    def observe(self, done: int) -> None:
        """Sample when ``done - start`` requests is a multiple of :data:`SAMPLE_EVERY`."""
        measured = done - self.start
        if measured < 0 or measured % SAMPLE_EVERY:
            return
        value = self.read_rss()
        if value is not None:
            self.requests.append(measured)
            self.rss_bytes.append(int(value))

    def summary(self) -> dict[str, Any] | None:
        """``{samples_mb, slope_mb_per_100, r2, growth_mb, leak_suspected}``; None without readings."""
        if not self.rss_bytes:
            return None
        return memory_trend(self.requests, [b / MB for b in self.rss_bytes])


def memory_trend(requests: Sequence[int], rss_mb: Sequence[float]) -> dict[str, Any]:
    """Least-squares trend of RSS (MB) against requests done, and the leak verdict."""
    slope, r2 = _fit(list(requests), list(rss_mb))
    growth = rss_mb[-1] - rss_mb[0]
    slope_100 = None if slope is None else slope * 100
    return {
        "samples_mb": [round(v, 3) for v in rss_mb],
        "slope_mb_per_100": None if slope_100 is None else round(slope_100, 3),
        "r2": None if r2 is None else round(r2, 4),
        "growth_mb": round(growth, 3),
        "leak_suspected": leak_suspected(slope_100, r2, growth),
    }


def leak_suspected(slope_mb_per_100: float | None, r2: float | None, growth_mb: float) -> bool:
    """All three thresholds exceeded."""
    return (
        slope_mb_per_100 is not None
        and r2 is not None
        and slope_mb_per_100 > LEAK_SLOPE_MB_PER_100
        and r2 > LEAK_R2
        and growth_mb > LEAK_GROWTH_MB
    )


def _fit(x: list[int], y: list[float]) -> tuple[float | None, float | None]:
    """Slope (y per x) and R² of the least-squares line."""
    n = len(x)
    if n < 2:
        return None, None
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    if sxx == 0:
        return None, None
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx
    ss_tot = sum((b - my) ** 2 for b in y)
    if n < 3 or ss_tot == 0:
        return slope, None
    ss_res = sum((b - (my + slope * (a - mx))) ** 2 for a, b in zip(x, y))
    return slope, 1.0 - ss_res / ss_tot


def describe(memory: dict[str, Any]) -> str:
    """One line for the console when a leak is suspected."""
    samples = memory["samples_mb"]
    return (
        f"memory grew {memory['growth_mb']:.1f} MB (RSS {samples[0]:.1f} -> {samples[-1]:.1f} MB), "
        f"{memory['slope_mb_per_100']:.1f} MB per 100 requests, R² {memory['r2']:.2f}: "
        "a stage may be keeping every request's data (leak suspected)"
    )


class StageMemory:
    """Per-stage memory in the traced run (reading it would show in the timing run's percentiles):
    RSS growth across each stage and, on CUDA, the peak allocated device memory, in MB."""

    def __init__(
        self, torch_cuda: Any = None, device: str = "cpu", read_rss: RssReader = rss_bytes
    ):
        self._torch = torch_cuda
        self._device = device
        self._read_rss = read_rss
        self._rss: dict[str, list[float]] = {}
        self._cuda: dict[str, float] = {}

    @contextlib.contextmanager
    def measure(self, stage: str, counted: bool = True) -> Iterator[None]:
        """Measure one call of ``stage`` (``counted=False``: the profiler's warm-up)."""
        if not counted:
            yield
            return
        if self._torch is not None:
            self._torch.cuda.reset_peak_memory_stats(self._device)
        before = self._read_rss()
        try:
            yield
        finally:
            after = self._read_rss()
            if before is not None and after is not None:
                self._rss.setdefault(stage, []).append((after - before) / MB)
            if self._torch is not None:
                peak = self._torch.cuda.max_memory_allocated(self._device) / MB
                self._cuda[stage] = max(self._cuda.get(stage, 0.0), peak)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Stage -> ``{rss_delta_mb_mean, rss_delta_mb_max, cuda_max_allocated_mb}``."""
        out = {}
        for stage in dict.fromkeys([*self._rss, *self._cuda]):
            deltas = self._rss.get(stage, [])
            out[stage] = {
                "rss_delta_mb_mean": sum(deltas) / len(deltas) if deltas else None,
                "rss_delta_mb_max": max(deltas) if deltas else None,
                "cuda_max_allocated_mb": self._cuda.get(stage),
            }
        return out
