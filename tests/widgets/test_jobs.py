"""JobQueue: debounced, serial, newest queued job wins, cancel reaches the running job."""
from __future__ import annotations

import threading

import pytest

from workbench.widgets.cache import LRUCache
from workbench.widgets.jobs import JobQueue


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
