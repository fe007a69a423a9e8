"""Spearman correlation of stage time with describe= attributes, with exact numbers."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from workbench.analysis.attributes import (MIN_REQUESTS, attribute_correlations, fisher_interval, spearman,
                                           strongest_sentence)

MS = 1_000_000


def tables(fwd_ms, seq_len):
    req = pd.DataFrame({"request": range(len(fwd_ms)), "warmup": False, "ok": True,
                        "dur_ns": [int((f + 1) * MS) for f in fwd_ms], "attr.seq_len": seq_len})
    st = pd.DataFrame([{"request": i, "stage": s, "dur_ns": int(d * MS), "device_dur_ns": None}
                       for i, f in enumerate(fwd_ms) for s, d in (("parse", 1.0), ("forward", f))])
    return req, st.astype({"device_dur_ns": "Int64"})


def test_spearman_is_rank_correlation_with_average_ties():
    assert spearman(np.array([1, 2, 3, 4.0]), np.array([10, 20, 30, 1000.0])) == pytest.approx(1.0)
    assert spearman(np.array([1, 2, 3, 4.0]), np.array([4, 3, 2, 1.0])) == pytest.approx(-1.0)
    assert spearman(np.array([1, 2, 3.0]), np.array([5, 5, 5.0])) is None
    # ties: ranks 1.5, 1.5, 3 against 1, 2, 3 -> pearson of ranks
    assert spearman(np.array([1, 1, 2.0]), np.array([1, 2, 3.0])) == pytest.approx(0.8660254, rel=1e-6)


def test_fisher_interval_known_values():
    lo, hi = fisher_interval(0.5, 103)
    se = math.sqrt((1 + 0.125) / 100)
    assert lo == pytest.approx(math.tanh(math.atanh(0.5) - 1.959963984540054 * se))
    assert hi == pytest.approx(math.tanh(math.atanh(0.5) + 1.959963984540054 * se))


def test_forward_tracking_sequence_length_is_found_and_parse_is_constant():
    seq = list(range(1, 41))
    req, st = tables([0.1 * s for s in seq], seq)
    rows = attribute_correlations(req, st, ["parse", "forward"])
    top = rows[0]
    assert top["stage"] in ("forward", "end_to_end") and top["rho"] == pytest.approx(1.0) and top["n"] == 40
    parse = next(r for r in rows if r["stage"] == "parse")
    assert parse["rho"] is None and parse["note"] == "seq_len or parse is constant"
    assert strongest_sentence(rows).startswith("forward tracks seq_len, rho 1.00")


def test_too_few_requests_gives_no_rho():
    seq = list(range(MIN_REQUESTS - 1))
    req, st = tables([float(s) for s in seq], seq)
    rows = attribute_correlations(req, st, ["parse", "forward"])
    assert all(r["rho"] is None for r in rows) and "at least 30" in rows[0]["note"]


def test_no_attributes_no_rows():
    req, st = tables([1.0] * 40, [1] * 40)
    assert attribute_correlations(req.drop(columns=["attr.seq_len"]), st, ["parse", "forward"]) == []
