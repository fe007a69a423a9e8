"""A synthetic sampled run: 100 requests, 5 of them 40 ms waiting on a lock while 'snapshot' copies.

Shared by the waits analysis, its flame trees, their figure and the explorer's tests
(``tests/analysis/test_waits.py``, ``tests/analysis/test_wait_flame.py``,
``tests/plots/test_wait_flame_figure.py``, ``tests/widgets/test_summaries.py``).
"""

from __future__ import annotations

import copy

from workbench.record.tables import build_tables, request_row
from workbench.wait_classes import CODE

MS = 1_000_000
SLOW = (10, 20, 30, 40, 50)  # 40 ms in record, the others 1 ms: the slowest 5 % of 100


def lock_tables():
    req_rows, st_rows = [], []
    for i in range(100):
        dur = 40 * MS if i in SLOW else MS
        req_rows.append(request_row(i, False, i * 100 * MS, dur, None, 1))
        st_rows.append((i, "record", 0, i * 100 * MS, dur, None))
    return build_tables(req_rows, st_rows)


def lock_sampled():
    """Each slow request: 8 samples 5 ms apart waiting on the lock at app.py:83 while 'snapshot' ran a
    deepcopy 4 ms of each 5; one median request: one sample on CPU. One generation-2 collection."""
    rows = {c: [] for c in ("t_ns", "dt_ns", "thread", "stack", "cpu_ns", "rq_ns", "cls", "site")}
    rows["in_stage"] = []

    def add(t, thread, stack, cpu, cls, site, in_stage):
        for column, value in zip(rows, (t, 5 * MS, thread, stack, cpu, 0, cls, site, in_stage)):
            rows[column].append(value)

    for i in SLOW:
        for k in range(8):
            t = i * 100 * MS + k * 5 * MS + MS // 2
            add(t, 0, 0, 0, CODE["lock"], 0, 1)
            add(t, 1, 1, 4 * MS, CODE["cpu"], -1, 0)
    add(60 * 100 * MS + MS // 2, 0, 0, 5 * MS, CODE["cpu"], 0, 1)
    return {
        "interval_ns": 5 * MS,
        "cpu_source": "schedstat",
        "classes": list(CODE),
        "threads": ["MainThread", "snapshot"],
        "frames": [
            ("/srv/app/app.py", "record", 83),
            ("/srv/app/app.py", "snapshot_forever", 45),
            (copy.__file__, "deepcopy", 128),
        ],
        "stacks": [[0], [1, 2]],
        "rows": rows,
        "gc": {
            "start_ns": [0],
            "dur_ns": [30 * MS],
            "generation": [2],
            "thread": [1],
            "collected": [9],
        },
    }


def copying_sampled():
    """The synthetic lock run, and each slow request 2 ms on CPU in a deepcopy its record calls."""
    sampled = lock_sampled()
    sampled["stacks"].append([0, 2])
    rows = sampled["rows"]
    for i in SLOW:
        values = (i * 100 * MS + 38 * MS, 2 * MS, 0, 2, 2 * MS, 0, CODE["cpu"], 0, 1)
        for column, value in zip(rows, values):
            rows[column].append(value)
    return sampled
