"""The one nesting rule (flame tree and request chart), including the pathological cases
of the reliability issue: 50,000 partly overlapping calls and a 1,000,000-deep nesting."""

import time

import numpy as np

from workbench.analysis import flame
from workbench.analysis.trace_report import NEST_SLACK_NS, nest, nesting_depth, nesting_order
from tests.nesting_helpers import host_events, reference_s, within


def test_rule_ended_nested_partial_and_slack():
    # A [0, 100k) holds B [10k, 60k); C [50k, 80k) outlives B by 20 us: B is closed, C sits under A.
    # D [55k, 80.5k) outlives C by 500 ns (within the 1 us slack): nested under C. E starts after all.
    ts = np.array([0, 10_000, 50_000, 55_000, 200_000])
    end = np.array([100_000, 60_000, 80_000, 80_500, 210_000])
    parent, depth = nest(np.zeros(5, np.int64), ts, end)
    assert parent.tolist() == [-1, 0, 0, 2, -1]
    assert depth.tolist() == [0, 1, 1, 2, 0]
    assert NEST_SLACK_NS == 1_000
    assert nesting_depth(ts, end - ts).tolist() == [0, 1, 1, 2, 0]


def test_lanes_do_not_nest_into_each_other_and_order_is_lane_start_longest():
    lane, ts, dur = np.array([2, 1, 1, 2]), np.array([0, 5, 5, 1]), np.array([10, 1, 3, 2])
    order = nesting_order(lane, ts, dur)
    assert order.tolist() == [2, 1, 0, 3]
    parent, depth = nest(lane[order], ts[order], (ts + dur)[order])
    assert parent.tolist() == [-1, 0, -1, 2] and depth.tolist() == [0, 1, 0, 1]


def test_flame_tree_puts_a_partly_overlapping_call_where_the_rule_says():
    k = 1_000
    events = host_events(
        [0, 10 * k, 50 * k], [100 * k, 50 * k, 30 * k], ["outer", "first", "overlapping"]
    )
    tree = flame.flame_tree(events)
    by_name = tree.set_index("name")
    assert by_name.loc["overlapping", "depth"] == 1 and by_name.loc["first", "depth"] == 1
    assert by_name.loc["overlapping", "parent"] == by_name.loc["outer", "id"]
    assert by_name.loc["outer", "self_ns"] == 20 * k  # 100 - 50 - 30


def test_50000_partly_overlapping_calls_are_linear():
    n = 50_000
    ts = np.arange(n, dtype=np.int64) * 10_000
    events = host_events(
        ts, np.full(n, 15_000), ["op"] * n
    )  # each outlives the one it starts in by 5 us
    before = reference_s()
    start = time.perf_counter()
    tree = flame.flame_tree(events)
    pruned = flame.prune(tree, 0.01)
    elapsed = time.perf_counter() - start
    assert tree["count"].tolist() == [n] and tree["depth"].tolist() == [0]
    assert tree["total_ns"].tolist() == [n * 15_000] and len(pruned) == 1
    assert within(elapsed, before, 50), f"{elapsed:.1f} s"  # ~2 refs when quiet; quadratic: minutes


def test_a_million_deep_nesting_is_linear():
    n = 1_000_000
    ts = np.arange(n, dtype=np.int64)
    events = host_events(ts, 2 * (n - ts), ["f"] * n)
    before = reference_s()
    start = time.perf_counter()
    tree = flame.flame_tree(events)
    size = flame.pruned_sizes(tree, [0.5])[0]
    elapsed = time.perf_counter() - start
    assert len(tree) == n and int(tree["depth"].max()) == n - 1
    assert tree["parent"].tolist()[:3] == [-1, 0, 1] and int(tree["self_ns"].iloc[0]) == 2
    # nodes keep >= 50 % of the root's 2,000,000 ns while 2 * (n - i) >= 1,000,000: 500,001 nodes, + one (other)
    assert size == 500_002 == len(flame.prune(tree, 0.5))
    assert within(elapsed, before, 400), (
        f"{elapsed:.1f} s"
    )  # ~50 refs when quiet; levelwise: never ends


def random_nested(rng, lanes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random properly nested calls (zero-length and same-start ones included) on a few lanes."""
    ts, ends = [], []

    def fill(a, b, level):
        t = a
        while t < b and rng.random() < 0.7 and len(ts) < 60:
            s = int(rng.integers(t, b + 1))
            e = s if rng.random() < 0.2 else int(rng.integers(s, b + 1))
            ts.append(s)
            ends.append(e)
            if level < 5 and e > s:
                fill(s, e, level + 1)
            t = e if rng.random() < 0.8 else s

    fill(0, 1_000, 0)
    return rng.integers(0, lanes, len(ts)), np.array(ts, np.int64), np.array(ends, np.int64)


def test_the_numpy_answer_equals_the_stack_walk():
    from workbench.analysis.trace_report import _nest_nested, _nest_walk

    rng = np.random.default_rng(7)
    checked = 0
    for trial in range(600):
        if trial % 2:
            lane, ts, end = random_nested(rng, 2)
        else:  # random overlaps: mostly refused by the numpy path
            n = int(rng.integers(1, 40))
            lane, ts = rng.integers(0, 3, n), rng.integers(0, 100, n)
            end = ts + rng.integers(0, 30, n) * (rng.random(n) < 0.9)
        order = nesting_order(lane, ts, end - ts)
        lane, ts, end = lane[order], ts[order], end[order]
        walked, fast = _nest_walk(lane, ts, end, NEST_SLACK_NS), _nest_nested(lane, ts, end)
        if fast is not None:
            checked += 1
            assert np.array_equal(fast[0], walked[0]) and np.array_equal(fast[1], walked[1]), trial
    assert checked > 300
