"""Generative metrics from a run's ``units`` table: TTFT, prefill, ITL, TPOT, tokens out.

Definitions: TOKENS in docs/json.md (vLLM's serving benchmark on the workbench's clock). Only
measured successful requests count; percentiles are :mod:`.stats`'. ITL figures are over all gaps,
the others over requests; the ITL interval takes one request's gaps as independent, so it is
narrower than the truth (:func:`compare_tokens` resamples whole blocks of requests instead)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..units import NS_PER_US, ns_to_s
from .tail import END_TO_END
from .verdicts import BLOCK, compare_blocks, round_blocks
from .stats import NS_PER_MS, percentile_ci_ns, summarize_ns, tail_summary_ns

METRICS = ("ttft", "prefill", "itl", "tpot")
GROWTH_MIN_REQUESTS = 10  # requests of 4 units or more before decode growth is judged
GROWTH_MIN_GAPS = 3
# the later half's mean ITL over the earlier half's, median over requests (without a KV cache the
# generate example reads 1.22, with it 0.98: the step's fixed overhead dilutes the growth)
GROWTH_RATIO = 1.1
GROWTH_AGREE = 0.8  # share of requests whose later half is slower


def token_requests(
    requests: pd.DataFrame, stages: pd.DataFrame, units: pd.DataFrame
) -> pd.DataFrame:
    """One row per measured successful request with a unit: ``request``, ``ttft_ns``, ``prefill_ns``
    (Int64, null without the streaming stage's row), ``tpot_ns`` (Int64, null under two units),
    ``tokens_out``, ``end_to_end_ns`` (ns from the run's start)."""
    measured = requests.loc[~requests["warmup"] & requests["ok"], ["request", "start_ns", "dur_ns"]]
    mine = units[units["request"].isin(measured["request"])]
    if mine.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype="int64") for c in ("request", "ttft_ns")}
            | {c: pd.Series(dtype="Int64") for c in ("prefill_ns", "tpot_ns")}
            | {c: pd.Series(dtype="int64") for c in ("tokens_out", "end_to_end_ns")}
        )
    at = mine.groupby("request")["at_ns"].agg(["min", "max", "count"])
    stream = mine["stage"].iloc[0]
    stage_start = stages[stages["stage"] == stream].set_index("request")["start_ns"]
    req = measured.set_index("request").loc[at.index]
    n = at["count"].astype("int64")
    tpot = ((at["max"] - at["min"]) / (n - 1).where(n > 1)).round().astype("Int64")
    prefill = (at["min"] - stage_start.reindex(at.index)).astype("Int64")
    return pd.DataFrame(
        {
            "request": at.index.to_numpy("int64"),
            "ttft_ns": (at["min"] - req["start_ns"]).to_numpy("int64"),
            "prefill_ns": prefill.array,
            "tpot_ns": tpot.array,
            "tokens_out": n.to_numpy("int64"),
            "end_to_end_ns": req["dur_ns"].to_numpy("int64"),
        }
    )


def unit_gaps(requests: pd.DataFrame, units: pd.DataFrame) -> pd.DataFrame:
    """Inter-token latencies: ``request``, ``position`` (the later unit's index, from 1),
    ``itl_ns``."""
    measured = requests.loc[~requests["warmup"] & requests["ok"], "request"]
    mine = units[units["request"].isin(measured)].sort_values(["request", "unit"], kind="stable")
    gap = mine["at_ns"].diff()
    later = mine["request"].eq(mine["request"].shift())
    out = mine.loc[later, ["request", "unit"]].rename(columns={"unit": "position"})
    return out.assign(itl_ns=gap[later].astype("int64")).reset_index(drop=True)


def figures(values_ns) -> dict[str, Any]:
    """``count``, mean/p50/p95/p99/max in ms, p50/p95/p99 intervals (None where unbounded), p99.9."""
    arr = np.asarray(values_ns, dtype=np.int64)
    out: dict[str, Any] = summarize_ns(arr)
    for p in (50, 95, 99):
        lo, hi = percentile_ci_ns(arr, p)
        out[f"p{p}_ci_ms"] = [None if x is None else x / NS_PER_MS for x in (lo, hi)]
    return out | tail_summary_ns(arr)


def token_summary(requests: pd.DataFrame, stages: pd.DataFrame, units: pd.DataFrame) -> dict:
    """``tokens`` of ``show --json`` (TOKENS in docs/json.md); figures by :func:`figures`, ms."""
    per = token_requests(requests, stages, units)
    gaps = unit_gaps(requests, units)
    n = per["tokens_out"].to_numpy("int64")
    busy = per["end_to_end_ns"].sum()
    return {
        "stage": str(units["stage"].iloc[0]) if len(units) else None,
        "requests": int(len(per)),
        "tokens": int(n.sum()),
        "tokens_out": {
            "mean": float(n.mean()) if n.size else None,
            "p50": float(np.percentile(n, 50)) if n.size else None,
            "max": int(n.max()) if n.size else None,
        },
        "ttft": figures(per["ttft_ns"]),
        "prefill": figures(per["prefill_ns"].dropna().astype("int64")),
        "itl": figures(gaps["itl_ns"]),
        "tpot": figures(per["tpot_ns"].dropna().astype("int64")),
        "tokens_per_s": float(n.sum() / ns_to_s(busy)) if busy else None,
        "decode_growth": decode_growth(gaps),
    }


def decode_growth(gaps: pd.DataFrame) -> dict[str, Any]:
    """Do decode steps grow with the token's position (as without a KV cache)? ``growth``: median
    over requests (``GROWTH_MIN_GAPS`` gaps or more) of the later half's mean ITL over the earlier
    half's; ``agree``: the share above 1; ``grows`` (None under ``GROWTH_MIN_REQUESTS``): both at
    their thresholds; ``slope_us_per_token``, ``first_ms``, ``last_ms``: least squares of ITL."""
    ratios = []
    for _, g in gaps.groupby("request", sort=False):
        itl = g["itl_ns"].to_numpy("float64")
        if itl.size >= GROWTH_MIN_GAPS:
            half = itl.size // 2
            early, late = itl[:half].mean(), itl[itl.size - half :].mean()
            if early > 0:
                ratios.append(late / early)
    out: dict[str, Any] = {"requests": len(ratios), "growth": None, "agree": None, "grows": None}
    if ratios:
        out["growth"] = float(np.median(ratios))
        out["agree"] = float(np.mean(np.asarray(ratios) > 1.0))
    if len(ratios) >= GROWTH_MIN_REQUESTS:
        out["grows"] = out["growth"] >= GROWTH_RATIO and out["agree"] >= GROWTH_AGREE
    pos, itl = gaps["position"].to_numpy("float64"), gaps["itl_ns"].to_numpy("float64")
    fit = dict.fromkeys(("slope_us_per_token", "first", "last", "first_ms", "last_ms"))
    if np.unique(pos).size >= 2:
        slope, intercept = np.polyfit(pos, itl, 1)
        first, last = int(pos.min()), int(pos.max())
        fit = {
            "slope_us_per_token": float(slope) / NS_PER_US,
            "first": first,
            "last": last,
            "first_ms": float(intercept + slope * first) / NS_PER_MS,
            "last_ms": float(intercept + slope * last) / NS_PER_MS,
        }
    return out | fit


def token_text(summary: dict[str, Any]) -> list[str]:
    """The lines ``show`` prints for :func:`token_summary`."""
    n_req, n_tok = summary["requests"], summary["tokens"]
    mean = summary["tokens_out"]["mean"]
    head = f"tokens: {summary['stage']} streamed {n_tok} units in {n_req} requests"
    lines = [head + (f" ({mean:.1f} per request)" if mean is not None else "")]
    for key, label, what in (
        ("ttft", "TTFT", "requests"),
        ("prefill", "prefill", "requests"),
        ("itl", "ITL", "gaps"),
        ("tpot", "TPOT", "requests"),
    ):
        fig, parts = summary[key], []
        for p in (50, 95, 99) if fig["count"] else ():
            lo, hi = fig[f"p{p}_ci_ms"]
            parts.append(f"p{p} {fig[f'p{p}_ms']:.3f} ms [{_ms(lo)}, {_ms(hi)}]")
        if fig["count"] and fig["p999_ms"] is not None:
            parts.append(f"p99.9 {fig['p999_ms']:.3f} ms")
        lines.append(f"  {label:<8} {', '.join(parts) or '-'} ({fig['count']} {what})")
    growth = summary["decode_growth"]
    if growth["grows"]:
        lines.append(f"  decode steps grow with position: {growth_text(growth)}")
    return lines


def _ms(x) -> str:
    return "unbounded" if x is None else f"{x:.3f}"


def growth_text(growth: dict[str, Any]) -> str:
    """``ITL 0.40 ms at token 1 -> 1.90 ms at token 63 (+24.2 us per token); the later ...``."""
    fit = ""
    if growth["slope_us_per_token"] is not None:
        fit = (
            f"ITL {growth['first_ms']:.3f} ms at token {growth['first']} -> {growth['last_ms']:.3f} ms "
            f"at token {growth['last']} ({growth['slope_us_per_token']:+.1f} us per token); "
        )
    return (
        f"{fit}the later half of a request's steps {growth['growth']:.2f}x the earlier half "
        f"(median of {growth['requests']} requests, {growth['agree']:.0%} of them slower)"
    )


# --- comparing two configurations or two runs ------------------------------------------------------

COMPARED = ("ttft", "tpot", "itl")


def token_blocks(per: pd.DataFrame, gaps: pd.DataFrame, group) -> dict[str, np.ndarray]:
    """Block matrices (:func:`.verdicts.round_blocks`) of TTFT, TPOT, ITL and end to end, of
    :func:`token_requests` rows of two units or more and their ``gaps``; ``group``: each row's block
    (its round, or position // 10 in a saved run), which its gaps go to."""
    group = np.asarray(group)
    of_request = pd.Series(group, index=per["request"].to_numpy())
    mine = gaps[gaps["request"].isin(per["request"])]
    return {
        "ttft": round_blocks(per["ttft_ns"].to_numpy("float64"), group),
        "tpot": round_blocks(per["tpot_ns"].to_numpy("float64"), group),
        "itl": round_blocks(
            mine["itl_ns"].to_numpy("float64"), of_request[mine["request"]].to_numpy()
        ),
        END_TO_END: round_blocks(per["end_to_end_ns"].to_numpy("float64"), group),
    }


def compare_tokens(blocks_a, blocks_b, *, paired: bool, **kwargs) -> dict[str, Any]:
    """``tokens`` of ``compare --json``: ``metrics`` (an ENTRY per :data:`COMPARED`,
    :func:`.verdicts.compare_blocks` with ``kwargs``), and the ``requests`` and ``gaps`` counted
    ([A, B])."""
    found = compare_blocks(blocks_a, blocks_b, COMPARED, paired=paired, **kwargs)
    sides = (blocks_a, blocks_b)
    return {
        "metrics": found["stages"],
        "requests": [int(np.isfinite(b["tpot"]).sum()) for b in sides],
        "gaps": [int(np.isfinite(b["itl"]).sum()) for b in sides],
    }


def samples_tokens(
    samples: pd.DataFrame, config: int
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """``(per, gaps, rounds)`` of configuration ``config``'s requests of two units or more."""
    mine = samples[(samples["config"] == config) & samples["ok"] & samples["tpot"].notna()]
    ids = np.arange(len(mine))
    per = pd.DataFrame(
        {"request": ids}
        | {f"{c}_ns": mine[c].to_numpy("int64") for c in ("ttft", "tpot", END_TO_END)}
    )
    itl = mine["itl"].tolist()
    gaps = pd.DataFrame(
        {
            "request": np.repeat(ids, [len(g) for g in itl]),
            "itl_ns": np.array([x for g in itl for x in g], dtype="int64"),
        }
    )
    return per, gaps, mine["round"].to_numpy()


def paired_tokens(
    samples: pd.DataFrame, *, a: int = 0, b: int = 1, **kwargs
) -> dict[str, Any] | None:
    """:func:`compare_tokens` of configurations ``a`` and ``b`` paired by their shared rounds;
    None without token columns or a request of two units on a side."""
    if "tpot" not in samples.columns:
        return None
    sides = [samples_tokens(samples, c) for c in (a, b)]
    rounds = set(sides[0][2].tolist()) & set(sides[1][2].tolist())
    if not rounds:
        return None
    blocks = []
    for per, gaps, rnd in sides:
        keep = np.isin(rnd, list(rounds))
        blocks.append(token_blocks(per[keep], gaps, rnd[keep]))
    return compare_tokens(blocks[0], blocks[1], paired=True, **kwargs)


def run_token_blocks(requests, stages, units, block: int = BLOCK) -> dict[str, np.ndarray] | None:
    """:func:`token_blocks` of a saved run in blocks of ``block`` requests; None when none has two
    units."""
    per = token_requests(requests, stages, units)
    per = per[per["tpot_ns"].notna()]
    if per.empty:
        return None
    gaps = unit_gaps(requests, units)
    return token_blocks(per, gaps, np.arange(len(per)) // block)


def meets_bounds(per: pd.DataFrame, ttft_ms: float | None, tpot_ms: float | None) -> pd.Series:
    """Per :func:`token_requests` row: TTFT <= ``ttft_ms`` and TPOT <= ``tpot_ms`` (None: no bound;
    one unit has no TPOT and meets it). The one goodput test, measured and simulated."""
    good = pd.Series(True, index=per.index)
    if ttft_ms is not None:
        good &= per["ttft_ns"] <= ttft_ms * NS_PER_MS
    if tpot_ms is not None:
        good &= (per["tpot_ns"] <= tpot_ms * NS_PER_MS).fillna(True).astype(bool)
    return good


def goodput(
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    units: pd.DataFrame,
    ttft_ms: float | None,
    tpot_ms: float | None,
) -> dict[str, Any] | None:
    """vLLM's goodput: ``ttft_ms``, ``tpot_ms``, ``requests`` (measured), ``good`` (succeeded and
    :func:`meets_bounds`), ``share`` (None of none); None without a bound."""
    if ttft_ms is None and tpot_ms is None:
        return None
    good = meets_bounds(token_requests(requests, stages, units), ttft_ms, tpot_ms)
    n, g = int((~requests["warmup"]).sum()), int(good.sum())
    return {
        "ttft_ms": ttft_ms,
        "tpot_ms": tpot_ms,
        "requests": n,
        "good": g,
        "share": g / n if n else None,
    }
