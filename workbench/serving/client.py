"""The open-loop HTTP load generator of ``workbench load --url``: asyncio + aiohttp, in its own process.

Each request is sent at its scheduled time whatever the earlier ones are
doing (open loop). The event loop uses ``select()`` rather than epoll: epoll
takes its timeout in whole milliseconds, so every timed wake-up would be up
to 1 ms late, which alone would break the lag target; ``select()`` takes
microseconds and a load generator holds few sockets. The garbage collector is
paused during the schedule (a collection is a pause of the generator).

A request's lag is when it actually went out minus when it was due (ns),
plus any time it waited for a free connection of the client's pool
(``connections``; measured with aiohttp's connection-queue trace), so a
client that runs out of sockets shows as lag, never as server latency. Its
end to end runs from going out to the whole response body read. The
``Server-Timing`` of each response is kept as it came (see
:mod:`workbench.serving.protocol`).
"""
from __future__ import annotations

import asyncio
import gc
import json
import selectors
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from .protocol import (BATCH_HEADER, BATCH_SIZE_HEADER, CACHE_HIT_HEADER, REQUEST_ID_HEADER, TIMING_HEADER,
                       parse_server_timing)


@dataclass
class Result:
    """One request as the client saw it (clock readings in ns)."""

    request_id: str
    due_ns: int
    sent_ns: int
    done_ns: int
    status: int | None = None
    error: tuple[str, str, str] | None = None
    server_stages: list[tuple[str, int]] = field(default_factory=list)
    server_total_ns: int | None = None
    batch: int = -1
    batch_size: int = 1
    pool_wait_ns: int = 0
    cache_hit: float | None = None


@dataclass
class Drive:
    """What one load run sent: the results in schedule order and each request's lag (ns)."""

    results: list[Result]
    lags_ns: np.ndarray
    origin_ns: int
    server_before: dict | None
    server_after: dict | None


def drive(url: str, payloads: list[bytes], schedule_ns: np.ndarray, *, tag: str = "wb", warmup: int = 5,
          connections: int = 256, timeout_s: float = 30.0, clock=time.perf_counter_ns) -> Drive:
    """Send ``payloads[k]`` to ``url + '/predict'`` at ``schedule_ns[k]`` after the start; wait for all."""
    from . import require

    require("aiohttp", "serve")
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    try:
        return loop.run_until_complete(_drive(url.rstrip("/"), payloads, schedule_ns, tag, warmup, connections,
                                              timeout_s, clock))
    finally:
        loop.close()


async def _drive(url, payloads, schedule_ns, tag, warmup, connections, timeout_s, clock) -> Drive:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=connections, force_close=False)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, skip_auto_headers=("User-Agent",),
                                     trace_configs=[_pool_wait_trace(clock)]) as session:
        before = await _health(session, url)
        await _warm_up(session, url, payloads, warmup)
        loop = asyncio.get_running_loop()
        tasks, lags = [], np.zeros(len(schedule_ns), dtype=np.int64)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            origin = clock() + 2_000_000  # 2 ms to settle
            for k, offset in enumerate(schedule_ns.tolist()):
                due = origin + offset
                wait = due - clock()
                if wait > 0:
                    await asyncio.sleep(wait / 1e9)
                tasks.append(loop.create_task(_send(session, url, payloads[k % len(payloads)], f"{tag}-{k}", due, clock)))
            results = await asyncio.gather(*tasks)
        finally:
            if gc_was:
                gc.enable()
        after = await _health(session, url)
    for k, r in enumerate(results):
        lags[k] = max(0, r.sent_ns - r.due_ns) + r.pool_wait_ns
    return Drive(list(results), lags, origin, before, after)


async def _send(session, url: str, body: bytes, request_id: str, due: int, clock) -> Result:
    import aiohttp

    sent = clock()
    waited = {"ns": 0}
    try:
        async with session.post(f"{url}/predict", data=body, headers={REQUEST_ID_HEADER: request_id},
                                trace_request_ctx=waited) as resp:
            data = await resp.read()
            done = clock()
            result = Result(request_id, due, sent, done, resp.status, pool_wait_ns=waited["ns"])
            _read_headers(result, resp.headers)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        return Result(request_id, due, sent, clock(), None, ("network", type(exc).__name__, str(exc) or repr(exc)),
                      pool_wait_ns=waited["ns"])
    if resp.status != 200:
        result.error = _http_error(resp.status, data)
    return result


def _pool_wait_trace(clock):
    """aiohttp trace hooks adding each request's wait for a pooled connection to its ``trace_request_ctx``."""
    import aiohttp

    async def queued(session, ctx, params):
        if isinstance(ctx.trace_request_ctx, dict):
            ctx.trace_request_ctx["queued_at"] = clock()

    async def dequeued(session, ctx, params):
        got = ctx.trace_request_ctx
        if isinstance(got, dict) and "queued_at" in got:
            got["ns"] += clock() - got.pop("queued_at")

    trace = aiohttp.TraceConfig()
    trace.on_connection_queued_start.append(queued)
    trace.on_connection_queued_end.append(dequeued)
    return trace


def _read_headers(result: Result, headers) -> None:
    try:
        result.server_stages, result.server_total_ns = parse_server_timing(headers.get(TIMING_HEADER))
    except ValueError as exc:
        result.error = ("network", "BadServerTiming", str(exc))
    result.batch = int(headers.get(BATCH_HEADER, -1))
    hit = headers.get(CACHE_HIT_HEADER)
    result.cache_hit = float(hit) if hit is not None else None
    result.batch_size = int(headers.get(BATCH_SIZE_HEADER, 1))


def _http_error(status: int, body: bytes) -> tuple[str, str, str]:
    """(stage, type, message) of a non-200 reply: the stage the server named, else ``server``."""
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and "stage" in obj:
        return str(obj["stage"]), str(obj.get("type", f"HTTP{status}")), str(obj.get("error", ""))
    return "server", f"HTTP{status}", body[:200].decode(errors="replace")


async def _warm_up(session, url: str, payloads: list[bytes], n: int) -> None:
    """A few requests in sequence before the schedule (connection set up, server paths warm).

    An unreachable server is a ConfigError here, before any timing.
    """
    import aiohttp

    for k in range(n):
        try:
            async with session.post(f"{url}/predict", data=payloads[k % len(payloads)]) as resp:
                await resp.read()
        except (aiohttp.ClientConnectorError, OSError) as exc:
            raise ConfigError(f"--url {url}: cannot connect ({exc}); is the server running "
                              f"(python -m workbench serve ...) and is the address right?") from None
        except asyncio.TimeoutError:
            raise ConfigError(f"--url {url}: no answer to a warm-up request within the timeout") from None


async def _health(session, url: str) -> dict | None:
    """``GET /healthz`` of a workbench server (its CPU time), or None for another server."""
    import aiohttp

    try:
        async with session.get(f"{url}/healthz") as resp:
            if resp.status != 200:
                return None
            obj = await resp.json(content_type=None)
            return obj if isinstance(obj, dict) else None
    except (aiohttp.ClientConnectorError, OSError) as exc:
        raise ConfigError(f"--url {url}: cannot connect ({exc}); is the server running "
                          f"(python -m workbench serve ...) and is the address right?") from None
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return None


def lag_percentiles(lags_ns: np.ndarray) -> dict[str, float]:
    """``{p50_ms, p99_ms, max_ms}`` of the generator's lag (0 for an empty run)."""
    if lags_ns.size == 0:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    p50, p99 = np.percentile(lags_ns, [50, 99])
    return {"p50_ms": float(p50) / 1e6, "p99_ms": float(p99) / 1e6, "max_ms": float(lags_ns.max()) / 1e6}


def summary_of_server(drive_: Drive) -> dict[str, Any]:
    """The server's CPU seconds during the run, from its ``/healthz`` before and after (None if not a workbench server)."""
    b, a = drive_.server_before, drive_.server_after
    if not b or not a or "cpu_s" not in b or "cpu_s" not in a:
        return {"server_cpu_s": None}
    return {"server_cpu_s": round(float(a["cpu_s"]) - float(b["cpu_s"]), 4)}
