"""Batch wait ends when the batch is due; waiting for a busy executor is queue wait (issue 30).

Notebook 9 showed a batch wait p99 of 110 ms under a 5 ms max wait: the time a
batch spent behind the one-deep handoff slot (its predecessor not yet started)
was counted as batch wait. ``policy.wait_split`` is the one rule the simulator,
the live batcher's records and the served records use.
"""

from __future__ import annotations

import numpy as np

from tests.support.dispatch import dispatch_schedule
from workbench.batching.policy import BatchPolicy, BatchRecord, wait_split
from workbench.batching.summary import load_tables
from workbench.timing import RequestTiming

MS = 1_000_000


def test_wait_split_ends_batch_wait_at_the_due_time():
    assert wait_split(0, 5 * MS, 9 * MS, 12 * MS) == (
        5 * MS,
        7 * MS,
    )  # due at 5, closed at 9 (slot busy)
    assert wait_split(7 * MS, 5 * MS, 9 * MS, 12 * MS) == (
        0,
        5 * MS,
    )  # joined after the due time: all queue wait
    assert wait_split(0, 5 * MS, 5 * MS, 5 * MS) == (5 * MS, 0)  # no back-pressure: as before
    assert wait_split(0, None, 9 * MS, 12 * MS) == (
        9 * MS,
        3 * MS,
    )  # an old record without due: to the close
    bw, qw = wait_split(
        np.array([0, 7 * MS]),
        np.array([5 * MS, 5 * MS]),
        np.array([9 * MS, 9 * MS]),
        np.array([12 * MS, 12 * MS]),
    )
    assert bw.tolist() == [5 * MS, 0] and qw.tolist() == [7 * MS, 5 * MS]


def test_the_reference_schedule_keeps_each_batch_s_due_time():
    """Batches of 2 close when full. Batch 1 (due at 3 ms) waits for the executor until 11 ms, so batch 2,
    full and due at 5 ms, cannot close before batch 1 starts at 11 ms (the one-deep handoff)."""
    arrivals = [0, 1 * MS, 2 * MS, 3 * MS, 4 * MS, 5 * MS]
    ref = dispatch_schedule(arrivals, [10 * MS, 1 * MS, 1 * MS], BatchPolicy(2, 100))
    assert [(b["due_ns"], b["close_ns"], b["start_ns"]) for b in ref] == [
        (1 * MS, 1 * MS, 1 * MS),
        (3 * MS, 3 * MS, 11 * MS),
        (5 * MS, 11 * MS, 12 * MS),
    ]
    waits = [
        wait_split(a, ref[i // 2]["due_ns"], ref[i // 2]["close_ns"], ref[i // 2]["start_ns"])
        for i, a in enumerate(arrivals)
    ]
    assert [w[0] for w in waits] == [
        1 * MS,
        0,
        1 * MS,
        0,
        1 * MS,
        0,
    ]  # never more than the batch's own fill time
    assert [w[1] for w in waits] == [0, 0, 8 * MS, 8 * MS, 7 * MS, 7 * MS]


def record(batch, requests, arrivals, due, close, start, end) -> BatchRecord:
    return BatchRecord(
        batch,
        requests,
        arrivals,
        close,
        start,
        end,
        RequestTiming(start, end, [], [], None, None),
        due,
    )


def test_load_tables_split_each_request_s_wait_and_keep_the_sum():
    batches = [
        record(0, [0, 1], [0, 3 * MS], 5 * MS, 5 * MS, 5 * MS, 20 * MS),
        record(1, [2, 3], [6 * MS, 14 * MS], 11 * MS, 15 * MS, 20 * MS, 22 * MS),
    ]
    requests, stages = load_tables(batches, [], [], 0, 30 * MS)
    r = requests.set_index("request")
    assert r["batch_wait_ns"].tolist() == [5 * MS, 2 * MS, 5 * MS, 0]
    assert r["queue_wait_ns"].tolist() == [
        0,
        0,
        9 * MS,
        6 * MS,
    ]  # request 2 waited 9 ms for the executor
    assert (r["batch_wait_ns"] + r["queue_wait_ns"] + r["service_ns"] == r["dur_ns"]).all()
    q = stages[(stages["request"] == 2) & (stages["stage"] == "queue_wait")].iloc[0]
    assert (q["start_ns"], q["dur_ns"]) == (
        11 * MS,
        9 * MS,
    )  # from the due time, not from the close


def test_a_record_without_due_keeps_the_old_split():
    requests, _ = load_tables(
        [record(0, [0], [0], None, 9 * MS, 12 * MS, 13 * MS)], [], [], 0, 20 * MS
    )
    assert requests[["batch_wait_ns", "queue_wait_ns"]].iloc[0].tolist() == [9 * MS, 3 * MS]
