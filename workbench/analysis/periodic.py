"""Periodic spikes: slow requests that come back at a fixed period (a cache snapshot, a flush, a cron).

The latency-over-run series is turned into the time the run was slow: a bin of ``BIN_NS`` is slow while
a spike request (end to end over ``SPIKE_RATIO`` x the median) is in flight. The autocorrelation of
that series past its first zero (the width of one episode) peaks at the period; the spacing of the
episodes measures it. A finding names the period, the episodes' width, the share of requests that
were spikes and the stage their excess time landed in ("every 250 ms, 31 ms wide, 12 % of requests").

What it can see: periods from about twice an episode's width (the autocorrelation must fall to zero
between episodes) up to a fifth of the run's span (``MIN_PERIODS`` episodes), and only where requests
sample time often enough to land in the episodes (a paced run at rate r sees episodes wider than
about 1/r).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..units import ns_to_ms
from .matrix import measured_ok, stage_matrix

SPIKE_RATIO = 2.0  # a request whose end to end is over 2x the median is a spike
MIN_SPIKES = 5
MIN_PERIODS = 5  # episodes (and so periods) the run must span, on the chain
MIN_ACF = 0.25  # the autocorrelation at the period, of the slow-time series
TOLERANCE = 0.2  # an episode is on the chain within 20 % of a whole number of periods
REGULAR_SHARE = 0.3  # of the run's periods that must hold a deep episode on the periodic chain
ANCHORS = 64  # the chain starts at one of 64 deep episodes spread over the run
BIN_NS = 1_000_000
MAX_BINS = 1 << 22
SUBHARMONIC_GAIN = 1.5  # a chain at lag / k this much longer is the period's
HARMONIC_SHARE = 0.7  # a peak at lag / k this high against the highest one is the period
WEIGHT_CAP_PCT = 90  # a spike weighs its end to end up to the spikes' 90th percentile
MERGE_BINS = 2  # slow stretches closer than this are one episode


def periodic_spikes(
    requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str], bin_ns: int = BIN_NS
) -> dict[str, Any] | None:
    """The periodic spikes of a run's measured requests, or None when there are none.

    In: ``requests`` (``request``, ``warmup``, ``ok``, ``start_ns``, ``dur_ns``) and ``stages``
    (``request``, ``stage``, ``dur_ns``) tables. Out: ``period_ms``, ``width_ms`` (median episode),
    ``episodes``, ``spikes`` (requests in them), ``share_of_requests`` and ``share_of_slowest_1pct``
    (0..1: of the slowest 1 %, at least one request, those in the spikes), ``acf`` (at the
    period), ``stage`` (the stage with most of the spikes' time above its median), ``stage_share``
    (0..1 of that excess) and ``sentence``.
    """
    req, st = measured_ok(requests, stages)
    if len(req) < 2 * MIN_SPIKES:
        return None
    start = req["start_ns"].to_numpy(np.int64)
    dur = req["dur_ns"].to_numpy(np.int64)
    spike = np.flatnonzero(dur > SPIKE_RATIO * float(np.median(dur)))
    if len(spike) < MIN_SPIKES:
        return None
    origin, span = int(start.min()), int((start + dur).max() - start.min())
    bin_ns = max(bin_ns, -(-span // MAX_BINS))
    first, last = (start[spike] - origin) // bin_ns, (start[spike] + dur[spike] - origin) // bin_ns
    weight = np.minimum(
        dur[spike], np.percentile(dur[spike], WEIGHT_CAP_PCT)
    )  # one stall is not a period
    slow = _slow_bins(first, last, ns_to_ms(weight), span // bin_ns + 1)
    lag, acf = _period_lag(slow)
    if lag is None or acf < MIN_ACF:
        return None
    periods = len(slow) / lag
    deep = _deep_episodes(_episodes(slow > 0), first, dur[spike], periods)
    episodes, period = _periodic_chain(deep, lag, periods)
    for k in (3, 2):  # episodes between the chain's: the lag was a harmonic of the period
        finer, fine_period = _periodic_chain(deep, max(1, round(lag / k)), periods * k)
        if len(finer) >= SUBHARMONIC_GAIN * len(episodes) and len(finer):
            episodes, period = finer, fine_period
            break
    if not len(episodes):
        return None
    inside = _in_episodes(first, episodes)
    slowest = np.argsort(-dur, kind="stable")[: max(1, len(dur) // 100)]
    stage, stage_share = _excess_stage(req.iloc[spike[inside]], req, st, stage_order)
    out = {
        "period_ms": ns_to_ms(period * bin_ns),
        "width_ms": ns_to_ms(float(np.median(episodes[:, 1] - episodes[:, 0])) * bin_ns),
        "episodes": int(len(episodes)),
        "spikes": int(inside.sum()),
        "share_of_requests": float(inside.sum() / len(req)),
        "share_of_slowest_1pct": float(np.isin(slowest, spike[inside]).mean()),
        "acf": float(acf),
        "stage": stage,
        "stage_share": stage_share,
    }
    return out | {"sentence": spike_sentence(out)}


def spike_sentence(found: dict[str, Any]) -> str:
    """``"every 250 ms, 31 ms wide, 12 % of requests, in score (85 % of their time over its median)"``."""
    where = (
        f", in {found['stage']} ({found['stage_share']:.0%} of their time over its median)"
        if found["stage"]
        else ""
    )
    return (
        f"every {found['period_ms']:.3g} ms, {found['width_ms']:.3g} ms wide, "
        f"{found['share_of_requests']:.0%} of requests{where}"
    )


def _slow_bins(first: np.ndarray, last: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
    """Per bin, the summed ``weight`` (the end to end, ms) of the spike requests in flight: a deep
    wait counts more than a scheduler hiccup."""
    edges = np.zeros(n + 1)
    np.add.at(edges, first, weight)
    np.add.at(edges, np.minimum(last + 1, n), -weight)
    return np.maximum(np.cumsum(edges)[:n], 0.0).round(9)


def _period_lag(slow: np.ndarray) -> tuple[int | None, float]:
    """The lag (bins) of the autocorrelation's highest peak past its first zero, and its value."""
    x = slow - slow.mean()
    if not x.any():
        return None, 0.0
    size = 1 << int(2 * len(x) - 1).bit_length()
    spectrum = np.fft.rfft(x, size)
    acf = np.fft.irfft(spectrum * np.conj(spectrum), size)[: len(x)]
    acf = acf / acf[0]
    last = len(x) // MIN_PERIODS
    below = np.flatnonzero(acf[1 : last + 1] <= 0)
    if not below.size:
        return None, 0.0
    first = int(below[0]) + 1
    lag = first + int(np.argmax(acf[first : last + 1]))
    for k in (4, 3, 2):  # a harmonic's peak can top the period's: take the period when it is strong
        lo, hi = max(first, int(lag / k * (1 - TOLERANCE))), int(lag / k * (1 + TOLERANCE)) + 1
        if lo < hi and acf[lo:hi].max() >= max(MIN_ACF, HARMONIC_SHARE * acf[lag]):
            lag = lo + int(np.argmax(acf[lo:hi]))
            break
    return lag, float(acf[lag])


def _episodes(slow: np.ndarray) -> np.ndarray:
    """``[[start_bin, end_bin), ...]`` of the slow stretches, those closer than MERGE_BINS joined."""
    change = np.diff(np.concatenate([[0.0], slow, [0.0]]))
    starts, ends = np.flatnonzero(change > 0), np.flatnonzero(change < 0)
    keep = np.concatenate([[True], starts[1:] - ends[:-1] >= MERGE_BINS])
    return np.stack([starts[keep], np.append(ends[np.flatnonzero(keep)[1:] - 1], ends[-1])], axis=1)


def _deep_episodes(
    episodes: np.ndarray, first: np.ndarray, dur: np.ndarray, periods: float
) -> np.ndarray:
    """The episodes at least half as deep (their slowest request) as the median of the ``periods``
    deepest: the periodic ones, without the shallow hiccups between them."""
    at = np.searchsorted(episodes[:, 0], first, side="right") - 1
    depth = np.zeros(len(episodes))
    np.maximum.at(depth, at, dur.astype(float))
    deepest = np.sort(depth)[::-1][: max(MIN_PERIODS, int(round(periods)))]
    return episodes[depth >= 0.5 * float(np.median(deepest))]


def _periodic_chain(episodes: np.ndarray, lag: int, periods: float) -> tuple[np.ndarray, float]:
    """The longest chain of episodes each a whole number of ``lag`` (within 20 %) after the one
    before (the shallow ones between are skipped), anchored at one of ``ANCHORS``, and its period
    (bins); an empty chain when it holds under ``REGULAR_SHARE`` of the ``periods`` the run spans."""
    best: list[int] = []
    if not len(episodes):
        return episodes, 0.0
    starts = episodes[:, 0]
    for anchor in np.unique(np.linspace(0, len(starts) - 1, ANCHORS).astype(int)).tolist():
        after, ahead = _walk(starts, anchor, range(anchor + 1, len(starts)), lag)
        before, behind = _walk(starts, anchor, range(anchor - 1, -1, -1), lag)
        chain = before[:0:-1] + after
        if len(chain) > len(best):
            best, best_steps = chain, ahead + behind
    if len(best) < max(MIN_PERIODS, REGULAR_SHARE * periods):
        return episodes[:0], 0.0
    span = episodes[best[-1], 0] - episodes[best[0], 0]
    return episodes[best], float(span / best_steps)


def _walk(starts: np.ndarray, anchor: int, order: range, lag: int) -> tuple[list[int], int]:
    """From ``anchor``, the episodes of ``order`` each a whole number of ``lag`` (within 20 %) from
    the last one taken, and the number of periods walked."""
    chain, steps = [anchor], 0
    for i in order:
        gap = abs(int(starts[i]) - int(starts[chain[-1]]))
        n = max(round(gap / lag), 1)
        if abs(gap - n * lag) <= TOLERANCE * lag:
            chain.append(i)
            steps += n
    return chain, steps


def _in_episodes(first: np.ndarray, episodes: np.ndarray) -> np.ndarray:
    """Whether each spike (by its first bin) started inside one of ``episodes``."""
    at = np.searchsorted(episodes[:, 0], first, side="right") - 1
    return (at >= 0) & (first < episodes[np.maximum(at, 0), 1])


def _excess_stage(
    spikes: pd.DataFrame, req: pd.DataFrame, st: pd.DataFrame, order: list[str]
) -> tuple[str | None, float]:
    """The stage holding most of the spike requests' time above each stage's median, and its share."""
    wide = stage_matrix(req, st, order)[order]
    if wide.empty:
        return None, 0.0
    excess = (wide.loc[wide.index.isin(spikes["request"])] - wide.median()).clip(lower=0).sum()
    if excess.sum() <= 0:
        return None, 0.0
    return str(excess.idxmax()), float(excess.max() / excess.sum())
