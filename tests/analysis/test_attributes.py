"""Attribute effects (bins, effect, rho, time explained) of describe= attributes, with exact numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from workbench.analysis.attributes import (
    MIN_REQUESTS,
    attribute_effects,
    bin_labels,
    effect_sentence,
    explained_fraction,
    fisher_interval,
    ranked_effects,
    spearman,
)

MS = 1_000_000


def tables(fwd_ms, seq_len):
    req = pd.DataFrame(
        {
            "request": range(len(fwd_ms)),
            "warmup": False,
            "ok": True,
            "dur_ns": [int((f + 1) * MS) for f in fwd_ms],
            "attr.seq_len": seq_len,
        }
    )
    st = pd.DataFrame(
        [
            {"request": i, "stage": s, "dur_ns": int(d * MS), "device_dur_ns": None}
            for i, f in enumerate(fwd_ms)
            for s, d in (("parse", 1.0), ("forward", f))
        ]
    )
    return req, st.astype({"device_dur_ns": "Int64"})


def test_spearman_is_rank_correlation_with_average_ties():
    assert spearman(np.array([1, 2, 3, 4.0]), np.array([10, 20, 30, 1000.0])) == pytest.approx(1.0)
    assert spearman(np.array([1, 2, 3, 4.0]), np.array([4, 3, 2, 1.0])) == pytest.approx(-1.0)
    assert spearman(np.array([1, 2, 3.0]), np.array([5, 5, 5.0])) is None
    # ties: ranks 1.5, 1.5, 3 against 1, 2, 3 -> pearson of ranks
    assert spearman(np.array([1, 1, 2.0]), np.array([1, 2, 3.0])) == pytest.approx(
        0.8660254, rel=1e-6
    )


def test_fisher_interval_known_values():
    lo, hi = fisher_interval(0.5, 103)
    se = math.sqrt((1 + 0.125) / 100)
    assert lo == pytest.approx(math.tanh(math.atanh(0.5) - 1.959963984540054 * se))
    assert hi == pytest.approx(math.tanh(math.atanh(0.5) + 1.959963984540054 * se))


def test_forward_tracking_sequence_length_is_found_and_parse_is_constant():
    seq = list(range(1, 41))
    req, st = tables([0.1 * s for s in seq], seq)
    effects = attribute_effects(req, st, ["parse", "forward"])
    assert list(effects) == ["parse", "forward", "end_to_end"]
    fwd = effects["forward"]["seq_len"]
    assert fwd["rho"] == pytest.approx(1.0) and fwd["n"] == 40
    # 40 values > 8 levels: quantile cuts at sorted[10, 20, 30, 38] = 11, 21, 31, 39
    # (31-38 and a 2-request 39-40 bin, which joins the one below)
    assert [(b["lo"], b["hi"], b["count"]) for b in fwd["bins"]] == [
        (1, 10, 10),
        (11, 20, 10),
        (21, 30, 10),
        (31, 40, 10),
    ]
    assert fwd["bins"][0]["p50_ms"] == pytest.approx(0.55) and fwd["bins"][-1][
        "p50_ms"
    ] == pytest.approx(3.55)
    assert fwd["effect"] == pytest.approx(3.55 / 0.55) and fwd["separated"]
    # n = 10: the p50 interval is the 1st to the 10th value (ranks floor(5 - 3.1) and ceil(5 + 3.1) + 1)
    assert (fwd["bins"][0]["p50_ci_low_ms"], fwd["bins"][0]["p50_ci_high_ms"]) == pytest.approx(
        (0.1, 1.0)
    )
    parse = effects["parse"]["seq_len"]
    assert (
        parse["rho"] is None and parse["effect"] == pytest.approx(1.0) and parse["explained"] == 0.0
    )
    assert not parse["separated"] and [r["stage"] for r in ranked_effects(effects)] == ["forward"]
    assert effect_sentence(effects).startswith(
        "forward tracks seq_len: p50 0.55 ms at 1-10 against 3.55 ms at 31-40 (6.45x)"
    )


def test_too_few_requests_gives_bins_but_no_effect():
    seq = list(range(MIN_REQUESTS - 1))
    req, st = tables([float(s) for s in seq], seq)
    entry = attribute_effects(req, st, ["parse", "forward"])["forward"]["seq_len"]
    assert entry["rho"] is None and entry["effect"] is None and "at least 30" in entry["note"]
    assert sum(b["count"] for b in entry["bins"]) == MIN_REQUESTS - 1
    assert effect_sentence({"forward": {"seq_len": entry}}) is None


def test_no_attributes_no_effects():
    req, st = tables([1.0] * 40, [1] * 40)
    assert attribute_effects(req.drop(columns=["attr.seq_len"]), st, ["parse", "forward"]) is None
    assert ranked_effects(None) == [] and effect_sentence(None) is None


def test_few_values_get_a_bin_each_and_small_bins_merge_upward_then_down():
    assert bin_labels(np.array([3.0, 1, 2, 1, 2, 2, 1, 3, 3, 1, 2, 3, 3, 1, 2])).tolist() == [
        2,
        0,
        1,
        0,
        1,
        1,
        0,
        2,
        2,
        0,
        1,
        2,
        2,
        0,
        1,
    ]  # 5 of each value: one bin per value
    values = np.array(
        [1.0] * 3 + [2.0] * 10 + [3.0] * 6
    )  # 3 ones join the twos; the six threes stay
    assert bin_labels(values).tolist() == [0] * 13 + [1] * 6
    assert (
        bin_labels(np.array([1.0] * 10 + [2.0] * 2)).tolist() == [0] * 12
    )  # a short top bin joins the one below


def test_many_values_are_cut_at_the_quartiles_and_the_top_5_percent():
    values = np.repeat(np.arange(50.0), 12)  # 600 values, 12 of each
    labels = bin_labels(values)
    # cuts at sorted[150, 300, 450, 570] = 12, 25, 37, 47: bins 0-11, 12-24, 25-36, 37-46, 47-49
    assert np.bincount(labels).tolist() == [144, 156, 144, 120, 36]
    assert values[labels == 4].min() == 47 and values[labels == 3].max() == 46


def test_explained_fraction_takes_the_effect_either_way():
    assert explained_fraction(4.0) == 0.75 and explained_fraction(0.25) == 0.75
    assert explained_fraction(1.0) == 0.0 and explained_fraction(0.0) == 1.0


def heavy_user_tables():
    """600 requests: 581 light users read 16 keys (hydrate 0.1-19.24 ms, spread evenly), 19 heavy users (3 %)
    read 640 keys (322.60-322.78 ms); parse is 0.15 ms plus 1 us per payload unit, and tracks payload exactly."""
    light = [
        100_000 + ((k * 11) % 581) * 33_000 for k in range(581)
    ]  # a permutation (581 = 7 x 83)
    heavy = [322_600_000 + j * 10_000 for j in range(19)]
    rows, li, hi = [], 0, 0
    for i in range(600):
        is_heavy = i % 32 == 0 and hi < 19
        hydrate = heavy[hi] if is_heavy else light[li]
        hi, li = hi + is_heavy, li + (not is_heavy)
        payload = i % 50
        rows.append(
            (i, 640.0 if is_heavy else 16.0, float(payload), hydrate, 150_000 + payload * 1_000)
        )
    req = pd.DataFrame(
        {
            "request": [r[0] for r in rows],
            "warmup": False,
            "ok": True,
            "dur_ns": [r[3] + r[4] + 5 * MS for r in rows],
            "attr.keys": [r[1] for r in rows],
            "attr.payload": [r[2] for r in rows],
        }
    )
    st = pd.DataFrame(
        [
            {"request": r[0], "stage": s, "dur_ns": d, "device_dur_ns": None}
            for r in rows
            for s, d in (("parse", r[4]), ("hydrate", r[3]), ("forward", 5 * MS))
        ]
    )
    return req, st.astype({"device_dur_ns": "Int64"})


def test_a_3_percent_heavy_path_is_a_33x_effect_and_outranks_a_strong_rho_on_a_tiny_stage():
    req, st = heavy_user_tables()
    effects = attribute_effects(req, st, ["parse", "hydrate", "forward"])
    keys = effects["hydrate"]["keys"]
    assert [(b["lo"], b["hi"], b["count"]) for b in keys["bins"]] == [
        (16.0, 16.0, 581),
        (640.0, 640.0, 19),
    ]
    assert keys["bins"][0]["p50_ms"] == pytest.approx(9.67)  # the 291st of 100 + 33k us
    assert keys["bins"][0]["p99_ms"] == pytest.approx(19.0486)  # position 574.2
    assert keys["bins"][1]["p50_ms"] == pytest.approx(322.69) and keys["bins"][1][
        "p99_ms"
    ] == pytest.approx(322.7782)
    assert keys["effect"] == pytest.approx(322.69 / 9.67)  # 33.4x
    assert 0.25 < keys["rho"] < 0.35  # the rank correlation hides it
    parse = effects["parse"]["payload"]
    assert parse["rho"] == pytest.approx(1.0) and parse["effect"] < 1.3
    ranking = ranked_effects(effects)
    assert (ranking[0]["stage"], ranking[0]["attribute"]) == ("hydrate", "keys")
    assert ranking[0]["explained"] == pytest.approx(keys["share"] * (1 - 9.67 / 322.69))
    assert "end_to_end" not in {r["stage"] for r in ranking}
    assert effect_sentence(effects) == (
        f"hydrate tracks keys: p50 9.67 ms at 16 against 323 ms at 640 (33.4x); "
        f"hydrate is {keys['share']:.0%} of the mean end to end"
    )


def test_an_effect_inside_the_noise_is_not_separated_and_not_named():
    # forward alternates 9 and 10 ms whatever the attribute: top and bottom p50 intervals overlap
    values = [float(i % 40) for i in range(200)]
    req, st = tables([9.0 + (i % 2) for i in range(200)], values)
    effects = attribute_effects(req, st, ["parse", "forward"])
    assert not effects["forward"]["seq_len"]["separated"]
    assert ranked_effects(effects) == [] and effect_sentence(effects) is None


def test_a_top_range_too_small_for_an_interval_is_separated_by_its_whole_range():
    # 194 light requests at 16 keys (forward 1-10 ms), 6 heavy ones at 640 keys (forward 100 or 103 ms)
    values = [640.0 if i % 33 == 0 else 16.0 for i in range(200)]
    req, st = tables(
        [100.0 + (i % 6) if v == 640.0 else 1.0 + (i % 10) for i, v in enumerate(values)], values
    )
    entry = attribute_effects(req, st, ["parse", "forward"])["forward"]["seq_len"]
    top = entry["bins"][-1]
    assert top["count"] == 7 and top["p50_ci_low_ms"] is None  # 7 heavy: 0, 33, ..., 198
    assert (top["min_ms"], top["max_ms"]) == (100.0, 103.0) and entry[
        "separated"
    ]  # i % 6 is 0 or 3


def test_a_quadratic_stage_is_fitted_with_exponent_2_and_said_to_grow_faster_than_linearly():
    from workbench.analysis.attributes import growth_exponent, growth_phrase

    words = np.array([10.0, 20.0, 40.0, 80.0] * 10)
    assert growth_exponent((words**2 * 1000).astype(np.int64), words) == pytest.approx(2.0)
    assert growth_exponent((words * 1000).astype(np.int64), words) == pytest.approx(1.0)
    assert growth_exponent(np.full(40, 5, dtype=np.int64), np.full(40, 3.0)) is None  # one value
    assert growth_phrase("normalize", "words", 2.04) == "normalize grows as words^2.0"
    assert growth_phrase("normalize", "words", 1.1) is None
