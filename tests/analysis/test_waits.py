"""The slowest requests' waits from the sampler's raw rows: the cause, the waiting line, what ran meanwhile."""

from __future__ import annotations

from tests.support.waits import MS, lock_sampled, lock_tables
from workbench.analysis.waits import gc_events, wait_summary


def test_the_slowest_requests_wait_on_the_lock_while_the_other_thread_copies():
    requests, stages = lock_tables()
    out = wait_summary(lock_sampled(), requests, stages, ["record"])
    assert out["tail_set"] == "slowest_5pct" and out["samples"]["slowest_5pct"] == 40
    assert out["classes"]["slowest_5pct"] == {"lock": 40.0}
    assert out["causes"] == [
        {
            "class": "lock",
            "stage": "record",
            "share": 1.0,
            "ms_per_request": 40.0,
            "median_ms_per_request": 0.0,
            "excess_ms_per_request": 40.0,
            "site": "record (app.py:83)",
            "meanwhile": [
                {
                    "thread": "snapshot",
                    "frame": "copy deepcopy <- snapshot_forever (app.py:45)",
                    "cpu_ms_per_request": 32.0,
                }
            ],
        }
    ]
    assert out["headline"] == (
        "record: 100 % of the slowest 5 % waiting on a lock at record (app.py:83); meanwhile thread "
        "'snapshot' ran copy deepcopy <- snapshot_forever (app.py:45) for 32 ms per slow request"
    )


def test_collections_by_generation_and_triggering_thread():
    assert gc_events(lock_sampled()) == {
        "collections": 1,
        "pause_ms_total": 30.0,
        "pause_ms_max": 30.0,
        "generations": {"2": {"collections": 1, "pause_ms_total": 30.0}},
        "threads": {"snapshot": 30.0},
    }


def test_a_run_without_raw_samples_has_no_waits():
    requests, stages = lock_tables()
    assert wait_summary(None, requests, stages, ["record"]) is None


def test_a_collection_is_timed_by_its_overlap_with_the_stage_calls_not_by_samples():
    """Request 10's record runs 1000-1040 ms; a 30 ms collection from 1030 ms overlaps it by 10 ms."""
    requests, stages = lock_tables()
    sampled = lock_sampled()
    sampled["gc"] = {
        "start_ns": [1030 * MS],
        "dur_ns": [30 * MS],
        "generation": [2],
        "thread": [0],
        "collected": [0],
    }
    out = wait_summary(sampled, requests, stages, ["record"])
    assert out["classes"]["slowest_5pct"] == {"lock": 40.0, "gc": 2.0}  # 10 ms over 5 requests
    assert [(c["class"], c["ms_per_request"]) for c in out["causes"]] == [
        ("lock", 40.0),
        ("gc", 2.0),
    ]


def test_a_threads_own_code_ranks_before_a_busier_event_loop_in_what_ran_meanwhile():
    """A server's event loop (MainThread in selectors.select, stdlib only) ran 4.5 ms at each wait, more
    than the snapshot's 4: the snapshot, in the user's code, is still the one named first."""
    import selectors

    requests, stages = lock_tables()
    sampled = lock_sampled()
    sampled["threads"].append("loop")
    sampled["frames"].append((selectors.__file__, "select", 468))
    sampled["stacks"].append([3])
    rows = sampled["rows"]
    for t in [t for t, s in zip(rows["t_ns"], rows["in_stage"]) if s == 1][:40]:
        values = (t, 5 * MS, 2, 2, 4 * MS + MS // 2, 0, 0, -1, 0)
        for column, value in zip(rows, values):
            rows[column].append(value)
    (cause,) = wait_summary(sampled, requests, stages, ["record"])["causes"]
    assert [(m["thread"], m["frame"], m["cpu_ms_per_request"]) for m in cause["meanwhile"]] == [
        ("snapshot", "copy deepcopy <- snapshot_forever (app.py:45)", 32.0),
        ("loop", "selectors select", 36.0),
    ]


def test_a_paced_request_kept_from_starting_has_its_wait_before_the_first_stage():
    """Five requests due 3 ms before their stage starts, the GIL held elsewhere (6 samples of the
    thread outside any stage, classed gil while 'snapshot' ran): the waits name
    ``(waiting to start)``; without ``late_start`` the same samples are left out."""
    from workbench.record.tables import build_tables, request_row
    from workbench.wait_classes import CODE, LATE_STAGE

    req_rows, st_rows = [], []
    for i in range(100):
        late = 30 * MS if i in (10, 20, 30, 40, 50) else 0
        req_rows.append(request_row(i, False, i * 100 * MS, late + MS, None, 1))
        st_rows.append((i, "record", 0, i * 100 * MS + late, MS, None))
    requests, stages = build_tables(req_rows, st_rows)
    sampled = lock_sampled()
    sampled["gc"] = {k: [] for k in sampled["gc"]}
    rows = sampled["rows"] = {c: [] for c in sampled["rows"]}
    for i in (10, 20, 30, 40, 50):
        for k in range(6):
            t = i * 100 * MS + k * 5 * MS + MS // 2
            for column, value in zip(rows, (t, 5 * MS, 0, 0, 0, -1, CODE["gil"], -1, 2)):
                rows[column].append(value)
            for column, value in zip(rows, (t, 5 * MS, 1, 1, 4 * MS, -1, CODE["cpu"], -1, 0)):
                rows[column].append(value)
    found = wait_summary(sampled | {"late_start": True}, requests, stages, ["record"])
    (cause,) = found["causes"]
    assert (cause["class"], cause["stage"], cause["site"]) == ("gil", LATE_STAGE, None)
    assert cause["ms_per_request"] == 30.0 and cause["share"] == 1.0
    assert cause["meanwhile"][0]["thread"] == "snapshot"
    assert found["headline"].startswith(
        "(waiting to start): 100 % of the slowest 5 % waiting for the GIL"
    )
    assert wait_summary(sampled, requests, stages, ["record"])["causes"] == []


def test_a_late_window_starts_when_the_request_before_ended():
    """Due at 10 ms while the one before ran until 14: its window is 14-16 ms, not 10-16 (the wait
    behind the earlier request is that request's stages)."""
    import pandas as pd

    from workbench.analysis.waits import late_windows

    req = pd.DataFrame({"request": [0, 1, 2], "start_ns": [0, 10 * MS, 30 * MS]})
    st = pd.DataFrame(
        {
            "request": [0, 0, 1, 2],
            "stage": ["a", "b", "a", "a"],
            "start_ns": [0, 5 * MS, 16 * MS, 30 * MS],
            "dur_ns": [5 * MS, 9 * MS, 2 * MS, MS],
        }
    )
    out = late_windows(req, st)
    assert out.to_dict("list") == {
        "request": [1],
        "stage": ["(waiting to start)"],
        "start_ns": [14 * MS],
        "dur_ns": [2 * MS],
    }


def test_a_late_row_inside_a_stage_is_not_a_second_thread_in_it():
    """A pacer waiting on a timeout guard's worker stays due while the worker runs the stages: its rows
    (``in_stage`` 2) count only in late windows, never as a second thread inside the stage."""
    from workbench.record.tables import build_tables, request_row
    from workbench.wait_classes import CODE

    req_rows = [request_row(i, False, i * 100 * MS, 40 * MS, None, 1) for i in range(100)]
    st_rows = [(i, "record", 0, i * 100 * MS, 40 * MS, None) for i in range(100)]
    requests, stages = build_tables(req_rows, st_rows)
    sampled = lock_sampled()
    sampled["gc"] = {k: [] for k in sampled["gc"]}
    rows = sampled["rows"] = {c: [] for c in sampled["rows"]}
    for i in range(100):
        t = i * 100 * MS + 10 * MS
        for column, value in zip(rows, (t, 5 * MS, 0, 0, 5 * MS, -1, CODE["cpu"], 0, 1)):
            rows[column].append(value)  # the worker, on CPU in record
        for column, value in zip(rows, (t, 5 * MS, 1, 1, 0, -1, CODE["gil"], -1, 2)):
            rows[column].append(value)  # the pacer, due, waiting for the worker
    found = wait_summary(sampled | {"late_start": True}, requests, stages, ["record"])
    assert found["causes"] == [] and found["classes"]["median"] == {"cpu": 5.0}
