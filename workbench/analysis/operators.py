"""Top operators: where host time goes by operator, on any trace (CPU-only included).

torch's ``key_averages()`` table from the trace file: per operator name (and input shapes, when
recorded with ``record_shapes=True``) the calls, total host time and self time (its duration less
the host events directly nested in it, :mod:`workbench.analysis.nesting`), so self times add up.
Columns :data:`COLUMNS` (``self_share`` of all operators' self time), most self time first."""

from __future__ import annotations

import numpy as np

from ..trace import HOST_KINDS, KIND_CPU_OP, KINDS, Trace
from ..trace.columns import factorize_objects
from .nesting import nest, nesting_order

COLUMNS = ["name", "input_shapes", "calls", "total_ns", "self_ns", "self_share"]


def operator_call_table(trace: Trace) -> dict[str, np.ndarray]:
    """One entry per operator call, in nesting order: ``name``, ``input_shapes`` ("" when not
    recorded), ``dur_ns``, ``self_ns``, ``name_code``."""
    host = trace.rows_of(HOST_KINDS)
    lane = host.pid.codes * (host.tid.labels.size + 1) + host.tid.codes
    order = nesting_order(lane, host.ts_ns, host.dur_ns)
    ts, dur, lane = host.ts_ns[order], host.dur_ns[order], lane[order]
    parent, _ = nest(lane, ts, ts + dur)
    child_sum = np.zeros(len(dur), dtype=np.int64)
    has_parent = parent >= 0
    np.add.at(child_sum, parent[has_parent], dur[has_parent])
    is_op = host.kind[order] == KINDS.index(KIND_CPU_OP)
    if host.shapes is not None:  # recorded with record_shapes=True; "" for events without shapes
        shapes = np.array(["" if s is None else s for s in host.shapes[order]], dtype=object)
    else:
        shapes = np.full(len(order), "", dtype=object)
    return {
        "name": host.name.take(order).values()[is_op],
        "input_shapes": shapes[is_op],
        "dur_ns": dur[is_op],
        "self_ns": np.maximum(dur - child_sum, 0)[is_op],
        "name_code": host.name.codes[order][is_op],
    }


def operator_rows(trace: Trace, n: int = 20, by_shapes: bool = True) -> list[dict]:
    """The ``n`` operators with the most self time, as dicts of :data:`COLUMNS`."""
    calls = operator_call_table(trace)
    shape_codes, _ = factorize_objects(
        calls["input_shapes"].tolist() if by_shapes else [""] * calls["name"].size
    )
    pair = calls["name_code"] * (int(shape_codes.max(initial=0)) + 1) + shape_codes
    distinct, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # groups in order of first appearance
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    codes = rank[inverse.reshape(-1)]
    firsts = first[order]
    shapes = calls["input_shapes"] if by_shapes else np.full(calls["name"].size, "", dtype=object)
    keys = list(zip(calls["name"][firsts].tolist(), shapes[firsts].tolist()))
    count = np.bincount(codes, minlength=len(keys)).astype(np.int64)
    total = np.zeros(len(keys), np.int64)
    own = np.zeros(len(keys), np.int64)
    np.add.at(total, codes, calls["dur_ns"])
    np.add.at(own, codes, calls["self_ns"])
    total_self = int(own.sum())
    rows = [
        {
            "name": name,
            "input_shapes": shape,
            "calls": int(c),
            "total_ns": int(t),
            "self_ns": int(s),
            "self_share": s / total_self if total_self else 0.0,
        }
        for (name, shape), c, t, s in zip(keys, count, total, own)
    ]
    rows.sort(key=lambda r: (-r["self_ns"], r["name"]))  # stable: ties keep first appearance
    return rows[:n]
