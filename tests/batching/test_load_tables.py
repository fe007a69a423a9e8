"""A load run's tables (batching/summary.py; test_records is serving's) time each request from its due time (issue 37)."""

from __future__ import annotations

import numpy as np

from workbench.batching.policy import BatchRecord
from workbench.batching.summary import format_summary, load_summary, load_tables
from workbench.timing import RequestTiming

MS = 1_000_000


def test_a_late_send_is_timed_from_its_due_time_and_its_lag_kept_apart():
    # requests 0 and 1 due at 0 and 1 ms; 1 went out at 4 ms (3 ms late); the batch ran 5-20 ms.
    # Request 2, due at 2 ms, went out at 25 ms and was still queued when the run stopped at 30 ms.
    timing = RequestTiming(5 * MS, 20 * MS, [], [], None, None)
    at = lambda t: 100 + t  # noqa: E731  (clock readings; the origin is at 100 ns)
    batch = BatchRecord(0, [0, 1], [at(0), at(4 * MS)], at(5 * MS), at(5 * MS), at(20 * MS), timing)
    schedule = np.array([0, 1 * MS, 2 * MS])
    requests, _ = load_tables(
        [batch], [(2, at(25 * MS))], [], 100, at(30 * MS), schedule_ns=schedule
    )
    r = requests.set_index("request")
    assert r["start_ns"].tolist() == [0, 1 * MS, 2 * MS]  # the due times
    assert r["arrival_ns"].tolist() == [0, 4 * MS, 25 * MS]  # the sends
    assert r["lag_ns"].tolist() == [0, 3 * MS, 23 * MS]
    assert r["dur_ns"].tolist() == [20 * MS, 19 * MS, 28 * MS]  # done minus due
    assert r["ok"].tolist() == [True, True, False]
    summary = load_summary(requests)
    assert summary["end_to_end"]["max_ms"] == 20.0 and summary["end_to_end"]["p50_ms"] == 19.5
    assert summary["send_lag"]["max_ms"] == 3.0 and summary["send_lag"]["count"] == 2
    assert summary["from_send"]["max_ms"] == 20.0 and summary["from_send"]["p50_ms"] == 18.0
    table = format_summary(summary)
    assert "send lag" in table and "from send" in table


def test_without_a_schedule_each_request_was_due_when_it_arrived():
    timing = RequestTiming(0, 2 * MS, [], [], None, None)
    batch = BatchRecord(0, [0], [MS], MS, MS, 3 * MS, timing)
    requests, _ = load_tables([batch], [], [], 0, 5 * MS)
    assert requests[["start_ns", "arrival_ns", "lag_ns", "dur_ns"]].iloc[0].tolist() == [
        MS,
        MS,
        0,
        2 * MS,
    ]
