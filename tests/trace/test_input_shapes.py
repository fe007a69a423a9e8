"""Operator input shapes (record_shapes=True) reach the events table and the top-operators table."""

from __future__ import annotations

import json

from workbench.trace import load_trace
from tests.support.tables import top_operators


def write_trace(path, events):
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def op(name, ts, dur, dims=None):
    args = {"External id": 1} | ({"Input Dims": dims} if dims is not None else {})
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "ts": ts,
        "dur": dur,
        "pid": 1,
        "tid": 1,
        "args": args,
    }


def test_input_dims_become_compact_text_and_split_top_operators(tmp_path):
    trace = write_trace(
        tmp_path / "t.json",
        [
            op("aten::mm", 0, 10, [[2, 3], [3, 4]]),
            op("aten::mm", 20, 30, [[8, 3], [3, 4]]),
            op("aten::relu", 60, 5),
        ],
    )
    events = load_trace(trace).events
    shapes = events["input_shapes"]
    assert list(shapes[:2]) == ["[[2,3],[3,4]]", "[[8,3],[3,4]]"] and shapes.isna().tolist() == [
        False,
        False,
        True,
    ]
    top = top_operators(load_trace(trace))
    assert list(top["name"]) == ["aten::mm", "aten::mm", "aten::relu"]
    assert list(top["input_shapes"]) == ["[[8,3],[3,4]]", "[[2,3],[3,4]]", ""]


def test_a_trace_without_shapes_has_no_shape_column(tmp_path):
    trace = write_trace(tmp_path / "t.json", [op("aten::mm", 0, 10), op("aten::relu", 20, 5)])
    assert "input_shapes" not in load_trace(trace).events.columns
