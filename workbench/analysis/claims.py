"""The sentences the notebooks print about numbers, each a :class:`Claim` from a check of the
property it states (``tests/notebooks/test_claims.py`` runs each on ``data/runs`` and
counter-examples)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..units import NS_PER_MS, NS_PER_US
from .tail import stage_matrix
from .stats import percentile_ci_ns, percentile_ns

# batching "buys throughput" when a call of N items delivers >= 1.5x the items per second
FAR_GAIN = 1.5
LITTLE_GAIN = 1.15  # "only a little less than Nx": under 15 % more items per second
WARMUP_X = 1.5  # the first request stands out when it takes >= 1.5x the median of the measured ones
AGREE = (0.67, 1.5)  # a live service time "agrees" with a model within this ratio
COVERED = 0.5  # torch operators "cover" a stage when they hold at least half its time
# one launch call holding this share of all launch-call time makes the trace a cold start
COLD_SHARE = 0.5
COLD_OVER_MEDIAN = 100  # ... and at least this many times the median launch call


@dataclass(frozen=True)
class Claim:
    """``kind`` (which outcome), ``holds`` (the property the first wording states), ``text``."""

    kind: str
    holds: bool
    text: str


def _fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def trend(sizes: Sequence[int], values: Sequence[float]) -> tuple[str, int, list[tuple[int, int]]]:
    """``(kind, best size, dips)`` of values by increasing size; kind: ``rising``, ``never_fell``
    (some steps level: the ``dips``), ``highest_at_largest`` (the largest is best but some step
    fell), ``peak`` (the best is not the largest), ``flat`` (under two)."""
    if len(sizes) != len(values):
        raise ValueError(f"{len(sizes)} sizes but {len(values)} values")
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    xs, ys = [int(sizes[i]) for i in order], [float(values[i]) for i in order]
    if len(xs) < 2:
        return "flat", (xs[0] if xs else 0), []
    best = xs[int(np.argmax(ys))]
    dips = [(xs[i], xs[i + 1]) for i in range(len(xs) - 1) if ys[i + 1] < ys[i]]
    if not dips:
        level = [(xs[i], xs[i + 1]) for i in range(len(xs) - 1) if ys[i + 1] == ys[i]]
        return ("never_fell", xs[-1], level) if level else ("rising", best, [])
    return ("highest_at_largest" if ys[-1] == max(ys) else "peak"), best, dips


# the words of throughput_claim and capacity_claim per trend kind; "one batch size only" for flat
THROUGHPUT_WORDS = {
    "rising": "throughput rose with every larger batch ({series}).",
    "never_fell": "throughput never fell as the batch grew but stayed level from batch {steps} ({series}).",
    "highest_at_largest": (
        "throughput fell from batch {steps} but is highest at the largest batch recorded ({best}): "
        "not a peak, a dip ({series}); a larger batch still gives more items per second."
    ),
    "peak": (
        "throughput peaks at batch {best} and every larger batch gives fewer items per second "
        "({series}): past {best} a bigger batch is slower per item."
    ),
}
CAPACITY_WORDS = {
    "rising": "capacity rises with every larger batch ({series}): a larger max batch moves the bend to the right.",
    "never_fell": (
        "capacity never falls with a larger batch but stays level from batch {steps} ({series}): a larger "
        "max batch moves the bend to the right only where capacity rises."
    ),
    "highest_at_largest": (
        "capacity dips from batch {steps} but is highest at the largest batch ({best}) ({series}): "
        "a larger max batch moves the bend to the right, up to {best}."
    ),
    "peak": (
        "capacity peaks at batch {best} ({series}): beyond it a full batch takes longer per item, so a "
        "larger max batch does not move the bend to the right on this machine."
    ),
}


def _trend_claim(sizes, values, unit: str, words: dict[str, str], holding: tuple) -> Claim:
    kind, best, dips = trend(sizes, values)
    pairs = sorted(zip(sizes, values))
    batches = ", ".join(str(int(s)) for s, _ in pairs)
    series = " -> ".join(_fmt(v) for _, v in pairs) + f" {unit} at batch {batches}"
    steps = ", ".join(f"{a} to {b}" for a, b in dips)  # the dips, or for never_fell the level steps
    text = words.get(kind, "one batch size only ({series}): no trend to read.")
    return Claim(kind, kind in holding, text.format(series=series, steps=steps, best=best))


def throughput_claim(sizes: Sequence[int], items_per_s: Sequence[float]) -> Claim:
    """Notebook 5: how items per second move with the batch size. ``holds``: it rose with every larger batch."""
    return _trend_claim(sizes, items_per_s, "items/s", THROUGHPUT_WORDS, ("rising",))


def capacity_claim(sizes: Sequence[int], capacity_rps: Sequence[float]) -> Claim:
    """Notebook 6: capacity by max batch size. ``holds``: the largest max batch has the most capacity."""
    holding = ("rising", "never_fell", "highest_at_largest")
    return _trend_claim(sizes, capacity_rps, "req/s", CAPACITY_WORDS, holding)


def batch_cost_claim(latency_x: float, items: int) -> Claim:
    """Notebook 2: a call of ``items`` took ``latency_x`` times a call of one. ``holds``:
    ``items / latency_x`` is at least :data:`FAR_GAIN`."""
    if latency_x <= 0:
        raise ValueError(f"latency ratio must be positive, got {latency_x}")
    gain = items / latency_x
    if gain >= FAR_GAIN:
        kind = "far_less"
        text = (
            f"far less than {items}x: at p50 each call of {items} delivers {gain:.2f}x the "
            "items per second; batching buys throughput and pays for it in latency."
        )
    elif gain >= LITTLE_GAIN:
        kind = "less"
        text = (
            f"clearly less than {items}x, not far less: {gain:.2f}x the items per second at p50 "
            f"for {latency_x:.1f}x the latency; most of the work grows with the batch here, so "
            "batching buys some throughput at a large latency cost."
        )
    elif gain > 1:
        kind = "little_less"
        text = (
            f"only a little less than {items}x: {gain:.2f}x the items per second at p50 "
            f"for {latency_x:.1f}x the latency; the work grows almost linearly with the "
            "batch, so batching buys little."
        )
    else:
        kind = "not_less"
        text = (
            f"{items}x or more: batching bought nothing here ({gain:.2f}x the items per "
            "second) and costs latency; keep batch 1 on this machine."
        )
    return Claim(kind, kind == "far_less", text)


def measured_stage_ns(run) -> dict[str, np.ndarray]:
    """Per stage, then ``end_to_end``: host times (ns) of the measured successful requests."""
    wide = stage_matrix(run.requests, run.stages, list(run.stage_names))
    return {
        name: wide[name].dropna().to_numpy(dtype=np.int64)
        for name in [*run.stage_names, "end_to_end"]
    }


def p50_ratios(base: Mapping[str, np.ndarray], other: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Per stage in both: ``stage``, ``ratio`` (other p50 / base p50), ``beyond_noise`` (the
    p50s' 95 % order-statistic intervals do not overlap)."""
    rows = []
    for stage in (s for s in base if s in other):
        a, b = np.asarray(base[stage]), np.asarray(other[stage])
        if a.size == 0 or b.size == 0:
            continue
        (alo, ahi), (blo, bhi) = percentile_ci_ns(a, 50), percentile_ci_ns(b, 50)
        bounded = None not in (alo, ahi, blo, bhi)
        ratio = percentile_ns(b, 50) / percentile_ns(a, 50)
        rows.append((stage, ratio, bool(bounded and (bhi < alo or blo > ahi))))
    return pd.DataFrame(rows, columns=["stage", "ratio", "beyond_noise"])


def untouched_stages_claim(ratios: pd.DataFrame, changed: str, label: str) -> Claim:
    """Notebook 5: ``holds`` when every stage but ``changed`` stayed within run-to-run noise."""
    moved = ratios[ratios["beyond_noise"]]
    listing = ", ".join(f"{r.stage} {r.ratio:.2f}x" for r in ratios.itertuples())
    if moved.empty:
        text = (
            f"{label}: the other stages stayed within run-to-run noise ({listing}: their "
            f"p50 intervals overlap fp32's), so the change is {changed}'s."
        )
        return Claim("noise", True, text)
    low, high = moved["ratio"].min(), moved["ratio"].max()
    span = f"{low:.2f}x" if np.isclose(low, high) else f"{low:.2f}-{high:.2f}x"
    text = (
        f"{label}: {len(moved)} of {len(ratios)} stages other than {changed} moved too ({span}, beyond "
        f"their p50 intervals: {listing}): the runs were recorded at different moments, so part of {changed}'s "
        "change is the machine, not the knob; compare interleaved (workbench.compare) to separate them."
    )
    return Claim("moved", False, text)


def live_vs_model_claim(x: float, noisy: bool | None) -> Claim:
    """Notebook 6: live over simulated service p50; ``holds``: within ``AGREE``, machine quiet."""
    lo, hi = AGREE
    if noisy or noisy is None:
        state = "a NOISY machine" if noisy else "a machine not measured for noise"
        text = (
            f"live service p50 is {x:.2f}x the simulated one, on {state}: other work slowed the live "
            "run, so this says nothing about the recorded runs; run this cell again on a quiet machine before "
            "deciding whether to re-record them."
        )
        return Claim("noisy", False, text)
    if lo <= x <= hi:
        text = (
            f"live service p50 is {x:.2f}x the simulated one: the recorded runs describe "
            "this machine; trust the plan."
        )
        return Claim("agree", True, text)
    text = (
        f"live service p50 is {x:.2f}x the simulated one on a quiet machine: the recorded runs came from another "
        "CPU; re-record them here (python scripts/record_examples.py) before trusting a capacity plan."
    )
    return Claim("differ", False, text)


def first_request_claim(first_x: float, noisy: bool | None, recorded_x: float) -> Claim:
    """Notebook 3: the first request over the measured median, live and recorded. ``holds``: it
    stands out (>= :data:`WARMUP_X`); below that a noisy machine is named as the reason."""
    if first_x >= WARMUP_X:
        lo, hi = AGREE
        if lo <= first_x / recorded_x <= hi:
            text = (
                f"live: the first request took {first_x:.1f}x the median of the measured "
                f"ones, as in the recording ({recorded_x:.1f}x)."
            )
            return Claim("as_recorded", True, text)
        side = "less" if first_x < recorded_x else "more"
        text = (
            f"live: the first request took {first_x:.1f}x the median of the measured ones: it stands out, "
            f"though {side} than in the recording ({recorded_x:.1f}x)."
        )
        return Claim("stands_out", True, text)
    if noisy or noisy is None:
        state = "a NOISY machine" if noisy else "a machine not measured for noise"
        text = (
            f"live: the first request took only {first_x:.1f}x the median of the measured ones, on {state}: "
            "other work slowed the measured requests as much as the warm-up, so this run cannot show "
            "the lesson; the recorded run above shows it."
        )
        return Claim("noisy", False, text)
    text = (
        f"live: the first request took only {first_x:.1f}x the median of the measured ones on a quiet machine: "
        "what it initialises lazily was already done before the timing (building the pipeline runs it once), "
        "so the warm-up lesson shows on the recorded run above."
    )
    return Claim("quiet_small", False, text)


def operator_coverage(tree: pd.DataFrame) -> pd.DataFrame:
    """Per stage of a flame tree: ``stage``, ``stage_ns``, ``operator_ns`` (in the outermost
    ``cpu_op`` nodes under it, Python frames between allowed), ``share``."""
    parent = dict(zip(tree["id"], tree["parent"]))
    kind = dict(zip(tree["id"], tree["kind"]))
    stages = tree[tree["kind"] == "stage"]
    inside = {sid: 0 for sid in stages["id"]}
    for node, k, total in zip(tree["id"], tree["kind"], tree["total_ns"]):
        if k != "cpu_op":
            continue
        up = parent.get(node)
        while up is not None and not pd.isna(up) and kind.get(up) not in ("stage", "cpu_op"):
            up = parent.get(up)
        if up in inside and kind.get(up) == "stage":
            inside[up] += int(total)
    out = stages[["id", "name", "total_ns"]].rename(
        columns={"name": "stage", "total_ns": "stage_ns"}
    )
    out = out.assign(operator_ns=[inside[i] for i in out["id"]])
    out = out.assign(share=out["operator_ns"] / out["stage_ns"].clip(lower=1))
    return out.drop(columns="id").reset_index(drop=True)


def coverage_claim(stage: str, share: float) -> Claim:
    """Notebook 4: ``holds``: torch operators cover at least :data:`COVERED` of the stage's time."""
    if share >= COVERED:
        text = f"{stage}: torch operators cover {share:.0%} of the stage; its boxes show the work."
        return Claim("covered", True, text)
    text = (
        f"{stage}: torch operators cover only {share:.0%} of the stage; the rest is Python outside torch operators "
        "(the Python frames in the flame graph show where)."
    )
    return Claim("not_covered", False, text)


def cold_start_claim(pairs: pd.DataFrame, name: str) -> Claim:
    """Launch pairs of a trace: ``holds`` when no launch call holds >= :data:`COLD_SHARE` of
    launch-call time at >= :data:`COLD_OVER_MEDIAN` times the median (a cold start, not a steady
    state)."""
    cpu = pairs["cpu_dur_ns"].to_numpy(dtype=np.int64)
    if cpu.size == 0:
        text = f"{name}: no kernel launches joined to GPU work: nothing to judge."
        return Claim("no_launches", False, text)
    i = int(np.argmax(cpu))
    longest, total, median = int(cpu[i]), int(cpu.sum()), float(np.median(cpu))
    share, over = longest / max(total, 1), longest / max(median, 1.0)
    call = pairs["launch_name"].iloc[i]
    if share >= COLD_SHARE and over >= COLD_OVER_MEDIAN:
        text = (
            f"{name}: not judged: one {call} took {longest / NS_PER_MS:,.0f} ms, {share:.0%} of all launch-call time "
            f"and {over:,.0f}x the median call: a cold first call (library setup), so this trace shows a start, "
            "not a steady state."
        )
        return Claim("cold", False, text)
    text = (
        f"{name}: no launch call dominates (the longest {longest / NS_PER_US:,.0f} us, {share:.0%} "
        "of launch-call time): its launch verdict describes a steady state."
    )
    return Claim("steady", True, text)


def batch_wait_claim(batch_wait_p99_ms: float, max_wait_ms: float) -> Claim:
    """Notebooks 6 and 9: ``holds`` when the batch wait's p99 is within the max wait."""
    if batch_wait_p99_ms <= max_wait_ms:
        text = (
            f"batch_wait p99 {batch_wait_p99_ms:.3g} ms, within the {max_wait_ms:g} ms max wait: a request waits for "
            "its batch at most that long; any longer wait, for a busy executor, is queue_wait."
        )
        return Claim("within", True, text)
    text = (
        f"batch_wait p99 {batch_wait_p99_ms:.3g} ms EXCEEDS the {max_wait_ms:g} ms max wait: this record counts the "
        "wait for a busy executor as batch wait (made before batch wait ended at the batch's due time)."
    )
    return Claim("beyond", False, text)
