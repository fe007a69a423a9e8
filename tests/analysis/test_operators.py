"""Top operators: self and total time, calls, from events built in code."""

from __future__ import annotations

import pandas as pd

from workbench.trace import Trace
from workbench.trace.schema import KIND_DTYPE
from tests.support.tables import top_operators


def events(rows):
    """rows: (name, kind, ts_us, dur_us, tid)"""
    df = pd.DataFrame(
        [
            {
                "ts_ns": int(ts * 1000),
                "dur_ns": int(d * 1000),
                "name": n,
                "cat": k,
                "kind": k,
                "pid": "1",
                "tid": str(t),
            }
            for n, k, ts, d, t in rows
        ]
    )
    return df.astype(
        {
            "name": "category",
            "cat": "category",
            "kind": KIND_DTYPE,
            "pid": "category",
            "tid": "category",
        }
    )


def test_self_time_subtracts_direct_children_only():
    ev = events(
        [
            ("aten::linear", "cpu_op", 0, 100, 1),
            ("aten::addmm", "cpu_op", 10, 60, 1),
            ("cudaLaunchKernel", "runtime", 20, 10, 1),
            ("aten::linear", "cpu_op", 200, 50, 1),
            ("aten::addmm", "cpu_op", 205, 40, 1),
            ("aten::relu", "cpu_op", 0, 30, 2),  # another thread: not a child of linear
        ]
    )
    top = top_operators(Trace(ev), by_shapes=False)
    assert top.to_dict("records") == [
        {
            "name": "aten::addmm",
            "input_shapes": "",
            "calls": 2,
            "total_ns": 100_000,
            "self_ns": 90_000,
            "self_share": 90 / 170,
        },
        {
            "name": "aten::linear",
            "input_shapes": "",
            "calls": 2,
            "total_ns": 150_000,
            "self_ns": 50_000,
            "self_share": 50 / 170,
        },
        {
            "name": "aten::relu",
            "input_shapes": "",
            "calls": 1,
            "total_ns": 30_000,
            "self_ns": 30_000,
            "self_share": 30 / 170,
        },
    ]


def test_shapes_split_rows_when_recorded():
    ev = events([("aten::mm", "cpu_op", 0, 10, 1), ("aten::mm", "cpu_op", 20, 30, 1)])
    ev["input_shapes"] = ["[[2, 3], [3, 4]]", "[[8, 3], [3, 4]]"]
    top = top_operators(Trace(ev))
    assert list(top["input_shapes"]) == ["[[8, 3], [3, 4]]", "[[2, 3], [3, 4]]"] and list(
        top["calls"]
    ) == [1, 1]
    assert len(top_operators(Trace(ev), by_shapes=False)) == 1


def test_no_host_events_gives_an_empty_table():
    ev = events([("kernel", "kernel", 0, 10, 7)])
    assert top_operators(Trace(ev)).empty
