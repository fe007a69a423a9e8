"""Head-of-line blocking on a planted load run: one heavy batch holds the only executor."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support import blocking_reference as reference
from workbench.analysis import blocking
from workbench.analysis.blocking import (
    _overlaps_own,
    batch_table,
    executing_stages,
    head_of_line,
    split,
    waits,
)
from workbench.analysis.tail import measured_ok

MS = 1_000_000
SHARES = ("blamed_ns", "share_of_queue_wait", "share_of_wait")


def load_tables(n_batches=20, heavy=5, heavy_hydrate_ms=60):
    """Batches of 2 requests every 10 ms, closed 2 ms after arrival, run in order on one executor:
    hydrate 1 ms and forward 1 ms, except batch ``heavy`` whose hydrate takes ``heavy_hydrate_ms``."""
    req, st, free = [], [], 0
    for b in range(n_batches):
        arrival, close = b * 10 * MS, b * 10 * MS + 2 * MS
        start = max(close, free)
        hydrate = (heavy_hydrate_ms if b == heavy else 1) * MS
        free = start + hydrate + MS
        for r in (2 * b, 2 * b + 1):
            req.append(
                {
                    "request": r,
                    "warmup": False,
                    "ok": True,
                    "dur_ns": free - arrival,
                    "arrival_ns": arrival,
                    "batch_wait_ns": 2 * MS,
                    "queue_wait_ns": start - close,
                    "service_ns": free - start,
                    "batch": b,
                }
            )
            st += [
                {"request": r, "stage": "batch_wait", "start_ns": arrival, "dur_ns": 2 * MS},
                {"request": r, "stage": "queue_wait", "start_ns": close, "dur_ns": start - close},
                {"request": r, "stage": "hydrate", "start_ns": start, "dur_ns": hydrate},
                {"request": r, "stage": "forward", "start_ns": start + hydrate, "dur_ns": MS},
            ]
    return pd.DataFrame(req), pd.DataFrame(st).assign(device_dur_ns=pd.NA)


def test_batch_table_has_close_start_and_members():
    req, _ = load_tables()
    batches = batch_table(req)
    row = batches[batches["batch"] == 6].iloc[0]
    assert (row["close_ns"], row["start_ns"], row["end_ns"], row["size"], row["requests"]) == (
        62 * MS,
        113 * MS,
        115 * MS,
        2,
        [12, 13],
    )


def test_the_heavy_hydrate_is_blamed_for_the_queue_wait_behind_it():
    req, st = load_tables()
    hol = head_of_line(req, st)
    # batches 6..12 wait 51, 43, 35, 27, 19, 11, 3 ms, two requests each
    assert hol["queue_wait_ns"] == 2 * 189 * MS and hol["batch_wait_ns"] == 2 * 20 * 2 * MS
    assert hol["waiting_requests"] == 14 and hol["idle_ns"] == 0
    # batch 5's hydrate [52, 112) ms covers 50 + 40 + 30 + 20 + 10 ms of the waits; the small batches
    # running in between add 16 ms of hydrate and 23 ms of forward (batch 5's forward: 6 x 1 ms)
    assert hol["blamed_ns"] == {"hydrate": 332 * MS, "forward": 46 * MS}
    assert hol["stage"] == "hydrate"
    assert hol["share_of_queue_wait"]["hydrate"] == pytest.approx(332 / 378)
    assert hol["share_of_wait"]["hydrate"] == pytest.approx(332 / 458)
    assert hol["holders"][0] == {
        "batch": 5,
        "requests": [10, 11],
        "stage": "hydrate",
        "blocked_ns": 300 * MS,
    }


def test_a_wait_with_the_executor_free_is_the_dispatch_gap():
    req, st = load_tables(n_batches=3, heavy=-1)
    req.loc[req["batch"] == 2, "queue_wait_ns"] = MS  # waited 1 ms with nothing running
    hol = head_of_line(req, st)
    assert hol["idle_ns"] == 2 * MS and hol["blamed_ns"] == {} and hol["stage"] is None


def test_two_executors_busy_split_the_blame_evenly():
    req, st = load_tables(n_batches=2, heavy=-1)
    # batch 1 waits [12, 16) ms while batch 0 and a third batch 2 both run hydrate over all of it
    req.loc[req["batch"] == 1, "queue_wait_ns"] = 4 * MS
    extra = pd.DataFrame(
        [
            {
                "request": 9,
                "warmup": False,
                "ok": True,
                "dur_ns": 20 * MS,
                "arrival_ns": 0,
                "batch_wait_ns": 0,
                "queue_wait_ns": 0,
                "service_ns": 20 * MS,
                "batch": 2,
            }
        ]
    )
    st = st[~((st["request"] < 2) & (st["stage"] == "hydrate"))]
    rows = pd.DataFrame(
        [
            {
                "request": r,
                "stage": "hydrate",
                "start_ns": 10 * MS,
                "dur_ns": 10 * MS,
                "device_dur_ns": pd.NA,
            }
            for r in (0, 9)
        ]
    )
    hol = head_of_line(
        pd.concat([req, extra], ignore_index=True), pd.concat([st, rows], ignore_index=True)
    )
    assert hol["blamed_ns"] == {"hydrate": 2 * 4 * MS}  # 2 requests x 4 ms, half to each holder
    assert sorted((h["batch"], h["blocked_ns"]) for h in hol["holders"]) == [
        (0, 4 * MS),
        (2, 4 * MS),
    ]


def test_a_profile_run_has_no_blocking():
    req = pd.DataFrame({"request": [0], "warmup": [False], "ok": [True], "dur_ns": [5]})
    st = pd.DataFrame({"request": [0], "stage": ["a"], "start_ns": [0], "dur_ns": [5]})
    assert head_of_line(req, st) is None


def test_a_request_that_arrived_after_its_batch_was_due_waits_from_its_arrival():
    req, st = load_tables()
    late = (
        req["request"] == 13
    )  # batch 6 closed at 62 ms; this request came at 70 ms, no batch wait
    req.loc[late, ["arrival_ns", "batch_wait_ns", "queue_wait_ns"]] = [70 * MS, 0, 43 * MS]
    hol = head_of_line(req, st)
    assert hol["queue_wait_ns"] == (2 * 189 - 8) * MS  # 8 ms less than when it waited from 62 ms
    assert hol["blamed_ns"] == {"hydrate": 324 * MS, "forward": 46 * MS} and hol["idle_ns"] == 0


GRID = 720_720  # lcm(1..16): at most 16 intervals run at once in random_load_tables


@pytest.mark.parametrize("seed", range(100))
def test_the_sweep_gives_the_wait_by_wait_result_on_random_runs(seed):
    # on a grid every piece divides evenly, so the old float sums are exact: equal, keys in order
    req, st = reference.random_load_tables(seed, GRID)
    new, old = head_of_line(req, st), reference.head_of_line(req, st)
    assert new == old
    assert [list(new[k]) for k in SHARES] == [list(old[k]) for k in SHARES]


@pytest.mark.parametrize("seed", range(100))
def test_the_sweep_matches_the_old_float_sums_to_the_nanosecond_off_the_grid(seed):
    # 1 ns ticks: the old sums round thirds; totals agree within their rounding, keys in order
    req, st = reference.random_load_tables(seed, 1)
    new, old = head_of_line(req, st), reference.head_of_line(req, st)
    assert list(new["blamed_ns"]) == list(old["blamed_ns"])
    for stage, ns in old["blamed_ns"].items():
        assert abs(new["blamed_ns"][stage] - ns) <= 1
        assert new["share_of_wait"][stage] == pytest.approx(old["share_of_wait"][stage], abs=1e-2)
    assert abs(new["idle_ns"] - old["idle_ns"]) <= 1


def test_random_runs_include_waits_their_own_batch_ran_during():
    own = 0
    for seed in range(150):
        req, st = reference.random_load_tables(seed, GRID)
        req, st = measured_ok(req, st)
        own += int(_overlaps_own(waits(req), executing_stages(req, st)).sum())
    assert own > 20


def test_every_wait_goes_through_one_sweep_over_its_ends(monkeypatch):
    # 2,000 batches queued behind each other on one executor: each wait overlaps every batch before
    # it (quadratic pairs); the blame is one call of split over 2 points per wait and per interval
    calls = []

    def counted(lo, hi, size, start, end):
        calls.append(len(lo) + len(hi) + len(start) + len(end))
        return split(lo, hi, size, start, end)

    monkeypatch.setattr(blocking, "split", counted)
    req, st = load_tables(n_batches=2_000, heavy=0, heavy_hydrate_ms=100_000)
    hol = head_of_line(req, st)
    assert calls == [2 * 1_999 + 2 * 4_000]  # waits of batches 1.. and 2 stages x 2,000 batches
    assert hol["holders"][0]["batch"] == 0 and hol["idle_ns"] == 0
