"""The dynamic batcher in front of one pipeline, driven from an asyncio HTTP server.

``PipelineService`` owns a :class:`workbench.batching.DynamicBatcher` (the same
executor threads and dispatch rule as ``workbench load``) and, per request,
the HTTP-side clock readings the batcher does not see:

* ``received_ns``: the handler started (headers parsed by the server);
* ``submitted_ns``: the body was read and the item queued (the batcher's arrival);
* ``resumed_ns``: the handler got its batch's result back on the event loop;
* ``sent_ns``: the response body and headers were built.

So a request's server-side stages are ``ingress`` (read the body),
``batch_wait``, ``queue_wait``, the pipeline's stages, ``handoff`` (executor
thread -> event loop) and ``egress`` (build the response), and its server end
to end is ``sent - received``. All times are integer ns of one injectable clock.

What the server keeps of a finished request or batch is plain tuples of ints
and strings (``done``, ``batch_log``), not objects: CPython's GC stops
tracking such tuples, so the record of a long run costs the full collections
nothing. Keeping the ``BatchRecord`` s and ``HttpTimes`` (about eight tracked
objects per request at batch size 1, outputs included) made each full collection
scan the whole record: pauses grew with the run, to 98 ms after 21,000
requests, stalls that set the served p99 (``benchmarks/bench_serve_records.py``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any, NamedTuple

from workbench.batching.live import pipeline_executor
from workbench.batching.policy import BatchPolicy, BatchRecord, DynamicBatcher, wait_split, warm_up
from workbench.timing import Clock, StageFailure, stream_index
from .protocol import format_server_timing, output_bytes
from .sse import end_event, event, unit_data

VALIDATE = "validate"  # the error stage of a request the pipeline's check refused before batching
ISOLATED_HEADER = "X-Workbench-Isolated"  # the request's batch raised and it was re-run alone
BEFORE = ("ingress", "batch_wait", "queue_wait")
AFTER = ("handoff", "egress")


@dataclass
class HttpTimes:
    """One request's clock readings on the HTTP side (ns) and what became of it."""

    received_ns: int
    submitted_ns: int
    request_id: str | None = None
    resumed_ns: int | None = None
    sent_ns: int | None = None
    disconnected: bool = False


class BatchDone(NamedTuple):
    """A finished batch as the server keeps it (as a plain tuple in ``batch_log``); times ns.

    ``failure``: ``(stage, error_type, message, where)`` of the stage that
    raised, else None. The stage lists hold the stages that ran.
    ``item_failures``: for a batch that raised and was re-run one item at a
    time (:class:`Isolated`), each request's own failure tuple or None (then
    ``failure`` is None); else None.
    """

    batch: int
    requests: tuple[int, ...]
    close_ns: int
    start_ns: int
    end_ns: int
    stage_start_ns: tuple[int, ...]
    stage_end_ns: tuple[int, ...]
    failure: tuple[str, str, str, str | None] | None
    item_failures: tuple | None = None
    # when the batching rule alone would have dispatched it (policy.wait_split)
    due_ns: int | None = None

    @classmethod
    def of(cls, record: BatchRecord) -> "BatchDone":
        t = record.timing
        items = None
        if isinstance(t.output, Isolated):
            items = tuple(
                _failure_tuple(x) if isinstance(x, StageFailure) else None for x in t.output.items
            )
        return cls(
            record.batch,
            tuple(record.requests),
            record.close_ns,
            record.start_ns,
            record.end_ns,
            tuple(t.stage_start_ns),
            tuple(t.stage_end_ns),
            _failure_tuple(t.failure),
            items,
            record.due_ns,
        )


def _failure_tuple(f: StageFailure | None) -> tuple[str, str, str, str | None] | None:
    return None if f is None else (f.stage, f.error_type, f.message, getattr(f, "where", None))


@dataclass(frozen=True)
class Isolated:
    """The output of a batch that raised and was then re-run one item at a time.

    ``first``: what the whole batch raised (it may quote any item, so it is
    never sent to a client); ``items``: per item in batch order, its own
    output (the single run's last-stage output, item 0 of it) or its own
    :class:`StageFailure`. So one bad request fails alone, and no response
    carries another request's content.
    """

    first: StageFailure
    items: tuple


@dataclass
class Reply:
    """What the handler sends: status, body, headers."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


class _Finished(list):
    """Stands in for the batcher's ``batches`` list: tells the service of each finished batch, keeps nothing.

    ``DynamicBatcher`` appends each ``BatchRecord`` under its lock when the
    pipeline call returns; observing that append is how results reach the
    waiting handlers without changing the batcher. The service keeps its own
    untracked record (``batch_log``), so the list stays empty. ``notify`` must
    be quick (it only schedules a callback on the event loop).
    """

    def __init__(self, notify):
        super().__init__()
        self._notify = notify

    def append(self, record: BatchRecord) -> None:
        self._notify(record)


class PipelineService:
    """A pipeline behind the dynamic batcher, answering ``await predict(...)`` calls.

    warmup: untimed pipeline calls at sizes ``max_batch_size`` and 1 (each), per
        executor, before the first request (as ``workbench load``).
    """

    def __init__(
        self, pipe, policy: BatchPolicy, *, warmup: int = 5, clock: Clock = time.perf_counter_ns
    ):
        self.pipe, self.policy, self.clock = pipe, policy, clock
        self.http: dict[int, HttpTimes] = {}  # requests not finished yet
        self.done: dict[int, tuple] = {}  # finished requests: ``HttpTimes`` fields as a plain tuple
        self.batch_log: list[tuple] = []  # finished batches: ``BatchDone`` fields as plain tuples
        self._waiting: dict[int, asyncio.Future] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        items = [x for _, x in zip(range(max(1, policy.max_batch_size)), pipe.item_iterator())]
        # a streaming stage's units go to each request's sink as they are made (streamed_pipeline)
        self.streams = stream_index(pipe.stages) is not None
        self._sinks: dict[int, asyncio.Queue] = {}
        run_pipe = streamed_pipeline(pipe) if self.streams else pipe
        # workbench load's executor (torch threads, stage timing); a batch that raises is re-run one
        # item at a time (isolating), unless it streams: its units may be with the clients already.
        # ``threads``: the torch thread count of each executor thread
        execute, self.threads, _ = pipeline_executor(run_pipe, run_pipe, clock)
        execute = tagged(execute) if self.streams else isolating(execute, clock)
        self.batcher = DynamicBatcher(
            execute,
            policy,
            clock=clock,
            thread_init=lambda: len(warm_up(execute, items, warmup, policy.max_batch_size)),
        )
        self.batcher.batches = _Finished(self._finished)
        self.origin_ns = 0
        # A pipeline with a prediction cache (the tabular example's ``pipe.cache``): per batch, the
        # fraction of its items that hit, read on the executor thread that ran it.
        cache = getattr(pipe, "cache", None)
        self._cache = cache if hasattr(cache, "last_hit_fraction") else None
        self.batch_cache_hit: dict[int, float] = {}
        # A pipeline's per-request check (the tabular example's ``pipe.check_item``: its parse rules on one
        # body), run on the event loop before a request is queued: a body it refuses never joins a batch.
        self._check = getattr(pipe, "check_item", None)
        # (received_ns, answered_ns, request_id, error_type, message) per refusal
        self.rejected: list[tuple] = []

    def start(self, loop: asyncio.AbstractEventLoop) -> "PipelineService":
        """Start the executors (each warms up first) and bind to the event loop that awaits results."""
        self._loop = loop
        self.batcher.start()
        self.origin_ns = self.clock()
        return self

    def stop(self, drain_timeout_s: float = 10.0) -> list[tuple[int, int]]:
        """Finish queued requests (up to the timeout), stop the executors, return the undispatched."""
        self.batcher.wait_done(drain_timeout_s)
        return self.batcher.stop(abort=True)

    async def predict(
        self, body: bytes, received_ns: int, request_id: str | None
    ) -> tuple[int | None, HttpTimes, Reply]:
        """Queue one item, wait for its batch and build the reply (200, or 500 naming the failed stage).

        A body the pipeline's ``check_item`` refuses is answered 400 at once (rid None), never batched,
        and kept in ``rejected``.
        """
        if self._check is not None:
            refused = self._refused(body, received_ns, request_id)
            if refused is not None:
                return None, HttpTimes(received_ns, received_ns, request_id), refused
        rid, arrival = self.batcher.submit(body)
        times = self.http[rid] = HttpTimes(received_ns, arrival, request_id)
        future = self._waiting[rid] = self._loop.create_future()
        _, reply = self._answer(rid, times, *await future)
        return rid, times, reply

    async def stream(self, body: bytes, received_ns: int, request_id: str | None):
        """:meth:`predict` for a streaming pipeline: ``(rid, times, reply, events)``.

        ``events`` (an async iterator of event bytes, :mod:`workbench_serve.sse`) once the request's
        first unit is made, its ``reply`` None; a request refused, or whose batch ended before its first
        unit, gets a plain ``reply`` and ``events`` None.
        """
        if self._check is not None:
            refused = self._refused(body, received_ns, request_id)
            if refused is not None:
                return None, HttpTimes(received_ns, received_ns, request_id), refused, None
        sink: asyncio.Queue = asyncio.Queue()
        rid, arrival = self.batcher.submit(Tagged(body, sink, self._loop))
        times = self.http[rid] = HttpTimes(received_ns, arrival, request_id)
        future = self._waiting[rid] = self._loop.create_future()
        self._sinks[rid] = sink
        first = await sink.get()
        if first is None:  # the batch ended before a unit
            _, reply = self._answer(rid, times, *await future)
            return rid, times, reply, None
        return rid, times, None, self._events(rid, times, first, sink, future)

    async def _events(self, rid, times, first: bytes, sink: asyncio.Queue, future):
        yield event(first)
        while (data := await sink.get()) is not None:
            yield event(data)
        record, done = await future
        timing, reply = self._answer(rid, times, record, done)
        batch, size = reply.headers["X-Workbench-Batch"], reply.headers["X-Workbench-Batch-Size"]
        yield end_event(reply.status, timing, int(batch), int(size), reply.body)

    def _answer(self, rid: int, times: HttpTimes, record, done) -> tuple[str, Reply]:
        """The batch's reply to ``rid`` with its ``Server-Timing`` (also as a header), times noted."""
        times.resumed_ns = self.clock()
        reply = self._reply(rid, record, times)
        times.sent_ns = self.clock()
        timing = format_server_timing(
            self.stage_times(done, times), times.sent_ns - times.received_ns
        )
        reply.headers["Server-Timing"] = timing
        return timing, reply

    def _refused(self, body: bytes, received_ns: int, request_id: str | None) -> Reply | None:
        try:
            self._check(body)
        except Exception as exc:  # its verdict on this body (RecursionError for deep JSON too)
            kind, message = type(exc).__name__, str(exc)[:500]
            self.rejected.append((received_ns, self.clock(), request_id, kind, message))
            headers = {"X-Request-Id": request_id} if request_id is not None else {}
            why = f"request refused before batching: {kind}: {message}"
            return _error_reply(400, why, VALIDATE, kind, headers)
        return None

    def finish(self, rid: int, times: HttpTimes) -> None:
        """The handler is done with ``rid`` (its ``disconnected`` known): keep its times as a plain tuple,
        field by field (``dataclasses.astuple`` deep-copies, on the event loop, once per request)."""
        self.done[rid] = (
            times.received_ns,
            times.submitted_ns,
            times.request_id,
            times.resumed_ns,
            times.sent_ns,
            times.disconnected,
        )
        self.http.pop(rid, None)

    def times(self, rid: int) -> HttpTimes:
        """A request's HTTP-side times, finished or not."""
        kept = self.done.get(rid)
        return HttpTimes(*kept) if kept is not None else self.http[rid]

    @property
    def received(self) -> int:
        """Requests queued so far."""
        return len(self.http) + len(self.done)

    def stage_times(self, record: BatchDone, times: HttpTimes) -> list[tuple[str, int]]:
        """``[(stage, dur_ns)]`` of one request of ``record`` in server order (the pipeline's stages that ran)."""
        pipeline = [
            (self.pipe.stage_names[k], e - s)
            for k, (s, e) in enumerate(zip(record.stage_start_ns, record.stage_end_ns))
        ]
        end = times.sent_ns if times.sent_ns is not None else times.resumed_ns
        batch_wait, queue_wait = wait_split(
            times.submitted_ns, record.due_ns, record.close_ns, record.start_ns
        )
        return [
            ("ingress", times.submitted_ns - times.received_ns),
            ("batch_wait", batch_wait),
            ("queue_wait", queue_wait),
            *pipeline,
            ("handoff", times.resumed_ns - record.end_ns),
            ("egress", end - times.resumed_ns),
        ]

    def _reply(self, rid: int, record: BatchRecord, times: HttpTimes) -> Reply:
        headers = {
            "X-Workbench-Batch": str(record.batch),
            "X-Workbench-Batch-Size": str(len(record.requests)),
        }
        if record.batch in self.batch_cache_hit:
            headers["X-Workbench-Cache-Hit"] = f"{self.batch_cache_hit[record.batch]:.6g}"
        if times.request_id is not None:
            headers["X-Request-Id"] = times.request_id
        failure, output = record.timing.failure, record.timing.output
        k = record.requests.index(rid)
        if isinstance(output, Isolated):
            headers[ISOLATED_HEADER] = "1"
            mine = output.items[k]
            if isinstance(mine, StageFailure):
                return _failed(mine, headers)
            return Reply(200, output_bytes(mine, 0, 1), headers)
        if failure is not None:
            return _failed(failure, headers)
        return Reply(200, output_bytes(output, k, len(record.requests)), headers)

    def _finished(self, record: BatchRecord) -> None:
        """Called on an executor thread: hand the record to the waiting handlers on the loop.

        After the server stopped (its loop closed) nobody waits any more: the
        record stays in ``batches`` and its requests are recorded as unanswered.
        """
        if self._cache is not None and _ran(record.timing, self.pipe.stage_names, "cache_lookup"):
            self.batch_cache_hit[record.batch] = self._cache.last_hit_fraction()
        done = BatchDone.of(record)
        self.batch_log.append(tuple(done))  # exact tuples: the GC untracks them
        try:
            self._loop.call_soon_threadsafe(self._resolve, record, done)
        except RuntimeError:  # the event loop is closed
            pass

    def _resolve(self, record: BatchRecord, done: BatchDone) -> None:
        for rid in record.requests:
            future = self._waiting.pop(rid, None)
            if future is not None and not future.done():
                future.set_result((record, done))
            sink = self._sinks.pop(rid, None)
            if sink is not None:
                sink.put_nowait(None)  # after its units: they were scheduled from the same thread


def _failed(failure: StageFailure, headers: dict[str, str]) -> Reply:
    why = f"stage {failure.stage} raised {failure.error_type}: {failure.message}"
    return _error_reply(500, why, failure.stage, failure.error_type, headers)


def _error_reply(status: int, error: str, stage: str, kind: str, headers: dict[str, str]) -> Reply:
    """A JSON error body naming the stage, as the load generator reads it (``client._http_error``)."""
    body = json.dumps({"error": error, "stage": stage, "type": kind}).encode()
    return Reply(status, body, headers | {"Content-Type": "application/json"})


def _ran(timing, names: list[str], stage: str) -> bool:
    """Whether ``stage`` ran to completion in this batch (else its per-thread results are another batch's)."""
    if stage not in names or len(timing.stage_end_ns) <= names.index(stage):
        return False
    if isinstance(timing.output, Isolated):
        return False  # the cache's last call was one item's re-run, not the batch
    return timing.failure is None or timing.failure.stage != stage


def isolating(run, clock: Clock):
    """``run(batch) -> RequestTiming``, but a batch of several items that raised is re-run one item at a time.

    The result then has ``failure`` None and an :class:`Isolated` output (each
    item's own output or failure). Its stage lists cover the first attempt
    and every re-run: stage k's duration is the sum of its durations in all
    of them, laid end to end from the batch's start, so the stage times say
    what the isolation cost; ``end_ns`` is when the last re-run ended.
    """

    def execute(batch):
        first = run(batch)
        if first.failure is None or len(batch) < 2:
            return first
        singles = [run([item]) for item in batch]
        items = tuple(
            t.failure if t.failure is not None else _first_output(t.output) for t in singles
        )
        attempts = [first, *singles]
        n = max(len(t.stage_end_ns) for t in attempts)
        durs = [
            sum(
                t.stage_end_ns[k] - t.stage_start_ns[k] for t in attempts if k < len(t.stage_end_ns)
            )
            for k in range(n)
        ]
        bounds = list(accumulate(durs, initial=first.start_ns))  # the stages end to end
        return replace(
            first,
            end_ns=max(clock(), bounds[-1]),
            stage_start_ns=bounds[:-1],
            stage_end_ns=bounds[1:],
            device_ns=None,
            failure=None,
            output=Isolated(first.failure, items),
        )

    return execute


@dataclass(frozen=True)
class Tagged:
    """A streaming pipeline's request as queued: its body and the sink its units go to."""

    body: bytes
    sink: asyncio.Queue
    loop: asyncio.AbstractEventLoop


# ``sinks`` and ``loop``: those of the batch this executor thread runs (``sinks`` None: none)
_batch = threading.local()


def tagged(run):
    """``run(batch)`` of :class:`Tagged` requests: run on their bodies, the units going to their sinks
    (warm-up calls pass plain items: their units go nowhere)."""

    def execute(batch, **kwargs):
        tags = [x for x in batch if isinstance(x, Tagged)]
        _batch.sinks = [x.sink for x in tags] if tags else None
        _batch.loop = tags[0].loop if tags else None
        try:
            return run([x.body if isinstance(x, Tagged) else x for x in batch], **kwargs)
        finally:
            _batch.sinks = None

    return execute


def streamed_pipeline(pipe):
    """A copy of ``pipe`` whose streaming stage also hands each unit, split per request
    (:func:`workbench_serve.sse.unit_data`), to the event loop of the requests' sinks; one
    thread-safe call per unit for the whole batch, made before the runner reads the unit's time."""
    k = stream_index(pipe.stages)
    fn = pipe.stages[k].fn

    def units(value):
        sinks, loop = getattr(_batch, "sinks", None), getattr(_batch, "loop", None)
        for unit in fn(value):
            if sinks:
                parts = [unit_data(unit, i, len(sinks)) for i in range(len(sinks))]
                loop.call_soon_threadsafe(_fan_out, sinks, parts)
            yield unit

    out = copy.copy(pipe)
    out.stages = [*pipe.stages[:k], replace(pipe.stages[k], fn=units), *pipe.stages[k + 1 :]]
    return out


def _fan_out(sinks: list[asyncio.Queue], parts: list[bytes]) -> None:
    for sink, data in zip(sinks, parts):
        sink.put_nowait(data)


def _first_output(output):
    """Item 0 of a one-item batch's last-stage output (a list of one), or the output itself."""
    return output[0] if isinstance(output, (list, tuple)) and len(output) == 1 else output


def server_meta(service: PipelineService) -> dict[str, Any]:
    """The policy and warm-up figures of a service (for run.json's ``serving``)."""
    isolated = [b for b in map(BatchDone._make, service.batch_log) if b.item_failures is not None]
    return {
        "policy": service.policy.params(),
        "warmup_failed": sum(service.batcher.init_results),
        "isolation": {
            "rule": "a batch of several requests that raised is re-run one request at a time; "
            "each request gets its own output or its own error",
            "batches_rerun": len(isolated),
            "requests_failed_alone": sum(f is not None for b in isolated for f in b.item_failures),
            "requests_answered_after_rerun": sum(
                f is None for b in isolated for f in b.item_failures
            ),
            "checked_before_batching": service._check is not None,
            "requests_refused_before_batching": len(service.rejected),
        },
    }
