"""GC pauses per stage from a stages table with gc_ns, exact numbers."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.analysis.budget import gc_summary

MS = 1_000_000


def tables(n=20, gc_every=10, gc_ms=3.0):
    req, st = [], []
    for i in range(n):
        gc = int(gc_ms * MS) if i % gc_every == 0 else 0
        req.append({"request": i, "warmup": False, "ok": True, "dur_ns": 2 * MS + gc})
        st.append({"request": i, "stage": "a", "dur_ns": MS, "device_dur_ns": None, "gc_ns": 0})
        st.append(
            {"request": i, "stage": "b", "dur_ns": MS + gc, "device_dur_ns": None, "gc_ns": gc}
        )
    return pd.DataFrame(req), pd.DataFrame(st).astype({"device_dur_ns": "Int64", "gc_ns": "Int64"})


def test_pauses_are_summed_per_stage_and_the_tail_share_is_exact():
    req, st = tables()
    g = gc_summary(req, st, ["a", "b"])
    assert g["pause_ms_total"] == 6.0 and g["requests_with_gc"] == 2 and g["requests"] == 20
    assert g["stages"]["a"] == {
        "pause_ms_total": 0.0,
        "requests_with_gc": 0,
        "share_of_stage_time": 0.0,
    }
    assert g["stages"]["b"]["share_of_stage_time"] == pytest.approx(6 / (20 + 6))
    # slowest 5 % of 20 = 1 request: the first of the two 5 ms requests (ties by request id): 3 of 5 ms
    assert g["share_slowest_5pct"] == pytest.approx(3 / 5) and g["stage"] == "b"


def test_no_gc_column_means_not_recorded():
    req, st = tables()
    assert gc_summary(req, st.drop(columns=["gc_ns"]), ["a", "b"]) is None


def test_no_collection_names_no_stage():
    req, st = tables(gc_ms=0.0)
    g = gc_summary(req, st, ["a", "b"])
    assert g["pause_ms_total"] == 0.0 and g["stage"] is None and g["share_slowest_5pct"] == 0.0
