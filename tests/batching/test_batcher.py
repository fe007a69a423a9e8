"""The threaded batcher under an injected clock: exact close, start and end times."""

import threading
import time

from tests.support.dispatch import dispatch_schedule
from workbench.batching.policy import BatchPolicy, DynamicBatcher
from workbench.timing import time_request

MS = 1_000_000


class SteppedClock:
    """A clock the test moves; the batcher's real-time waits just poll it."""

    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


def wait_until(predicate, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "batcher did not get there in time"
        time.sleep(0.001)


def test_threaded_batcher_dispatch_times_match_the_rule():
    clock = SteppedClock()
    gate = threading.Event()  # batch 0's pipeline call blocks until the test releases it
    calls = []

    def execute(items):
        calls.append(list(items))
        if len(calls) == 1:
            gate.wait(5)
        return time_request(["fwd"], [lambda b: b], items, clock)

    arrivals = [0, 1 * MS, 7 * MS, 8 * MS, 8 * MS + 500_000, 9 * MS, 30 * MS]
    batcher = DynamicBatcher(execute, BatchPolicy(3, 5), clock=clock)
    for i, a in enumerate(arrivals):
        batcher.submit(f"r{i}", arrival_ns=a)
    batcher.start()
    clock.now = 5 * MS  # the oldest has waited 5 ms: batch 0 closes, starts
    wait_until(lambda: len(calls) == 1)
    clock.now = 8 * MS + 500_000  # batch 1 is full at 8.5 ms; the executor is busy
    time.sleep(0.01)
    clock.now = 9 * MS  # batch 0 ends; batch 1 (closed at 8.5 ms) starts
    gate.set()
    wait_until(lambda: len(batcher.batches) == 2)
    clock.now = 14 * MS  # batch 2: the request at 9 ms waited 5 ms
    wait_until(lambda: len(batcher.batches) == 3)
    clock.now = 35 * MS
    assert batcher.wait_done(5)
    assert batcher.stop() == []
    got = [
        (b.batch, b.requests, b.close_ns, b.start_ns, b.end_ns)
        for b in sorted(batcher.batches, key=lambda b: b.batch)
    ]
    assert got == [
        (0, [0, 1], 5 * MS, 5 * MS, 9 * MS),
        (1, [2, 3, 4], 8 * MS + 500_000, 9 * MS, 9 * MS),
        (2, [5], 14 * MS, 14 * MS, 14 * MS),
        (3, [6], 35 * MS, 35 * MS, 35 * MS),
    ]
    assert calls == [["r0", "r1"], ["r2", "r3", "r4"], ["r5"], ["r6"]]
    ref = dispatch_schedule(arrivals, [4 * MS, 0, 0, 0], BatchPolicy(3, 5))
    assert [b["close_ns"] for b in ref] == [g[2] for g in got]
    assert [b["due_ns"] for b in ref] == [
        b.due_ns for b in sorted(batcher.batches, key=lambda b: b.batch)
    ]


def test_abort_returns_undispatched_requests():
    clock = SteppedClock()
    batcher = DynamicBatcher(
        lambda items: time_request(["f"], [lambda b: b], items, clock),
        BatchPolicy(2, 1000),
        clock=clock,
    ).start()
    batcher.submit("a", arrival_ns=0)
    assert not batcher.wait_done(0.01)
    assert batcher.stop(abort=True) == [(0, 0)]
    assert batcher.batches == []


def test_stage_error_fails_its_batch_and_the_run_goes_on():
    clock = SteppedClock()

    def forward(batch):
        if "bad" in batch:
            raise ValueError("poison item")
        return batch

    batcher = DynamicBatcher(
        lambda items: time_request(["parse", "forward"], [list, forward], items, clock),
        BatchPolicy(2, 0),
        clock=clock,
    )
    for i, item in enumerate(["x", "bad", "y"]):
        batcher.submit(item, arrival_ns=0 if i < 2 else 1)
    batcher.start()
    clock.now = 1
    assert batcher.wait_done(5)
    batcher.stop()
    failures = {b.batch: b.timing.failure for b in batcher.batches}
    assert failures[0].stage == "forward" and failures[0].error_type == "ValueError"
    assert failures[1] is None
