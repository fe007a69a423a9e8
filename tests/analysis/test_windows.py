"""Windows, perf_analyzer's stability rule, the knee and the auto sweep's stop: exact numbers."""

import numpy as np
import pandas as pd

from workbench.analysis.windows import (
    WINDOW_COLUMNS,
    StabilityWatch,
    auto_stop,
    counted_windows,
    first_stable,
    knee,
    ratio,
    window_table,
    within,
)

MS = 1_000_000


def test_window_table_counts_sent_and_finished_requests_per_window():
    # window 100 ms; four requests sent in window 0, two in window 1, one after the last window (ignored)
    start = np.array([0, 10, 50, 90, 100, 150, 300]) * MS
    dur = np.array([5, 5, 20, 20, 1, 2, 1]) * MS  # request 3 (sent at 90) finishes at 110: window 1
    ok = np.array([True, True, True, True, True, False, True])
    t = window_table(start, dur, ok, 100 * MS, 2)
    assert list(t.columns) == WINDOW_COLUMNS
    assert t["requests"].tolist() == [4, 2]
    assert t["ok"].tolist() == [4, 1]
    assert t["failed"].tolist() == [0, 1]
    assert t["offered_rps"].tolist() == [40.0, 20.0]
    assert t["achieved_rps"].tolist() == [
        30.0,
        20.0,
    ]  # finished ok: 3 in window 0; 2 (ids 3, 4) in window 1
    assert t["p50_ms"].tolist() == [12.5, 1.0]
    assert t["p99_ms"].tolist()[0] == 20.0
    assert t["start_ns"].tolist() == [0, 100 * MS] and t["end_ns"].tolist() == [100 * MS, 200 * MS]


def test_a_window_without_successes_has_no_percentiles():
    t = window_table(np.array([0]), np.array([MS]), np.array([False]), 10 * MS, 2)
    assert t["p50_ms"].tolist() == [None, None] and t["failed"].tolist() == [1, 0]


def test_within_is_relative_to_the_mean():
    assert within([9.0, 10.0, 11.0], 10)  # mean 10: each within 1
    assert not within([9.0, 10.0, 12.0], 10)  # mean 10.333: 12 is 1.667 away > 1.033
    assert within([90.0, 100.0, 110.0], 10)
    assert not within([10.0, None, 10.0], 10)
    assert not within([], 10)


def _windows(p50, p99):
    return pd.DataFrame({"p50_ms": p50, "p99_ms": p99})


def test_first_stable_needs_p50_and_p99_of_three_windows():
    w = _windows([10, 10, 10, 10, 10], [50, 30, 20, 21, 20])
    assert (
        first_stable(w, 10) == 4
    )  # windows 1..3: p99 30/20/21 not within 10 %; 2..4 (20/21/20) are
    assert first_stable(_windows([10, 10, 10], [20, 20, 20]), 10) == 2
    assert first_stable(_windows([10, 20, 10, 20], [5, 5, 5, 5]), 10) is None  # p50 never settles
    assert first_stable(_windows([10, 10], [5, 5]), 10) is None  # fewer than three windows


def test_first_stable_depends_on_the_tolerance():
    w = _windows([10, 10, 10, 10, 10], [50, 30, 20, 21, 20])
    # windows 0..2: p99 mean 33.3, 50 is 16.7 off (50 %); 1..3: mean 23.7, 30 is 6.3 off (26.8 %)
    assert first_stable(w, 10) == 4 and first_stable(w, 30) == 3 and first_stable(w, 60) == 2


def test_counted_windows_are_the_stable_trio_or_the_last_three():
    assert counted_windows(_windows([10] * 5, [20] * 5), 10) == ([0, 1, 2], True)
    assert counted_windows(_windows([10, 20, 10, 20, 40], [5] * 5), 10) == ([2, 3, 4], False)
    assert counted_windows(_windows([10, 20], [5, 5]), 10) == ([0, 1], False)


def _points(offered, p99, stable, achieved=None):
    return pd.DataFrame(
        {
            "offered_rps": offered,
            "p99_ms": p99,
            "stable": stable,
            "achieved_rps": achieved if achieved is not None else offered,
        }
    )


def test_knee_is_the_highest_stable_rate_within_the_sla():
    pts = _points([50, 100, 200, 400], [10.0, 12.0, 18.0, 90.0], [True, True, False, True])
    assert knee(pts, 20.0) == 1  # 200 meets the SLA but is unstable; 400 misses it
    assert knee(pts, 100.0) == 3
    assert knee(pts, 5.0) is None
    assert knee(pts, None) is None


def test_auto_stop_on_sla_and_on_flat_throughput():
    assert auto_stop(_points([50], [10.0], [True]), 20.0) is None
    assert auto_stop(_points([50, 100], [10.0, 25.0], [True, True]), 20.0) == "p99 passed the SLA"
    flat = _points([100, 200], [10.0, 12.0], [True, True], achieved=[100.0, 104.0])
    assert auto_stop(flat, 20.0) == "throughput stopped growing"
    assert (
        auto_stop(_points([100, 200], [10.0, 12.0], [True, True], achieved=[100.0, 106.0]), 20.0)
        is None
    )
    assert auto_stop(_points([100], [None], [False]), 20.0) == "p99 passed the SLA"


def test_ratio():
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None and ratio(1.0, 0.0) is None and ratio(1.0, None) is None


def _feed(watch, sends_ms, dur_ms, ok=None):
    """A generator's calls, in time order: before each send, the requests that ended, then ``stop``.

    Returns how many requests were sent before ``stop`` said True (all when it never did).
    """
    ends = sorted((s + d, k) for k, (s, d) in enumerate(zip(sends_ms, dur_ms)))
    done = 0
    for k, t in enumerate(sends_ms):
        while done < len(ends) and ends[done][0] <= t:
            j = ends[done][1]
            watch.finished(
                sends_ms[j] * MS, sends_ms[j] * MS, dur_ms[j] * MS, True if ok is None else ok[j]
            )
            done += 1
        if watch.stop(t * MS):
            return k
        watch.sent(t * MS)
    return len(sends_ms)


def test_the_watch_stops_at_the_first_send_after_three_stable_windows():
    # windows of 100 ms, a send every 10 ms, 5 ms each: windows 0-2 settle, the send due at 300 ms is not made
    sends = list(range(0, 1000, 10))
    watch = StabilityWatch(100 * MS, 10.0, 10)
    assert _feed(watch, sends, [5] * len(sends)) == 30
    assert (watch.windows_run, watch.stable_after) == (3, 3)
    assert watch.p50_ms == [5.0, 5.0, 5.0] and watch.p99_ms == [5.0, 5.0, 5.0]


def test_a_window_with_a_request_in_flight_is_judged_at_a_later_send():
    # 25 ms each: at 300 ms the requests sent at 280 and 290 are in flight, so 300 and 310 still go out;
    # at 320 the one sent at 290 has ended (315): the point stops there, three whole windows and two more sends
    sends = list(range(0, 1000, 10))
    watch = StabilityWatch(100 * MS, 10.0, 10)
    assert _feed(watch, sends, [25] * len(sends)) == 32
    assert (watch.windows_run, watch.stable_after) == (3, 3)


def test_the_first_stable_trio_is_found_as_first_stable_finds_it():
    # 20 ms in window 0, 10 ms after: stable at windows 1..3, so the schedule stops before the send at 400 ms
    sends = list(range(0, 1000, 10))
    dur = [20 if t < 100 else 10 for t in sends]
    watch = StabilityWatch(100 * MS, 10.0, 10)
    assert _feed(watch, sends, dur) == 40
    assert (watch.windows_run, watch.stable_after) == (4, 4)
    table = window_table(
        np.array(sends) * MS, np.array(dur) * MS, np.ones(len(sends), bool), 100 * MS, 4
    )
    assert first_stable(table, 10.0) == 3  # the same window the offline rule picks


def test_an_unstable_point_is_never_stopped():
    sends = list(range(0, 500, 10))
    watch = StabilityWatch(100 * MS, 10.0, 5)
    assert (
        _feed(watch, sends, [1 + t // 10 for t in sends]) == 50
    )  # latency grows 1 ms per send: all 5 windows
    assert (watch.windows_run, watch.stable_after) == (None, None)
    assert len(watch.p50_ms) == 4  # window 4 ends with the schedule: nothing is due after it


def test_failed_requests_count_as_finished_but_not_in_the_percentiles():
    # every request of window 1 fails: it has no p50, so windows 0-2 are not a stable trio; 2-4 are
    sends = list(range(0, 1000, 10))
    ok = [not 100 <= t < 200 for t in sends]
    watch = StabilityWatch(100 * MS, 10.0, 10)
    assert _feed(watch, sends, [5] * len(sends), ok) == 50
    assert (watch.windows_run, watch.stable_after) == (5, 5)
    assert watch.p50_ms[1] is None
