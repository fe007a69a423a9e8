"""The slow requests' work beside their waits, as two differential flame trees of the sampled rows."""

from __future__ import annotations

from tests.support.waits import MS, copying_sampled, lock_tables
from workbench.analysis.waits import wait_flames


def node(id, parent, name, kind, tail_ms, median_ms):
    return {
        "id": id,
        "parent": parent,
        "name": name,
        "kind": kind,
        "tail_ns": tail_ms * MS,
        "median_ns": median_ms * MS,
    }


def test_the_slow_requests_work_and_waits_are_two_trees_summed_over_each_set():
    requests, stages = lock_tables()
    out = wait_flames(copying_sampled(), requests, stages, ["record"])
    assert out["tail_set"] == "slowest_5pct" and out["requests"] == {"tail": 5, "median": 95}
    # request 60 (median set) had one 5 ms sample on CPU in record
    assert out["work"] == [
        node(0, -1, "record", "stage", 10, 5),
        node(1, 0, "record", "frame", 10, 5),
        node(2, 1, "copy deepcopy", "frame", 10, 0),
    ]
    # 8 samples of 5 ms on the lock per slow request; the collection overlapping request 0 (median
    # set, 1 ms) is in the stage's median time, but a gc node the slow requests never had is left out
    assert out["waits"] == [
        node(0, -1, "record", "stage", 200, 1),
        node(1, 0, "lock", "class", 200, 0),
        node(2, 1, "record", "frame", 200, 0),
    ]


def test_a_run_without_raw_samples_has_no_trees():
    requests, stages = lock_tables()
    assert wait_flames(None, requests, stages, ["record"]) is None
