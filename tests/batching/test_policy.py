import pytest

from tests.support.dispatch import dispatch_schedule
from workbench.batching.policy import BatchFormer, BatchPolicy
from workbench.errors import ConfigError

MS = 1_000_000


def test_size_rule_and_oldest_wait_rule():
    f = BatchFormer(BatchPolicy(max_batch_size=3, max_wait_ms=5))
    assert f.close_ns(0) is None
    f.push("a", 0)
    f.push("b", 1 * MS)
    assert f.close_ns(0) == 5 * MS  # the oldest has waited 5 ms
    f.push("c", 2 * MS)
    assert f.close_ns(0) == 2 * MS  # full at the third arrival
    f.push("d", 3 * MS)
    assert [r for r, _ in f.pop(2 * MS)] == ["a", "b", "c"]
    assert (
        f.close_ns(0) == 8 * MS and f.close_ns(9 * MS) == 9 * MS
    )  # a busy handoff slot delays the close


def test_zero_wait_dispatches_what_is_there():
    f = BatchFormer(BatchPolicy(4, 0))
    for r, t in (("a", 10), ("b", 10), ("c", 30)):
        f.push(r, t)
    assert f.close_ns(0) == 10
    assert [r for r, _ in f.pop(10)] == ["a", "b"]


def test_pop_takes_only_arrivals_by_close_and_at_most_max():
    f = BatchFormer(BatchPolicy(2, 1))
    for i in range(5):
        f.push(i, 0)
    assert [r for r, _ in f.pop(0)] == [0, 1]
    assert len(f) == 3 and [r for r, _ in f.drain()] == [2, 3, 4] and len(f) == 0
    with pytest.raises(ValueError, match="earlier"):
        f.push(9, 5) or f.push(10, 4)


def test_dispatch_schedule_exact_times():
    # max 3, wait 5 ms, service 4 ms, one executor
    arrivals = [0, 1 * MS, 7 * MS, 8 * MS, 8 * MS + 500_000, 9 * MS, 30 * MS]
    got = dispatch_schedule(arrivals, [4 * MS] * 7, BatchPolicy(3, 5))
    assert [(b["first"], b["size"], b["close_ns"], b["start_ns"], b["end_ns"]) for b in got] == [
        (0, 2, 5 * MS, 5 * MS, 9 * MS),  # oldest waited 5 ms
        (2, 3, 8 * MS + 500_000, 9 * MS, 13 * MS),  # full at the 3rd; waits for the executor
        (5, 1, 14 * MS, 14 * MS, 18 * MS),  # 9 + 5 ms
        (6, 1, 35 * MS, 35 * MS, 39 * MS),
    ]


def test_dispatch_schedule_backpressure_fills_batches():
    # 10 arrivals at once, max 4, wait 0, service 10 ms: the batch waiting in the handoff is
    # closed at once (size 4); the next closes only when that one starts, full again.
    got = dispatch_schedule([0] * 10, [10 * MS] * 10, BatchPolicy(4, 0))
    assert [(b["size"], b["close_ns"], b["start_ns"]) for b in got] == [
        (4, 0, 0),
        (4, 0, 10 * MS),
        (2, 10 * MS, 20 * MS),
    ]


def test_concurrency_two_executors():
    got = dispatch_schedule([0, 0, 0], [10 * MS] * 3, BatchPolicy(1, 0, concurrency=2))
    assert [(b["close_ns"], b["start_ns"], b["end_ns"]) for b in got] == [
        (0, 0, 10 * MS),
        (0, 0, 10 * MS),
        (0, 10 * MS, 20 * MS),
    ]


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 1.0), "max_batch_size"),
        ((1.5, 1.0), "max_batch_size"),
        ((4, -1.0), "max_wait_ms"),
        ((4, float("nan")), "max_wait_ms"),
        ((4, 1.0, 0), "concurrency"),
    ],
)
def test_bad_policy(args, match):
    with pytest.raises(ConfigError, match=match):
        BatchPolicy(*args)
