"""The dispatch rule, shared by the live batcher and the simulator (times in integer ns, passed in).

Requests queue in arrival order. The next batch closes at

    close = max(min(oldest + max_wait, arrival of the max_batch_size-th queued), slot_free)

and takes the queued requests that arrived by then, at most ``max_batch_size``. ``oldest +
max_wait`` is Triton's ``max_queue_delay``; ``slot_free`` is back-pressure: at most one closed batch
waits for an executor, so under a backlog batches are full and the capacity is ``concurrency *
max_batch_size / mean service time(max_batch_size)``. A request's wait splits (:func:`wait_split`)
into ``batch_wait``, until the rule alone would dispatch (at most ``max_wait``), and
``queue_wait``, the wait for a busy executor.

The live :class:`DynamicBatcher` has no batcher thread: an idle executor applies the rule itself, and
since the rule uses recorded times only it takes the batch a batcher thread would have closed at
``close_ns`` (a wake-up per batch saved). ``queue_wait`` is start minus close. A batch still running
at ``stop`` is a ``Timeout`` failure ("in flight at stop") and its thread abandoned; a batch that
timed out under a :class:`workbench.guard.StageGuard` halts the batcher.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError, PipelineError, is_int, is_number
from ..guard import abandoned, is_timeout
from ..timing import Clock, RequestTiming, StageFailure
from ..units import NS_PER_MS, ns_to_s


@dataclass(frozen=True)
class BatchPolicy:
    """max_batch_size (>= 1), max_wait_ms (>= 0) and concurrency (executors, >= 1)."""

    max_batch_size: int
    max_wait_ms: float
    concurrency: int = 1

    def __post_init__(self) -> None:
        b, w, c = self.max_batch_size, self.max_wait_ms, self.concurrency
        if not (is_int(b) and b >= 1):
            raise ConfigError(
                f"max_batch_size must be an integer >= 1 (--max-batch-size), got {b!r}"
            )
        if not (is_number(w) and math.isfinite(w) and w >= 0):
            raise ConfigError(f"max_wait_ms must be a number >= 0 (--max-wait-ms), got {w!r}")
        if not (is_int(c) and c >= 1):
            raise ConfigError(f"concurrency must be an integer >= 1 (--concurrency), got {c!r}")

    @property
    def max_wait_ns(self) -> int:
        return int(round(self.max_wait_ms * NS_PER_MS))

    def params(self) -> dict[str, Any]:
        return asdict(self) | {"max_wait_ms": float(self.max_wait_ms)}


class BatchFormer:
    """The request queue and the dispatch rule (no threads, no clock)."""

    def __init__(self, policy: BatchPolicy):
        self.policy = policy
        self._queue: deque[tuple[Any, int]] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def push(self, request: Any, arrival_ns: int) -> None:
        """Queue a request; arrivals must not go back in time."""
        if self._queue and arrival_ns < self._queue[-1][1]:
            raise ValueError(
                f"arrival {arrival_ns} is earlier than the last queued one {self._queue[-1][1]}"
            )
        self._queue.append((request, arrival_ns))

    def due_ns(self) -> int | None:
        """When the rule alone would dispatch the next batch; None when nothing is queued."""
        if not self._queue:
            return None
        b = self.policy.max_batch_size
        due = self._queue[0][1] + self.policy.max_wait_ns
        if len(self._queue) >= b:
            due = min(due, self._queue[b - 1][1])
        return due

    def close_ns(self, slot_free_ns: int) -> int | None:
        """When the next batch closes given what is queued now; None when nothing is."""
        due = self.due_ns()
        return None if due is None else max(due, slot_free_ns)

    def pop(self, close_ns: int) -> list[tuple[Any, int]]:
        """Remove and return the batch closing at ``close_ns``: (request, arrival_ns) pairs."""
        out = []
        while (
            self._queue and len(out) < self.policy.max_batch_size and self._queue[0][1] <= close_ns
        ):
            out.append(self._queue.popleft())
        return out

    def drain(self) -> list[tuple[Any, int]]:
        """Remove and return everything still queued (a run that stops early)."""
        out = list(self._queue)
        self._queue.clear()
        return out


def wait_split(arrival_ns, due_ns, close_ns, start_ns):
    """``(batch_wait_ns, queue_wait_ns)``, adding up to ``start - arrival``: batch wait to the
    batch's ``due`` (None: its close), or none for a request that joined after it; on ints or
    numpy arrays."""
    if due_ns is None:
        end = close_ns
    else:
        end = np.minimum(np.maximum(due_ns, arrival_ns), close_ns)
        end = int(end) if np.ndim(end) == 0 else end
    return end - arrival_ns, start_ns - end


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
    due_ns: int | None = None  # when the rule alone would have dispatched it (before back-pressure)


@dataclass
class _InFlight:
    """A batch an executor took and has not finished: its requests and the stage timer's lists (ns)."""

    taken: list[tuple[int, int]]
    close_ns: int
    start_ns: int
    due_ns: int | None = None
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)


class DynamicBatcher:
    """Threads around a :class:`BatchFormer`; ``execute(items) -> RequestTiming`` runs one batch.

    ``submit`` from one producer thread; ``batches`` holds the executed batches in completion order.
    """

    def __init__(
        self,
        execute: Callable[..., RequestTiming],
        policy: BatchPolicy,
        *,
        clock: Clock = time.perf_counter_ns,
        thread_init: Callable[[], Any] | None = None,
        stage_names: Sequence[str] | None = None,
    ):
        self.policy, self._execute, self._clock = policy, execute, clock
        self._thread_init = thread_init
        self._names = list(stage_names) if stage_names else None
        self.halted = threading.Event()
        self.stopped_by: str | None = None
        self.in_flight_at_stop = 0
        self._in_flight: dict[int, _InFlight] = {}
        self._halted_queue: list[tuple[int, int]] = []  # queued when a timeout halted the batcher
        self.init_results: list[Any] = []
        self._former = BatchFormer(policy)
        self._cond = threading.Condition()
        self._items: dict[int, Any] = {}
        self._slot_free_ns = 0  # start time of the last started batch
        self._next_batch = self._submitted = self._finished = 0
        self._stopping = self._halted = False
        self.batches: list[BatchRecord] = []
        self._threads: list[threading.Thread] = []

    def start(self, timeout_s: float = 600.0) -> "DynamicBatcher":
        """Start the executors; returns once each has run ``thread_init`` (its warm-up), if any."""
        self._threads = [
            threading.Thread(
                target=self._executor_loop, name=f"workbench-executor-{k}", daemon=True
            )
            for k in range(self.policy.concurrency)
        ]
        for t in self._threads:
            t.start()
        with self._cond:
            self._cond.wait_for(
                lambda: len(self.init_results) >= len(self._threads), timeout=timeout_s
            )
        failed = [r for r in self.init_results if isinstance(r, Exception)]
        if failed:
            self.stop(abort=True, join_timeout_s=1.0)  # another executor may be the one that hangs
            raise PipelineError(
                f"executor warm-up failed: {type(failed[0]).__name__}: {failed[0]}"
            ) from failed[0]
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
        """Wait (real s) for all requests (once halted, batches in flight); False on timeout."""

        def done() -> bool:
            return not self._in_flight and (
                self.halted.is_set() or self._finished >= self._submitted
            )

        with self._cond:
            return self._cond.wait_for(done, timeout=timeout_s)

    def stop(self, abort: bool = False, join_timeout_s: float = 30.0) -> list[tuple[int, int]]:
        """Stop the executors once the queue is empty (at once with ``abort``), waiting at most
        ``join_timeout_s`` for all; return the undispatched ``(request, arrival_ns)`` pairs."""
        with self._cond:
            self._stopping = True
            dropped = self._halted_queue + (self._former.drain() if abort else [])
            self._halted_queue = []
            self._cond.notify_all()
        deadline = time.monotonic() + join_timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            self._halted = True  # executors still alive take nothing more
            dropped += self._former.drain()
            self._record_in_flight()
            self._cond.notify_all()
        return dropped

    def _record_in_flight(self) -> None:
        """Batches still executing at stop as failures (holding the lock)."""
        now, names = self._clock(), self._names or ["executor"]
        for batch, flight in sorted(self._in_flight.items()):
            timing = abandoned(names, flight.starts, flight.ends, flight.start_ns, now, _at_stop)
            self._add(batch, flight, now, timing)
            self.in_flight_at_stop += 1
        self._in_flight.clear()

    def _add(self, batch: int, f: _InFlight, end_ns: int, timing: RequestTiming) -> None:
        ids, arrivals = [r for r, _ in f.taken], [a for _, a in f.taken]
        record = BatchRecord(batch, ids, arrivals, f.close_ns, f.start_ns, end_ns, timing, f.due_ns)
        self.batches.append(record)
        self._finished += len(f.taken)

    def _halt(self) -> None:
        """A batch timed out (holding the lock): dispatch nothing more; the queue goes to ``stop``."""
        self._halted = True
        self.stopped_by = "timeout"
        self._halted_queue += self._former.drain()
        self.halted.set()
        self._cond.notify_all()

    def _take(self) -> tuple[int, list, int, int, int] | None:
        """Wait (holding the lock between waits) for the next batch; None when stopping and empty."""
        cond, former = self._cond, self._former
        while True:
            if self._halted:
                return None
            close = former.close_ns(self._slot_free_ns)
            if close is None:
                if self._stopping:
                    return None
                cond.wait()
                continue
            now = self._clock()
            if now < close:
                cond.wait(timeout=ns_to_s(close - now))
                continue
            batch, self._next_batch = self._next_batch, self._next_batch + 1
            self._slot_free_ns = now
            due = former.due_ns()
            return batch, former.pop(close), close, now, due

    def _executor_loop(self) -> None:
        cond = self._cond
        try:
            result = self._thread_init() if self._thread_init is not None else None
        except Exception as exc:  # handed to start(), which raises it in the caller's thread
            result = exc
        with cond:
            self.init_results.append(result)
            cond.notify_all()
        while True:
            with cond:
                got = self._take()
                if got is None:
                    return
                batch, taken, close, start, due = got
                items = [self._items.pop(rid) for rid, _ in taken]
                flight = self._in_flight[batch] = _InFlight(taken, close, start, due)
                cond.notify_all()
            timing = self._run(items, flight)
            end = self._clock()
            with cond:
                if self._in_flight.pop(batch, None) is None:
                    return  # stop() recorded it as in flight and abandoned this thread: the late result is dropped
                self._add(batch, flight, end, timing)
                if is_timeout(timing):
                    self._halt()
                cond.notify_all()

    def _run(self, items: list, flight: _InFlight) -> RequestTiming:
        """``execute(items)``; an exception from it (a bug: stage errors are recorded) fails it."""
        try:
            if self._names is None:
                return self._execute(items)
            return self._execute(items, starts=flight.starts, ends=flight.ends)
        except Exception as exc:
            failure = StageFailure("executor", type(exc).__name__, str(exc))
            return RequestTiming(flight.start_ns, self._clock(), [], [], None, failure)


def _at_stop(stage: str) -> str:
    """The failure message of a batch still running its ``stage`` when the batcher stopped."""
    return (
        f"in flight at stop: stage {stage!r} still running when the batcher stopped; its executor "
        "thread was abandoned"
    )


def warm_up(execute, items: list, calls: int, max_batch_size: int) -> list[StageFailure]:
    """Untimed calls at both ends of the batch-size range; their failures (a timeout ends it)."""
    failures = []
    for _ in range(calls):
        for size in (max_batch_size, 1) if items else ():
            timing = execute([items[k % len(items)] for k in range(size)])
            if timing.failure is not None:
                failures.append(timing.failure)
                if is_timeout(timing):
                    return failures
    return failures
