"""JobQueue: debounced, serial, newest queued job wins, cancel reaches the running job."""

from __future__ import annotations

import threading

import pytest

from workbench.widgets.controller import LRUCache
from workbench.widgets.controller import JobQueue


def recorder(log: list, name: str, gate: threading.Event | None = None):
    def job(cancel: threading.Event) -> None:
        if gate is not None:
            while not gate.wait(0.005):
                if cancel.is_set():
                    log.append(f"{name} cancelled")
                    return
        log.append(name)

    return job


def test_debounce_collapses_rapid_submissions_into_the_last():
    log: list = []
    q = JobQueue(debounce_s=0.2)
    for name in ("a", "b", "c"):
        q.submit(recorder(log, name))
    q.wait(5)
    assert log == ["c"]
    assert q.started == 1


def test_a_job_may_skip_the_queues_debounce_and_a_later_one_still_replaces_it():
    log: list = []
    q = JobQueue(debounce_s=5.0)
    q.submit(recorder(log, "at once"), debounce_s=0)
    q.wait(2)  # long before the queue's 5 s debounce
    assert log == ["at once"]
    q.submit(recorder(log, "debounced"))
    q.submit(recorder(log, "replaces it"), debounce_s=0)
    q.wait(2)
    assert log == ["at once", "replaces it"] and q.started == 2
    with pytest.raises(ValueError, match="debounce_s must be >= 0"):
        q.submit(recorder(log, "never"), debounce_s=-1)


def test_one_job_at_a_time_and_queued_jobs_superseded():
    log: list = []
    gate = threading.Event()
    q = JobQueue(debounce_s=0)
    q.submit(recorder(log, "first", gate))
    while q.started == 0:
        threading.Event().wait(0.005)
    q.submit(recorder(log, "second"))
    q.submit(recorder(log, "third"))
    assert q.busy
    gate.set()
    q.wait(5)
    assert log == ["first", "third"]
    assert q.started == 2


def test_cancel_sets_the_running_jobs_event_and_drops_the_queued_one():
    log: list = []
    gate = threading.Event()
    q = JobQueue(debounce_s=0)
    q.submit(recorder(log, "long", gate))
    while q.started == 0:
        threading.Event().wait(0.005)
    q.submit(recorder(log, "queued"))
    assert q.cancel() is True
    q.wait(5)
    assert log == ["long cancelled"]
    assert q.cancel() is False


def test_errors_go_to_on_error_and_the_queue_keeps_working():
    seen: list = []
    q = JobQueue(debounce_s=0, on_error=seen.append)

    def boom(cancel):
        raise RuntimeError("boom")

    q.submit(boom)
    q.wait(5)
    log: list = []
    q.submit(recorder(log, "after"))
    q.wait(5)
    assert [str(e) for e in seen] == ["boom"] and log == ["after"]


def test_without_handler_wait_reraises_the_job_error():
    q = JobQueue(debounce_s=0)

    def boom(cancel):
        raise ValueError("bad")

    q.submit(boom)
    with pytest.raises(ValueError, match="bad"):
        q.wait(5)
    q.wait(5)  # reported once


def test_negative_debounce_is_refused():
    with pytest.raises(ValueError, match="debounce_s"):
        JobQueue(debounce_s=-1)


def test_lru_cache_is_bounded_and_drops_the_least_recently_used():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]
    assert cache.get("b") is None
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 2)


# -- a job that never returns (issue 11: a hung stage froze the explorer) -------------


def test_a_cancelled_job_that_ignores_cancel_is_abandoned_and_the_queue_goes_on():
    from workbench.widgets.controller import JobStuck

    seen: list = []
    log: list = []
    stuck_gate = threading.Event()
    q = JobQueue(debounce_s=0, on_error=seen.append, abandon_after_s=0.2)

    def ignores_cancel(cancel):
        stuck_gate.wait(30)
        log.append("stuck job returned")

    q.submit(ignores_cancel)
    while q.started == 0:
        threading.Event().wait(0.005)
    assert q.cancel() is True
    q.wait(5)  # returns: the queue abandoned the job
    assert q.stuck == 1 and not q.busy
    assert [type(e) for e in seen] == [JobStuck]
    assert "its thread was abandoned" in str(seen[0])
    q.submit(recorder(log, "next"))
    q.wait(5)
    assert log == ["next"] and q.started == 2
    stuck_gate.set()  # the abandoned job returns late: it changes nothing
    for _ in range(200):
        if q.stuck == 0:
            break
        threading.Event().wait(0.01)
    assert q.stuck == 0 and log == ["next", "stuck job returned"] and not q.busy and len(seen) == 1


def test_a_job_that_stops_in_time_is_not_abandoned():
    seen: list = []
    gate = threading.Event()
    q = JobQueue(debounce_s=0, on_error=seen.append, abandon_after_s=0.3)
    q.submit(recorder([], "long", gate))
    while q.started == 0:
        threading.Event().wait(0.005)
    q.cancel()
    q.wait(5)
    threading.Event().wait(0.5)  # past the watchdog
    assert q.stuck == 0 and seen == []


HANG = threading.Event()  # set at the end of the explorer tests: abandoned stage threads end
HUNG = threading.Event()  # set when a request enters the hang (a busy machine gets there late)


def build_hanging(config):
    """Batch size 1: the second request hangs in ``forward``; other sizes run."""
    import itertools

    from workbench import Pipeline

    pipe = Pipeline("hangs", items=lambda: itertools.count())

    @pipe.stage
    def forward(batch):
        if config.batch_size == 1 and batch[0] >= 1:
            HUNG.set()
            HANG.wait(60)
        return batch

    return pipe


@pytest.fixture
def release_hang():
    HANG.clear()
    HUNG.clear()
    yield
    HANG.set()


def wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = threading.Event()
    timer = threading.Timer(timeout_s, deadline.set)
    timer.start()
    try:
        while not predicate():
            assert not deadline.is_set(), "condition not reached in time"
            threading.Event().wait(0.02)
    finally:
        timer.cancel()


def test_explorer_cancel_during_a_hung_stage_frees_it_and_says_the_stage_is_stuck(release_hang):
    from workbench.widgets import LatencyExplorer, LiveRuns

    ex = LatencyExplorer(
        build_hanging,
        batch_sizes=(1, 2),
        debounce_s=0,
        live=LiveRuns(requests=4, warmup=0, traced=0),
    )
    assert ex.live.timeout_s == 30.0
    wait_for(lambda: ex.profile_calls == 1 and ex.status.value.startswith("profiling"))
    assert HUNG.wait(30)  # inside the hung stage
    ex.cancel()
    ex.wait(10)
    assert "cancelled while stage 'forward' was running; its thread was abandoned" in ex.message
    ex.set(batch_size=2)  # usable again: the next configuration is measured and drawn
    ex.wait(60)
    assert ex.profile_calls == 2 and ex.current is not None and ex.current.key[2] == 2


def test_explorer_timeout_ends_the_run_and_the_status_names_the_stuck_stage(release_hang):
    from workbench.widgets import LatencyExplorer, LiveRuns

    ex = LatencyExplorer(
        build_hanging,
        batch_sizes=(1, 2),
        debounce_s=0,
        live=LiveRuns(requests=4, warmup=0, traced=0, timeout_s=0.3),
    ).wait(60)
    assert ex.current is not None and ex.current.failed == 1
    assert (
        "stopped: stage 'forward' still running after the 0.3 s per-request timeout"
        in ex.status.value
    )
