"""The one nesting rule for host events: which event encloses which, and how deep.

Used by the flame tree (:mod:`workbench.analysis.flame`) and the request chart
(:mod:`workbench.plots.request_chart`), so an event sits at the same depth in both.

Rule: walk the events of one lane (a thread) sorted by start, longest first on
ties, keeping a stack of the events still open. Before an event, pop every
event that has ended (``end <= start``), then every open event that cannot hold
it (it ends more than :data:`NEST_SLACK_NS` before the event does: a partial
overlap closes the shorter-lived one). The event's parent is the top of the
stack (the innermost open event that holds it), its depth the parent's plus one.
The slack keeps a child that outlives its parent by a rounding error (integer
microsecond traces) under that parent instead of dropping a level. Each event
is pushed and popped once: linear after sorting, whatever the depth (a million
nested calls) or overlap (a staircase of 50,000 partly overlapping calls).
"""
from __future__ import annotations

import numpy as np

NEST_SLACK_NS = 1_000  # one microsecond: the rounding of traces with integer-us timestamps


def nesting_order(lane: np.ndarray, ts_ns: np.ndarray, dur_ns: np.ndarray) -> np.ndarray:
    """The order :func:`nest` needs: by lane, then start, then longest first."""
    return np.lexsort((-np.asarray(dur_ns), np.asarray(ts_ns), np.asarray(lane)))


def nest(lane: np.ndarray, ts_ns: np.ndarray, end_ns: np.ndarray,
         slack_ns: int = NEST_SLACK_NS) -> tuple[np.ndarray, np.ndarray]:
    """Parent position (-1 for none) and depth (0 outermost) of each event.

    Inputs are already in :func:`nesting_order`; ``lane`` is any integer id of
    the event's thread, ``ts_ns``/``end_ns`` integer ns.
    """
    lanes, starts, ends = np.asarray(lane).tolist(), np.asarray(ts_ns).tolist(), np.asarray(end_ns).tolist()
    parent = [-1] * len(starts)
    depth = [0] * len(starts)
    stack: list[int] = []
    current = None
    for i, start in enumerate(starts):
        if lanes[i] != current:
            stack.clear()
            current = lanes[i]
        while stack and ends[stack[-1]] <= start:
            stack.pop()
        while stack and ends[stack[-1]] + slack_ns < ends[i]:
            stack.pop()
        if stack:
            parent[i] = top = stack[-1]
            depth[i] = depth[top] + 1
        stack.append(i)
    return np.array(parent, dtype=np.int64), np.array(depth, dtype=np.int64)


def nesting_depth(ts_ns: np.ndarray, dur_ns: np.ndarray) -> np.ndarray:
    """Depth of each interval of one lane (sorted by start, longest first on ties)."""
    ts_ns = np.asarray(ts_ns, dtype=np.int64)
    return nest(np.zeros(ts_ns.size, np.int64), ts_ns, ts_ns + np.asarray(dur_ns, dtype=np.int64))[1]
