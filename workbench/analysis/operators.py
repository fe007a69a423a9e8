"""Top operators: where host time goes by operator, on any trace (CPU-only included).

The table torch's ``key_averages()`` prints, computed from the trace file:
per operator name (and input shapes, when the trace recorded them with
``record_shapes=True``), the number of calls, the total host time and the self
time. Self time is an operator's duration minus the durations of the host events
directly nested in it (child operators and runtime calls; the one nesting rule
of :mod:`workbench.analysis.nesting`), so self times add up without double
counting while totals include children.

Out columns: ``name``, ``input_shapes`` (str, "" when not recorded), ``calls``,
``total_ns``, ``self_ns`` (int64), ``self_share`` (self over the sum of every
operator's self time); sorted by self time, largest first.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import KIND_CPU_OP, Trace
from .nesting import nest, nesting_order

COLUMNS = ["name", "input_shapes", "calls", "total_ns", "self_ns", "self_share"]


def operator_times(trace: Trace) -> pd.DataFrame:
    """One row per operator call: ``name``, ``input_shapes``, ``dur_ns``, ``self_ns``."""
    host = trace.host
    if host.empty:
        return pd.DataFrame({"name": pd.Series(dtype=str), "input_shapes": pd.Series(dtype=str),
                             "dur_ns": pd.Series(dtype="int64"), "self_ns": pd.Series(dtype="int64")})
    lane = (host["pid"].cat.codes.to_numpy().astype(np.int64) * (len(host["tid"].cat.categories) + 1)
            + host["tid"].cat.codes.to_numpy())
    ts, dur = host["ts_ns"].to_numpy(np.int64), host["dur_ns"].to_numpy(np.int64)
    order = nesting_order(lane, ts, dur)
    ts, dur, lane = ts[order], dur[order], lane[order]
    parent, _ = nest(lane, ts, ts + dur)
    child_sum = np.zeros(len(dur), dtype=np.int64)
    has_parent = parent >= 0
    np.add.at(child_sum, parent[has_parent], dur[has_parent])
    rows = host.iloc[order]
    is_op = (rows["kind"] == KIND_CPU_OP).to_numpy()
    if "input_shapes" in rows:  # recorded with record_shapes=True; "" for events without shapes
        col = rows["input_shapes"]
        shapes = col.astype(object).where(col.notna(), "").astype(str).to_numpy()
    else:
        shapes = np.full(len(rows), "")
    return pd.DataFrame({"name": rows["name"].astype(str).to_numpy()[is_op], "input_shapes": shapes[is_op],
                         "dur_ns": dur[is_op], "self_ns": np.maximum(dur - child_sum, 0)[is_op]})


def top_operators(trace: Trace, n: int = 20, by_shapes: bool = True) -> pd.DataFrame:
    """The ``n`` operators with the most self time (see module docstring for the columns)."""
    calls = operator_times(trace)
    keys = ["name", "input_shapes"] if by_shapes else ["name"]
    if not by_shapes:
        calls = calls.assign(input_shapes="")
    agg = (calls.groupby(keys, sort=False, observed=True)
           .agg(calls=("dur_ns", "size"), total_ns=("dur_ns", "sum"), self_ns=("self_ns", "sum")).reset_index())
    if "input_shapes" not in agg:
        agg["input_shapes"] = ""
    total_self = int(agg["self_ns"].sum())
    agg["self_share"] = agg["self_ns"] / total_self if total_self else 0.0
    agg = agg.sort_values(["self_ns", "name"], ascending=[False, True], kind="stable").head(n)
    return agg[COLUMNS].astype({"calls": "int64", "total_ns": "int64", "self_ns": "int64"}).reset_index(drop=True)
