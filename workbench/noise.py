"""Was the machine quiet while a run measured? ``/proc`` readings before and after, and a rule.

A run is ``noisy`` past :data:`THRESHOLDS` (other processes' cores, steal, load per core) or when
torch used more threads than the free cores (its pool busy-waits, so a contended core slows every
stage); its own dispersion is recorded, not judged. Without ``/proc`` it is None (docs/json.md).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .analysis.stats import percentiles
from .fingerprint import _cores

THRESHOLDS = {"other_cores": 0.25, "steal_pct": 5.0, "load_per_core": 1.0}
NOT_MEASURED = "not measured on this OS"
# /proc/stat counts 1/100 s ticks: a shorter run reads other processes' CPU coarsely
COARSE_BELOW_S = 1.0
_BUSY = ("user", "nice", "system", "irq", "softirq")
_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def stat_ticks(path: str) -> int:
    """utime + stime (clock ticks) of a process's or a thread's ``/proc/.../stat``."""
    with open(path) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()  # the command name may hold spaces
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


class Readings:
    """The machine's counters, from ``/proc`` in clock ticks (tests override the methods)."""

    def available(self) -> bool:
        return os.path.exists("/proc/stat") and os.path.exists("/proc/self/stat")

    def loadavg_1m(self) -> float | None:
        try:
            return os.getloadavg()[0]
        except (OSError, AttributeError):
            return None

    def cpu_ticks(self) -> dict[str, int]:
        with open("/proc/stat") as fh:
            values = fh.readline().split()[1:]
        return {name: int(v) for name, v in zip(_STAT_FIELDS, values)}

    def own_ticks(self) -> int:
        return stat_ticks("/proc/self/stat")

    def ticks_per_s(self) -> int:
        return os.sysconf("SC_CLK_TCK")

    def wall_s(self) -> float:
        return time.monotonic()

    def cores(self) -> int:
        return _cores()

    def governor(self) -> str | None:
        try:
            with open("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") as fh:
                return fh.read().strip() or None
        except OSError:
            return None


@dataclass
class NoiseProbe:
    """Readings at the start of a run; :meth:`finish` takes the second set and applies the rule."""

    readings: Readings = field(default_factory=Readings)
    _start: dict[str, Any] | None = None

    def start(self) -> "NoiseProbe":
        r = self.readings
        if r.available():
            self._start = {
                "load": r.loadavg_1m(),
                "cpu": r.cpu_ticks(),
                "own": r.own_ticks(),
                "wall": r.wall_s(),
            }
        return self

    def finish(self, torch_threads: int | None, e2e_ns=None) -> dict[str, Any]:
        """The run's ``noise`` record; ``e2e_ns``: the measured end-to-end times."""
        r = self.readings
        if self._start is None or not r.available():
            return {"noisy": None, "reasons": [NOT_MEASURED], "fix": None}
        s = self._start
        cpu, own, wall = r.cpu_ticks(), r.own_ticks(), r.wall_s()
        hz, elapsed = r.ticks_per_s(), max(wall - s["wall"], 1e-9)
        busy = sum(cpu.get(k, 0) - s["cpu"].get(k, 0) for k in _BUSY)
        total = sum(cpu.get(k, 0) - s["cpu"].get(k, 0) for k in _STAT_FIELDS)
        steal = cpu.get("steal", 0) - s["cpu"].get("steal", 0)
        # its own dispersion (None under 2 times), from its end-to-end times
        e2e = np.asarray([] if e2e_ns is None else e2e_ns, dtype=np.int64)
        q1, med, q3, p99 = percentiles(e2e, [25, 50, 75, 99]) if e2e.size >= 2 else [None] * 4
        readings = {
            "load_before_1m": s["load"],
            "load_after_1m": r.loadavg_1m(),
            "other_cores": round(max(busy - (own - s["own"]), 0) / hz / elapsed, 3),
            "steal_pct": round(100.0 * steal / total, 2) if total > 0 else 0.0,
            "cores": r.cores(),
            "torch_threads": torch_threads,
            "governor": r.governor(),
            "duration_s": round(elapsed, 3),
            "iqr_over_median": round(float((q3 - q1) / med), 4) if med else None,
            "p99_over_p50": round(float(p99 / med), 4) if med else None,
            "note": (
                f"the run took {elapsed:.2f} s: CPU counters tick {hz} times a second, so other_cores "
                "is coarse"
            )
            if elapsed < COARSE_BELOW_S
            else None,
        }
        return assess(readings)


def assess(readings: dict[str, Any], thresholds: dict[str, float] | None = None) -> dict[str, Any]:
    """``readings | {noisy, reasons, fix, thresholds}`` by the module's rule."""
    t = THRESHOLDS | (thresholds or {})
    cores, other = readings["cores"], readings["other_cores"]
    threads, load = readings.get("torch_threads"), readings.get("load_before_1m")
    reasons = []
    if other > t["other_cores"]:
        reasons.append(f"other processes used {other:.1f} of {cores} cores during the run")
    stolen = readings["steal_pct"] > t["steal_pct"]
    if stolen:
        reasons.append(
            f"steal time was {readings['steal_pct']:.1f} % (the hypervisor ran other VMs on these CPUs)"
        )
    free = max(math.floor(cores - other + 0.5), 0)
    if threads is not None and threads > free:
        reasons.append(
            f"torch used {threads} thread{'s' if threads != 1 else ''} with {free} of {cores} cores free"
        )
    if load is not None and load > t["load_per_core"] * cores:
        reasons.append(f"load average was {load:.2f} on {cores} cores before the run")
    fix = []
    if reasons and threads is not None and threads > 1:
        fix.append("--threads 1 (PipelineConfig(threads=1))")
    if reasons:
        fix.append("a quieter machine (stop other jobs, then measure again)")
    if stolen:
        fix.append("a dedicated host")
    return readings | {
        "noisy": bool(reasons),
        "reasons": reasons,
        "fix": " or ".join(fix) or None,
        "thresholds": t,
    }


def noise_line(noise: Mapping[str, Any] | Any | None) -> str:
    """The noise verdict as the one line every command prints; ``noise``: a dict, a record's
    section (``to_dict()``) or None."""
    if noise is not None and not isinstance(noise, Mapping):
        noise = noise.to_dict()
    if not noise:
        return "noise: not measured"
    if noise.get("noisy") is None:
        return f"noise: unknown ({'; '.join(noise.get('reasons') or [NOT_MEASURED])})"
    if not noise["noisy"]:
        # a v3 run.json may hold null for either (not read on that run): say so, not a crash
        other, steal = noise.get("other_cores"), noise.get("steal_pct")
        return (
            f"noise: quiet (other processes {'?' if other is None else f'{other:.2f}'} cores, "
            f"steal {'?' if steal is None else f'{steal:.1f}'} %)"
        )
    fix = f"; fix: {noise['fix']}" if noise.get("fix") else ""
    return f"noise: NOISY: {'; '.join(noise['reasons'])}{fix}"
