"""The live dynamic batcher: ``concurrency`` executor threads pulling batches from one queue.

Requests are submitted with their arrival time (the injectable clock, read
under the lock so arrivals never go back in time). There is no separate
batcher thread: an idle executor applies :mod:`workbench.batching.policy`'s
rule itself. Because the rule only uses recorded times (arrivals, and the
start of the previous batch for the one-deep handoff), the batch an executor
takes when it becomes free is exactly the batch a batcher thread would have
closed at ``close_ns`` and handed over: the requests that arrived by
``close_ns``, at most ``max_batch_size``. Doing it in the executor saves one
thread wake-up per batch, which on a busy 2-core machine costs more than the
work. The executor records ``start_ns`` when it takes the batch (so
``queue_wait = start - close`` holds its wake-up delay, or the time the
closed batch waited for it) and ``end_ns`` when the pipeline call returns;
the call itself is timed stage by stage by ``execute`` (``workbench.timing``).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import PipelineError
from ..timing import Clock, RequestTiming, StageFailure
from .policy import BatchFormer, BatchPolicy


@dataclass
class BatchRecord:
    """One executed batch: its requests (ids), their arrivals and the batch's clock readings (ns)."""

    batch: int
    requests: list[int]
    arrivals_ns: list[int]
    close_ns: int
    start_ns: int
    end_ns: int
    timing: RequestTiming


class DynamicBatcher:
    """Threads around a :class:`BatchFormer`; ``execute(items) -> RequestTiming`` runs one batch.

    Use ``start()``, ``submit(item)`` from one producer thread, then
    ``wait_done(timeout_s)`` and ``stop()``. ``batches`` holds the executed
    batches in completion order; ``stop(abort=True)`` returns the requests that were
    never dispatched as ``(request, arrival_ns)`` pairs.
    """

    def __init__(self, execute: Callable[[list], RequestTiming], policy: BatchPolicy, *,
                 clock: Clock = time.perf_counter_ns, thread_init: Callable[[], Any] | None = None):
        self.policy, self._execute, self._clock, self._thread_init = policy, execute, clock, thread_init
        self.init_results: list[Any] = []
        self._ready = 0
        self._former = BatchFormer(policy)
        self._cond = threading.Condition()
        self._items: dict[int, Any] = {}
        self._slot_free_ns = 0  # start time of the last started batch
        self._next_batch = self._submitted = self._finished = 0
        self._stopping = False
        self.batches: list[BatchRecord] = []
        self._threads: list[threading.Thread] = []

    def start(self, timeout_s: float = 600.0) -> "DynamicBatcher":
        """Start the executors; returns once each has run ``thread_init`` (its warm-up), if any."""
        self._threads = [threading.Thread(target=self._executor_loop, name=f"workbench-executor-{k}", daemon=True)
                         for k in range(self.policy.concurrency)]
        for t in self._threads:
            t.start()
        with self._cond:
            self._cond.wait_for(lambda: self._ready >= len(self._threads), timeout=timeout_s)
        failed = [r for r in self.init_results if isinstance(r, Exception)]
        if failed:
            self.stop(abort=True)
            raise PipelineError(f"executor warm-up failed: {type(failed[0]).__name__}: {failed[0]}") from failed[0]
        return self

    def submit(self, item: Any, arrival_ns: int | None = None) -> tuple[int, int]:
        """Queue one request; returns (request id, arrival_ns). ``arrival_ns`` defaults to now."""
        with self._cond:
            arrival = self._clock() if arrival_ns is None else int(arrival_ns)
            rid = self._submitted
            self._submitted += 1
            self._items[rid] = item
            self._former.push(rid, arrival)
            self._cond.notify_all()
        return rid, arrival

    def wait_done(self, timeout_s: float) -> bool:
        """Wait (real time) until every submitted request has finished; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._finished >= self._submitted, timeout=timeout_s)

    def stop(self, abort: bool = False, join_timeout_s: float = 30.0) -> list[tuple[int, int]]:
        """Stop the executors once the queue is empty (at once with ``abort``); return the undispatched."""
        with self._cond:
            self._stopping = True
            dropped = self._former.drain() if abort else []
            self._cond.notify_all()
        for t in self._threads:
            t.join(join_timeout_s)
        return dropped

    def _take(self) -> tuple[int, list, int, int] | None:
        """Wait (holding the lock between waits) for the next batch; None when stopping and empty."""
        cond, former = self._cond, self._former
        while True:
            close = former.close_ns(self._slot_free_ns)
            if close is None:
                if self._stopping:
                    return None
                cond.wait()
                continue
            now = self._clock()
            if now < close:
                cond.wait(timeout=(close - now) / 1e9)
                continue
            batch, self._next_batch = self._next_batch, self._next_batch + 1
            self._slot_free_ns = now
            return batch, former.pop(close), close, now

    def _executor_loop(self) -> None:
        cond = self._cond
        try:
            result = self._thread_init() if self._thread_init is not None else None
        except Exception as exc:  # handed to start(), which raises it in the caller's thread
            result = exc
        with cond:
            self.init_results.append(result)
            self._ready += 1
            cond.notify_all()
        while True:
            with cond:
                got = self._take()
                if got is None:
                    return
                batch, taken, close, start = got
                items = [self._items.pop(rid) for rid, _ in taken]
                cond.notify_all()
            try:
                timing = self._execute(items)
            except Exception as exc:  # execute() records stage errors itself; this is a bug in it, kept per batch
                now = self._clock()
                timing = RequestTiming(start, now, [], [], None, StageFailure("executor", type(exc).__name__, str(exc)))
            end = self._clock()
            with cond:
                self.batches.append(BatchRecord(batch, [r for r, _ in taken], [a for _, a in taken],
                                                close, start, end, timing))
                self._finished += len(taken)
                cond.notify_all()
