"""``workbench serve``: a pipeline behind a real HTTP server (uvicorn + Starlette).

Why this stack: uvicorn is the most used ASGI server, with a C HTTP parser
(httptools) and no thread per connection, so the event loop stays out of
the executor threads' way; Starlette is the small routing layer FastAPI
itself is built on (FastAPI's validation and OpenAPI add nothing to a
bytes-in, bytes-out endpoint, and add per-request cost).

Endpoints: ``POST /predict`` (one item's bytes in, its serialised output
out; ``X-Request-Id`` echoed; stage times in ``Server-Timing``; 500 with a
JSON body naming the stage when a stage raised, the server goes on),
``GET /healthz``, ``POST /shutdown`` (with the ``--control-token`` only). The edge
(Host allow-list, Origin, size limits and timeouts, admission): see
:mod:`workbench_serve.edge`. On SIGTERM, SIGINT or ``/shutdown``
the server stops taking requests, finishes the queued ones and writes its
run folder (kind ``served``) atomically.

Garbage collection: by default the server calls ``gc.freeze()`` once the
executors are warm, as production Python servers do. With torch imported the
heap holds some 200,000 long-lived objects, and every full collection rescans
them all with the GIL held: on the tabular example at 945 req/s (2-core VM),
the longest collection while serving was 122-138 ms with Python's collector
and 2-14 ms frozen; client p99 166-177 ms against 19-88 ms
(``benchmarks/bench_serve_gc.py``, ``benchmarks/results/serve_gc.md``).
``gc="default"`` keeps Python's behaviour. Either way the run records the
mode and the collections that happened while serving (``serving.gc``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import signal
import socket
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from workbench.batching.summary import load_meta_figures, load_summary, pipeline_run_meta
from workbench.errors import ConfigError
from workbench.record import Load, Run, Serving
from workbench.record.run import summarized
from workbench.sampling import StackSampler
from workbench.units import ns_to_ms
from .connection import edge_protocol
from .edge import TOKEN_HEADER, EdgeLimits, refusal, token_ok
from .records import server_tables
from .service import AFTER, BEFORE, PipelineService, server_meta
from .sse import SSE_TYPE
from . import require
from workbench.runner import environment
from workbench.timing import GcProbe, stream_index
from workbench.noise import NoiseProbe

END_FAILED = b'event: end\ndata: {"status":5'  # sse.end_event of a 500

# Connections asyncio sets up per event-loop turn: under a flood of 5,000 connections a turn of 128
# held the loop ~30 ms while well-formed requests waited (the probe's p99 5x its own); 16 keep a turn
# to a few ms, and the kernel's listen queue stays --accept-backlog long.
ACCEPTS_PER_TURN = 16


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket, or a ConfigError saying the port is taken (port 0: any free port)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host!r}: cannot resolve it ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    # proto IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets; without it the response's
    # second write waits for the client's delayed ACK (40 ms on Linux).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is already in use; stop what listens there or pick another --port"
            ) from None
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def make_app(
    service: PipelineService,
    server_box: dict,
    log=print,
    limits: EdgeLimits | None = None,
    refused: Counter | None = None,
    answered: frozenset[str] | None = None,
):
    """The Starlette app behind the edge's per-request checks (:func:`workbench_serve.edge.refusal`).

    ``server_box['server']`` is the uvicorn server ``/shutdown`` stops; refusals are counted in ``refused``.
    """
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    limits = limits or EdgeLimits()
    refused = refused if refused is not None else Counter()
    answered = answered if answered is not None else limits.answered()

    clock = service.clock

    async def predict(request):
        received = clock()
        try:
            body = await request.body()
        except ClientDisconnect:  # nothing was queued; a line each would let a flood fill the log
            return Response(b"", status_code=400)
        request_id = request.headers.get("x-request-id")
        if service.streams:
            rid, times, reply, events = await service.stream(body, received, request_id)
            if events is not None:
                return StreamingResponse(
                    _streamed(service, rid, times, events, log), headers=_stream_headers(times)
                )
        else:
            rid, times, reply = await service.predict(body, received, request_id)
        if rid is None:  # refused by the pipeline's check before batching (recorded by the service)
            log(f"a request{_rid(times)}: {reply.body.decode()} (400 sent, recorded; serving on)")
            return Response(reply.body, status_code=reply.status, headers=reply.headers)
        who = f"request {rid}{_rid(times)}"
        if reply.status != 200:
            log(f"{who}: {reply.body.decode()} (500 sent, recorded; serving on)")
        if await request.is_disconnected():
            times.disconnected = True
            log(f"{who}: the client disconnected before the response (recorded)")
        service.finish(rid, times)
        return Response(reply.body, status_code=reply.status, headers=reply.headers)

    async def healthz(request):
        cache = getattr(service.pipe, "cache", None)
        return JSONResponse(
            {
                "status": "ok",
                "pipeline": service.pipe.name,
                "requests": service.received,
                "cache": cache.stats() if hasattr(cache, "stats") else None,
                "cpu_s": time.process_time(),
                "config": service.pipe.config.to_dict(),
                "stages": [*BEFORE, *service.pipe.stage_names, *AFTER],
                "policy": service.policy.params(),
            }
            | _stream_stage(service.pipe)
        )

    async def shutdown(request):
        if limits.control_token is None:
            error = (
                "POST /shutdown is off: start the server with --control-token, "
                "or stop it with SIGTERM / Ctrl-C"
            )
        elif not token_ok(limits, request.headers.get(TOKEN_HEADER)):
            error = f"POST /shutdown needs the {TOKEN_HEADER} header of --control-token"
        else:
            server_box["server"].should_exit = True
            return JSONResponse({"status": "shutting down"})
        refused["control"] += 1
        return JSONResponse({"error": error}, status_code=403)

    app = Starlette(
        routes=[
            Route("/predict", predict, methods=["POST"]),
            Route("/healthz", healthz),
            Route("/shutdown", shutdown, methods=["POST"]),
        ]
    )

    async def edge(scope, receive, send):
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            refuse = refusal(
                limits, scope["method"], scope["path"], headers, len(service.http), answered
            )
            if refuse is not None:
                status, reason, message = refuse
                refused[reason] += 1
                extra = {"Retry-After": str(limits.retry_after_s)} if status == 503 else {}
                await JSONResponse({"error": message}, status_code=status, headers=extra)(
                    scope, receive, send
                )
                return
        await app(scope, receive, send)

    return edge


async def _streamed(service: PipelineService, rid: int, times, events, log):
    """A request's events as they are made; a client gone before the end is recorded as hung up
    (the send timeout of the edge aborts one that stops reading)."""
    try:
        async for piece in events:
            if piece.startswith(END_FAILED):
                log(
                    f"request {rid}{_rid(times)}: failed after its first unit (end event sent, recorded)"
                )
            yield piece
    finally:
        if times.sent_ns is None:
            times.disconnected = True
            log(f"request {rid}{_rid(times)}: the client disconnected during its stream (recorded)")
        service.finish(rid, times)


def _stream_headers(times) -> dict[str, str]:
    headers = {"Content-Type": SSE_TYPE, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return headers | ({"X-Request-Id": times.request_id} if times.request_id is not None else {})


def _stream_stage(pipe) -> dict[str, str]:
    """``{"stream": its streaming stage}`` for /healthz, ``{}`` for a pipeline without one."""
    k = stream_index(pipe.stages)
    return {} if k is None else {"stream": pipe.stage_names[k]}


def _rid(times) -> str:
    return f" (X-Request-Id {times.request_id})" if times.request_id else ""


GC_MODES = ("freeze", "default")
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def serve(
    pipe,
    policy,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    warmup: int = 5,
    drain_timeout_s: float = 10.0,
    ready=None,
    log=None,
    clock=time.perf_counter_ns,
    gc_mode: str = "freeze",
    limits: EdgeLimits | None = None,
    sample_stacks: bool = True,
) -> Run:
    """Serve ``pipe`` until SIGTERM, SIGINT or ``POST /shutdown``; return the (unsaved) server-side run.

    limits: the network edge's settings (:class:`workbench_serve.edge.EdgeLimits`; its defaults when None),
        recorded with the refusals by reason in ``serving.edge``.

    ready(url): called once the socket listens and the executors are warm.
    gc_mode: ``"freeze"`` (``gc.freeze()`` after the warm-up, undone at shutdown) or ``"default"``.
    sample_stacks: every thread sampled from the warm-up's end to shutdown, as in ``profile`` and
        ``load`` (:class:`workbench.sampling.StackSampler`; run.json ``sampled``, so ``audit`` names
        the served stages' waits); off with an injected clock (tests).
    log(line): one line per failed or abandoned request (default: stderr).
    """
    uvicorn = require("uvicorn", "serve")
    require("starlette", "serve")
    if gc_mode not in GC_MODES:
        raise ConfigError(f"gc mode {gc_mode!r}: use one of {', '.join(GC_MODES)}")

    log = log or (lambda line: print(f"workbench serve: {line}", file=sys.stderr, flush=True))
    sock = bind(host, port)
    url = f"http://{host}:{sock.getsockname()[1]}"
    service = PipelineService(pipe, policy, warmup=warmup, clock=clock)
    box: dict[str, Any] = {}
    limits = limits or EdgeLimits()
    refused: Counter = Counter()
    answered = limits.answered(host)
    config = uvicorn.Config(
        make_app(service, box, log, limits, refused, answered),
        log_level="warning",
        access_log=False,
        lifespan="off",
        http=edge_protocol(limits, refused, answered),
        loop="asyncio",
        timeout_graceful_shutdown=drain_timeout_s,
        timeout_keep_alive=limits.keep_alive_s,
        # asyncio accepts up to this many per loop turn (and listens with it: see _listen): a
        # connection flood at uvicorn's 2,048 held the loop for whole bursts while well-formed
        # requests waited
        backlog=min(ACCEPTS_PER_TURN, limits.accept_backlog),
    )
    server = box["server"] = uvicorn.Server(config)
    started = datetime.now(timezone.utc)
    signals: list[int] = []
    # other processes include a load generator on this machine: it competes too
    probe = NoiseProbe().start()
    gc_probe, gc_note = GcProbe(clock), {"mode": gc_mode, "frozen_objects": 0}
    sampler = StackSampler() if sample_stacks and clock is time.perf_counter_ns else None

    async def main():
        service.start(asyncio.get_running_loop())
        if gc_mode == "freeze":
            gc.collect()
            gc.freeze()  # the model, torch and the warm-up's objects are never rescanned
            gc_note["frozen_objects"] = gc.get_freeze_count()
        gc_probe.__enter__()
        if sampler is not None:
            sampler.__enter__()
        if ready is not None:
            ready(url)
        listening = asyncio.create_task(_listen(server, sock, limits.accept_backlog))
        await server.serve(sockets=[sock])
        listening.cancel()

    with _signals_noted(signals):
        try:
            asyncio.run(main())
        finally:
            dropped = service.stop(drain_timeout_s)
            if sampler is not None:
                sampler.__exit__(None, None, None)
            gc_probe.__exit__(None, None, None)
            if gc_mode == "freeze":
                gc.unfreeze()
            sock.close()
    stopped = clock()
    gc_note |= {
        "collections": gc_probe.collections,
        "pause_ms_total": ns_to_ms(gc_probe.pause_ns),
        "pause_ms_max": ns_to_ms(gc_probe.max_pause_ns),
    }
    requests, stages = server_tables(service, dropped, stopped)
    noise = probe.finish(service.threads, requests.loc[requests["ok"], "dur_ns"].to_numpy())
    serving = server_meta(service) | {
        "role": "server",
        "url": url,
        "stopped_by": signal.Signals(signals[0]).name if signals else "/shutdown",
        "stack": f"uvicorn {uvicorn.__version__} (httptools) + starlette",
        "drain_timeout_s": drain_timeout_s,
        "gc": gc_note,
        "edge": limits.params(host) | {"refused": dict(sorted(refused.items()))},
        "cache": service._cache.stats() if service._cache is not None else None,
    }
    failed: list = []  # the run is returned (and saved) whether or not its summary could be made
    summary = summarized(failed, "the load summary", load_summary, requests, policy.concurrency)
    figures = load_meta_figures(summary) if summary is not None else {}
    meta = pipeline_run_meta(
        pipe,
        "served",
        [*BEFORE, *pipe.stage_names, *AFTER],
        started,
        len(requests),
        environment(pipe.config),
        load=Load.from_dict(figures),
        serving=Serving.from_dict(serving),
    )
    sampled = sampler.record(service.origin_ns) if sampler is not None else None
    return Run(
        meta=meta.replace(noise=noise, sampled=sampled),
        requests=requests,
        stages=stages,
        summary_failures=failed,
    )


async def _listen(server, sock: socket.socket, backlog: int) -> None:
    """Once serving, give the listening socket the kernel queue of ``backlog`` connections: asyncio
    listens with its per-turn accept count (:data:`ACCEPTS_PER_TURN`), which must stay small (a turn
    that sets up 128 connections holds the loop for tens of ms), while the queue may be longer."""
    while not server.started:
        await asyncio.sleep(0.01)
    sock.listen(backlog)


@contextlib.contextmanager
def _signals_noted(noted: list[int]):
    """Note SIGTERM and SIGINT instead of dying: uvicorn shuts down on them, then re-raises them to
    the handlers it found, which must let the run folder still be written."""
    old = {sig: signal.signal(sig, lambda s, _frame: noted.append(s)) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
