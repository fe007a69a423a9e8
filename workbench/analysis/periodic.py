"""Periodic spikes: slow requests that come back at a fixed period (a cache snapshot, a flush, a cron).

A spike is a request whose end to end is over the median of the ``BASELINE_REQUESTS`` around it
by more than the run's median (a machine slow for seconds raises that baseline). Binned by
``BIN_NS``, a bin is slow while a spike is in flight; slow stretches are episodes, as deep as their
deepest spike. Their onsets, weighted by depth, go through a Rayleigh periodogram (a long machine
stall weighs no more than one episode); the chain of deep episodes a whole number of periods apart
measures the period. It sees periods from about twice an episode's width to about a tenth of the
run, where requests land in the episodes often enough (a paced run at rate r: episodes over 1/r)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..units import ns_to_ms
from .tail import measured_ok, stage_matrix

SPIKE_RATIO = 2.0  # a request whose end to end is over 2x the median is a spike
MIN_SPIKES = 5
MIN_PERIODS = 5  # episodes (and so periods) the run must span, on the chain
# the Rayleigh statistic at the period: about 1 at random, at most the episodes on time; the best
# trial of a busy run without a period reached 8-13 (tests/analysis/test_periodic.py's table, 12
# seeds), so the chain must confirm it
MIN_Z = 10.0
MIN_PERIOD_BINS = 4  # the shortest trial period (4 ms)
PAD = 8  # the periodogram's DFT is 8 times the run's bins long
MAX_ONSETS = 512  # the deepest episodes the periodogram weighs
TOLERANCE = 0.2  # an episode is on the chain within 20 % of a whole number of periods
REGULAR_SHARE = 0.3  # of the run's periods that must hold a deep episode on the periodic chain
ANCHORS = 64  # the chain starts at one of 64 deep episodes spread over the run
BIN_NS = 1_000_000
MAX_BINS = 1 << 22
SUBHARMONIC_GAIN = 1.5  # a chain at lag / k this much longer is the period's
HARMONIC_SHARE = 0.7  # a peak at lag / k this high against the highest one is the period
WEIGHT_CAP_PCT = 90  # a spike weighs its end to end up to the spikes' 90th percentile
BASELINE_REQUESTS = 201  # a spike is over the median of the 201 requests around it
MERGE_BINS = 2  # slow stretches closer than this are one episode


def periodic_spikes(
    requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str], bin_ns: int = BIN_NS
) -> dict[str, Any] | None:
    """The periodic spikes of a run's measured requests (None without): ``period_ms``, ``width_ms``
    (an episode's stall: :func:`_first_spikes`), ``episodes``, ``spikes``, ``share_of_requests``,
    ``share_of_slowest_1pct`` (0..1), ``z`` (the periodogram at the period), ``stage`` and
    ``stage_share`` (most of the episodes' requests' excess over its median), ``sentence``."""
    req, st = measured_ok(requests, stages)
    if len(req) < 2 * MIN_SPIKES:
        return None
    start = req["start_ns"].to_numpy(np.int64)
    dur = req["dur_ns"].to_numpy(np.int64)
    excess = _excess_ns(dur)
    spike = np.flatnonzero(excess > (SPIKE_RATIO - 1) * float(np.median(dur)))
    if len(spike) < MIN_SPIKES:
        return None
    origin, span = int(start.min()), int((start + dur).max() - start.min())
    bin_ns = max(bin_ns, -(-span // MAX_BINS))
    first, last = (start[spike] - origin) // bin_ns, (start[spike] + dur[spike] - origin) // bin_ns
    excess = excess[spike]
    weight = np.minimum(excess, np.percentile(excess, WEIGHT_CAP_PCT))  # one stall is not a period
    slow = _slow_bins(first, last, ns_to_ms(weight), span // bin_ns + 1)
    found = _episodes(slow > 0)
    depth = _depths(found, first, excess)
    lag, z = _period_lag(found[:, 0], depth, len(slow))
    if lag is None:
        return None
    periods = len(slow) / lag
    # the episodes at least half as deep as the median of the ``periods`` deepest
    deepest = np.sort(depth)[::-1][: max(MIN_PERIODS, int(round(periods)))]
    deep = found[depth >= 0.5 * float(np.median(deepest))]
    episodes, period = _periodic_chain(deep, round(lag), periods)
    for k in (3, 2):  # episodes between the chain's: the lag was a harmonic of the period
        finer, fine_period = _periodic_chain(deep, max(1, round(lag / k)), periods * k)
        if len(finer) >= SUBHARMONIC_GAIN * len(episodes) and len(finer):
            episodes, period = finer, fine_period
            break
    if not len(episodes):
        return None
    at = np.searchsorted(episodes[:, 0], first, side="right") - 1  # the spikes inside episodes
    inside = (at >= 0) & (first < episodes[np.maximum(at, 0), 1])
    slowest = np.argsort(-dur, kind="stable")[: max(1, len(dur) // 100)]
    sent_in = np.flatnonzero(inside)[_first_spikes(episodes, first[inside])]
    gap = _unseen_ns(req, start)[spike[sent_in]]
    stage, stage_share = _excess_stage(req.iloc[spike[sent_in]], req, st, stage_order)
    out = {
        "period_ms": ns_to_ms(period * bin_ns),
        "width_ms": ns_to_ms(float(np.median(excess[sent_in] + gap / 2))),
        "episodes": int(len(episodes)),
        "spikes": int(inside.sum()),
        "share_of_requests": float(inside.sum() / len(req)),
        "share_of_slowest_1pct": float(np.isin(slowest, spike[inside]).mean()),
        "z": float(z),
        "stage": stage,
        "stage_share": stage_share,
    }
    return out | {"sentence": spike_sentence(out)}


def spike_sentence(found: dict[str, Any]) -> str:
    """``"every 250 ms, 31 ms wide, 12 % of requests, in score (85 % of ...)"``."""
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
    """Per bin, the summed ``weight`` (ms) of the spikes in flight."""
    edges = np.zeros(n + 1)
    np.add.at(edges, first, weight)
    np.add.at(edges, np.minimum(last + 1, n), -weight)
    return np.maximum(np.cumsum(edges)[:n], 0.0).round(9)


def _period_lag(onsets: np.ndarray, depth: np.ndarray, n: int) -> tuple[float | None, float]:
    """The onsets' period (bins) by Rayleigh ``z = |sum w e^(i phase)|^2 / sum w^2``, and its ``z``.

    A period has the same ``z`` at its divisors: the longest within ``HARMONIC_SHARE`` wins."""
    keep = np.argsort(-depth, kind="stable")[:MAX_ONSETS]
    w = np.minimum(depth[keep], np.percentile(depth, WEIGHT_CAP_PCT))
    if len(keep) < MIN_PERIODS or not w.any():
        return None, 0.0
    x = np.zeros(n)
    np.add.at(x, onsets[keep], w)
    z = np.abs(np.fft.rfft(x, PAD * n)) ** 2 / float(w @ w)
    lo, hi = PAD * MIN_PERIODS, min(PAD * n // MIN_PERIOD_BINS, len(z) - 1)  # trial indices
    if lo > hi:
        return None, 0.0
    best = lo + int(np.argmax(z[lo : hi + 1]))
    if z[best] < MIN_Z:
        return None, float(z[best])
    k = best
    for m in range(2, best // lo + 1):  # the period m times longer: the frequency best / m
        near = np.arange(max(lo, round(best / m) - 2), min(hi, round(best / m) + 2) + 1)
        if near.size and z[near].max() >= HARMONIC_SHARE * z[best]:
            k = int(near[np.argmax(z[near])])
    return PAD * n / k, float(z[best])


def _episodes(slow: np.ndarray) -> np.ndarray:
    """``[[start_bin, end_bin), ...]`` of the slow stretches, those closer than MERGE_BINS joined."""
    change = np.diff(np.concatenate([[0.0], slow, [0.0]]))
    starts, ends = np.flatnonzero(change > 0), np.flatnonzero(change < 0)
    keep = np.concatenate([[True], starts[1:] - ends[:-1] >= MERGE_BINS])
    return np.stack([starts[keep], np.append(ends[np.flatnonzero(keep)[1:] - 1], ends[-1])], axis=1)


def _depths(episodes: np.ndarray, first: np.ndarray, excess: np.ndarray) -> np.ndarray:
    """Each episode's depth: the largest ``excess`` of its spikes."""
    at = np.searchsorted(episodes[:, 0], first, side="right") - 1
    depth = np.zeros(len(episodes))
    np.maximum.at(depth, at, excess.astype(float))
    return depth


def _periodic_chain(episodes: np.ndarray, lag: int, periods: float) -> tuple[np.ndarray, float]:
    """The longest chain of episodes a whole number of ``lag`` apart, and its period (bins)."""
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
    """From ``anchor``, the episodes of ``order`` on the chain, and the periods walked."""
    chain, steps = [anchor], 0
    for i in order:
        gap = abs(int(starts[i]) - int(starts[chain[-1]]))
        n = max(round(gap / lag), 1)
        if abs(gap - n * lag) <= TOLERANCE * lag:
            chain.append(i)
            steps += n
    return chain, steps


def _first_spikes(episodes: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Per episode, its first spike's index (due as it began, it waits in the stalling stage)."""
    at = np.searchsorted(episodes[:, 0], first, side="right") - 1
    taken = np.full(len(episodes), -1)
    taken[at[::-1]] = np.arange(len(first))[::-1]  # the earliest of each episode written last
    return taken[taken >= 0]


def _unseen_ns(req: pd.DataFrame, start: np.ndarray) -> np.ndarray:
    """Per request, the time from the previous request's send to its due time (0 when later)."""
    sent = start + (req["lag_ns"].to_numpy(np.int64) if "lag_ns" in req else 0)
    return np.maximum(start - np.concatenate([[start[0]], sent[:-1]]), 0)


def _excess_ns(dur: np.ndarray) -> np.ndarray:
    """Each request's end to end above the median of the ``BASELINE_REQUESTS`` around it."""
    window = min(BASELINE_REQUESTS, len(dur) | 1)
    baseline = pd.Series(dur).rolling(window, center=True, min_periods=1).median()
    return dur - baseline.to_numpy()


def _excess_stage(
    spikes: pd.DataFrame, req: pd.DataFrame, st: pd.DataFrame, order: list[str]
) -> tuple[str | None, float]:
    """The stage holding most of the spikes' time over each stage's median, and its share."""
    wide = stage_matrix(req, st, order)[order]
    if wide.empty:
        return None, 0.0
    excess = (wide.loc[wide.index.isin(spikes["request"])] - wide.median()).clip(lower=0).sum()
    if excess.sum() <= 0:
        return None, 0.0
    return str(excess.idxmax()), float(excess.max() / excess.sum())
