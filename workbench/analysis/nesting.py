"""The one nesting rule for host events: which event encloses which, and how deep.

Shared by the flame tree and the request chart, so an event sits at the same depth in both. Walk
one lane's (thread's) events by start, longest first on ties, keeping a stack of open events;
before an event pop those that ended (``end <= start``), then those that cannot hold it (ending
more than :data:`NEST_SLACK_NS` before it does). The parent is the stack's top. Linear after
sorting, whatever the depth or overlap."""

from __future__ import annotations

import numpy as np

NEST_SLACK_NS = 1_000  # one microsecond: the rounding of traces with integer-us timestamps


def nesting_order(lane: np.ndarray, ts_ns: np.ndarray, dur_ns: np.ndarray) -> np.ndarray:
    """The order :func:`nest` needs: by lane, then start, then longest first."""
    return np.lexsort((-np.asarray(dur_ns), np.asarray(ts_ns), np.asarray(lane)))


def nest(
    lane: np.ndarray, ts_ns: np.ndarray, end_ns: np.ndarray, slack_ns: int = NEST_SLACK_NS
) -> tuple[np.ndarray, np.ndarray]:
    """Parent position (-1 for none) and depth (0 outermost) of each event, inputs in
    :func:`nesting_order` (integer ns). Properly nested input is answered with numpy
    (:func:`_nest_nested`); any partial overlap goes to the stack walk (:func:`_nest_walk`), the
    rule."""
    lane, ts_ns, end_ns = (np.asarray(a, dtype=np.int64) for a in (lane, ts_ns, end_ns))
    fast = _nest_nested(lane, ts_ns, end_ns)
    return fast if fast is not None else _nest_walk(lane, ts_ns, end_ns, slack_ns)


def _nest_walk(
    lane: np.ndarray, ts_ns: np.ndarray, end_ns: np.ndarray, slack_ns: int
) -> tuple[np.ndarray, np.ndarray]:
    """The rule itself: a stack walk."""
    lanes, starts, ends = lane.tolist(), ts_ns.tolist(), end_ns.tolist()
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


def _nest_nested(
    lane: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_nest_walk`'s answer when no event outlives its parent (checked), else None."""
    n = ts.size
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    index = np.arange(n, dtype=np.int64)
    lane_first = np.maximum.accumulate(np.where(np.r_[True, lane[1:] != lane[:-1]], index, 0))
    ended = _ends_up_to_start(lane, ts, end, lane_first) - _zero_after(lane, ts, end)
    depth = (index - lane_first) - ended  # the lane's earlier events still open
    # (depth, position), unique; sorted order lists each level left to right
    ordered = np.sort(depth * n + index)
    at = np.searchsorted(ordered, (depth - 1) * n + index) - 1
    parent = np.where(depth > 0, ordered[np.maximum(at, 0)] % n, -1)
    p = np.maximum(parent, 0)
    child = depth > 0
    ok = ~child | (
        (at >= 0) & (depth[p] == depth - 1) & (lane[p] == lane) & (end[p] > ts) & (end <= end[p])
    )
    return (parent, depth) if ok.all() else None


def _ends_up_to_start(lane, ts, end, lane_first) -> np.ndarray:
    """Per event: how many events of its lane end at or before its start (ends first on ties)."""
    n = ts.size
    kind = np.r_[np.zeros(n, np.int8), np.ones(n, np.int8)]  # 0: an end, 1: a start
    order = np.lexsort((kind, np.r_[end, ts], np.r_[lane, lane]))
    ends_so_far = np.cumsum(kind[order] == 0)
    where = np.empty(n, np.int64)
    starts = np.flatnonzero(kind[order] == 1)
    where[order[starts] - n] = starts
    return ends_so_far[where] - lane_first  # earlier lanes' ends all sort first: lane_first of them


def _zero_after(lane, ts, end) -> np.ndarray:
    """Per event: its lane's zero-length events starting with it, at its position or later."""
    n = ts.size
    same = np.r_[False, (lane[1:] == lane[:-1]) & (ts[1:] == ts[:-1])]
    group = np.cumsum(~same) - 1
    last = np.r_[np.flatnonzero(~same)[1:] - 1, n - 1][group]
    zeros = np.bincount(group, weights=(end == ts), minlength=group[-1] + 1).astype(np.int64)[group]
    first_zero = last - zeros + 1  # zero-length events sort last among equal starts
    return np.where(np.arange(n) < first_zero, zeros, last - np.arange(n) + 1)


def nesting_depth(ts_ns: np.ndarray, dur_ns: np.ndarray) -> np.ndarray:
    """Depth of each interval of one lane (sorted by start, longest first on ties)."""
    ts_ns = np.asarray(ts_ns, dtype=np.int64)
    end_ns = ts_ns + np.asarray(dur_ns, dtype=np.int64)
    return nest(np.zeros(ts_ns.size, np.int64), ts_ns, end_ns)[1]
