"""Open-loop arrival schedules, in integer ns from the schedule's start, shared by the live load
generator and the simulator: ``poisson`` (mean gap ``1 / rate_rps``), ``bursty`` (on/off: Poisson at
the peak rate ``rate_rps * (on_ms + off_ms) / on_ms`` in ``on_ms`` windows, none in ``off_ms``
windows, starting "on") and ``replay`` (a CSV file, :func:`read_arrivals_csv`). A schedule ends at
``count`` requests and/or ``duration_s`` seconds, whichever comes first.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, is_int
from ..units import NS_PER_S, ms_to_ns

PROCESSES = ("poisson", "bursty", "replay")
# a replayed file spans at most this (int64 ns hold 292 years; 1e300 s wrapped)
MAX_REPLAY_S = 7 * 86_400
CSV_UNITS = {"arrival_ns": 1, "arrival_us": 1_000, "arrival_ms": 1_000_000, "arrival_s": NS_PER_S}


@dataclass(frozen=True)
class Arrivals:
    """An arrival process and its bounds (``rate_rps``: mean requests/s, unused by ``replay``;
    ``seed``: numpy PCG64's; ``on_ms``/``off_ms``: ``bursty``'s windows; ``path``: the CSV)."""

    process: str = "poisson"
    rate_rps: float | None = None
    count: int | None = None
    duration_s: float | None = None
    seed: int = 0
    on_ms: float = 50.0
    off_ms: float = 150.0
    path: str | None = None

    def __post_init__(self) -> None:
        if self.process not in PROCESSES:
            raise ConfigError(
                f"arrivals must be one of {', '.join(PROCESSES)}, got {self.process!r}"
            )
        if self.count is not None and not (is_int(self.count) and self.count >= 1):
            raise ConfigError(f"requests (count) must be an integer >= 1, got {self.count!r}")
        if self.duration_s is not None and not _positive(self.duration_s):
            raise ConfigError(f"duration must be > 0 seconds, got {self.duration_s!r}")
        if self.process == "replay":
            if not self.path:
                raise ConfigError("replayed arrivals need a CSV file (path=...)")
            return
        if not _positive(self.rate_rps):
            raise ConfigError(f"rate must be > 0 requests/s (--rate), got {self.rate_rps!r}")
        if self.count is None and self.duration_s is None:
            raise ConfigError("an arrival process needs a bound: requests (count) and/or duration")
        on_ok = _positive(self.on_ms) and ms_to_ns(self.on_ms) >= 1
        if self.process == "bursty" and not (
            on_ok and (self.off_ms == 0 or _positive(self.off_ms))
        ):
            raise ConfigError(
                f"bursty arrivals need on_ms of at least 1 ns (1e-06 ms) and a finite off_ms >= 0, "
                f"got on_ms={self.on_ms!r}, off_ms={self.off_ms!r}"
            )

    def times_ns(self) -> np.ndarray:
        """Sorted int64 arrival offsets (ns from the start), within the bounds."""
        if self.process == "replay":
            times = read_arrivals_csv(self.path)
        else:
            times = self._poisson_ns() if self.process == "poisson" else self._bursty_ns()
        if self.duration_s is not None:
            times = times[times < int(round(self.duration_s * NS_PER_S))]
        return times if self.count is None else times[: self.count]

    def params(self) -> dict[str, Any]:
        """The process parameters as plain data."""
        out: dict[str, Any] = {k: getattr(self, k) for k in ("process", "count", "duration_s")}
        if self.process == "replay":
            return out | {"path": str(self.path)}
        out |= {"rate_rps": float(self.rate_rps), "seed": self.seed}
        if self.process == "bursty":
            out |= {
                "on_ms": self.on_ms,
                "off_ms": self.off_ms,
                "peak_rate_rps": self.peak_rate_rps,
            }
        return out

    @property
    def peak_rate_rps(self) -> float:
        """``bursty``'s rate inside its on windows (requests/s)."""
        return float(self.rate_rps) * (self.on_ms + self.off_ms) / self.on_ms

    def _poisson_ns(self) -> np.ndarray:
        """Poisson arrivals at ``rate_rps`` (int64 ns), at least covering the bounds."""
        rate, count, duration_s = self.rate_rps, self.count, self.duration_s
        rng = np.random.default_rng(self.seed)
        n = _gaps_needed(rate, count, duration_s)
        t = np.cumsum(rng.exponential(NS_PER_S / rate, n))
        # drawing more is astronomically rare
        while duration_s is not None and count is None and t[-1] < duration_s * NS_PER_S:
            t = np.concatenate([t, t[-1] + np.cumsum(rng.exponential(NS_PER_S / rate, n))])
        return np.floor(t).astype(np.int64)

    def _bursty_ns(self) -> np.ndarray:
        """On/off arrivals with long-run rate ``rate_rps`` (int64 ns): Poisson at the peak rate in
        busy time, mapped to wall time by an off window after every ``on_ms`` of it."""
        on_ms, off_ms, duration_s = self.on_ms, self.off_ms, self.duration_s
        peak = self.peak_rate_rps
        busy_duration = (
            None if duration_s is None else duration_s * on_ms / (on_ms + off_ms) + on_ms / 1e3
        )
        n = _gaps_needed(peak, self.count, busy_duration)
        busy = np.cumsum(np.random.default_rng(self.seed).exponential(NS_PER_S / peak, n))
        wall = busy + np.floor(busy / ms_to_ns(on_ms)) * ms_to_ns(off_ms)
        return np.floor(wall).astype(np.int64)


def _positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _gaps_needed(rate: float, count: int | None, duration_s: float | None) -> int:
    """Enough draws to cover the bounds with overwhelming probability (mean + 8 sd + 16)."""
    expected = rate * duration_s if duration_s is not None else math.inf
    n = min(count if count is not None else math.inf, expected + 8 * math.sqrt(expected) + 16)
    return int(math.ceil(n))


def read_arrivals_csv(path: str | Path) -> np.ndarray:
    """Arrival timestamps of a one-column CSV file as int64 ns offsets from the first. The header
    names the unit (:data:`CSV_UNITS`; none: seconds); what is not sorted finite numbers within
    :data:`MAX_REPLAY_S` of the first is a ConfigError naming the file and row."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--arrivals {p}: no such file (expected a CSV of arrival timestamps)")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"--arrivals {p}: not a text file (byte {exc.start} is not UTF-8)"
        ) from None
    if "\0" in text:
        raise ConfigError(f"--arrivals {p}: not a text file (byte {text.index(chr(0))} is NUL)")
    rows = [r for r in csv.reader(io.StringIO(text, newline="")) if r and any(c.strip() for c in r)]
    scale, start = NS_PER_S, 0
    if rows and rows[0][0].strip() in CSV_UNITS:
        scale, start = CSV_UNITS[rows[0][0].strip()], 1
    values = []
    for line, row in enumerate(rows[start:], start=start + 1):
        try:
            values.append(float(row[0]))
        except ValueError:
            raise ConfigError(
                f"--arrivals {p}: row {line}: {row[0]!r} is not a number "
                f"(header must be one of {', '.join(CSV_UNITS)})"
            ) from None
    if not values:
        raise ConfigError(f"--arrivals {p}: the file has no arrival timestamps")
    t = np.asarray(values, dtype=np.float64)
    if not np.isfinite(t).all():
        raise ConfigError(f"--arrivals {p}: timestamps must be finite numbers")
    back = np.flatnonzero(np.diff(t) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise ConfigError(
            f"--arrivals {p}: timestamps must be sorted; row {i + start + 1} ({values[i]}) "
            f"is earlier than the row before it ({values[i - 1]})"
        )
    offsets = t - t[0]
    past = np.flatnonzero(offsets > MAX_REPLAY_S * NS_PER_S / scale)
    if past.size:
        i = int(past[0])
        raise ConfigError(
            f"--arrivals {p}: row {i + start + 1} ({values[i]}) is more than {MAX_REPLAY_S:_} s "
            f"(7 days) after the first timestamp ({values[0]}); is the header's unit right?"
        )
    return np.rint(offsets * scale).astype(np.int64)
