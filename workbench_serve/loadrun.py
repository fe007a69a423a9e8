"""A load run against a server: drive it (``client``), join the responses, record a run of kind ``served``.

The run's requests are the client's (end to end from send to body read);
its stages are ``network`` (client end to end minus the server's
``Server-Timing`` total: sockets, HTTP parsing on both sides, the client's
own event loop) followed by the server's stages as the server reported them.
Against a server without ``Server-Timing`` the run has end to end only.

Noise: the machine probe of :mod:`workbench.noise`, with the server's own
CPU time (from its ``/healthz``, when it is a workbench server on this
machine) not counted as "other processes", plus one rule of this run: a
generator lag p99 of ``batching.summary.LAG_P99_LIMIT_MS`` or more marks the run noisy, the
lag being one of ``noise.reasons`` (the rate is above what the client holds).
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlparse

from workbench.batching.summary import lag_noise, lag_percentiles, load_section, load_summary
from workbench.record import Config, Env, Load, Noise, Run, ServedMeta, Serving, Timing
from .client import SPIN_NS, Target, drive, summary_of_server
from .records import (
    NETWORK,
    client_tables,
    client_units,
    fitted_to_client,
    server_stage_names,
    stream_counts,
)
from workbench.analysis.tokens import goodput
from workbench.noise import NoiseProbe
from workbench.guard import Interrupted
from workbench.noise import assess
import platform

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def run_http_load(
    url: str,
    payloads: list[bytes],
    arrivals,
    *,
    pipeline: str | None = None,
    warmup: int = 5,
    timeout_s: float = 30.0,
    probe=None,
    tag: str | None = None,
    driver=drive,
    watch=None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
) -> Run:
    """Drive ``url`` with ``arrivals`` (an :class:`~workbench.batching.Arrivals`) and return the joined run.

    Ctrl-C stops the schedule; the requests already sent finish (or time out) and
    :class:`workbench.guard.Interrupted` is raised with them as its ``run`` (status "interrupted").
    driver: :func:`~workbench_serve.client.drive` (this process's generator) or another with its
    signature and its :class:`~workbench_serve.client.Drive` (``serving.locust_drive``: Locust workers).
    watch: a :class:`~workbench.analysis.windows.StabilityWatch` that may stop the schedule once the
    point is stable (a sweep point; :func:`~workbench_serve.client.drive` and the Locust engine take it).

    A server that streams (``text/event-stream``, :mod:`workbench_serve.sse`) gives the run a ``units``
    table (each unit as received), so TTFT, ITL and TPOT are timed from each request's due time, and
    ``serving.streams`` counts them; ``ttft_ms`` / ``tpot_ms``: the bounds of ``serving.goodput``
    (:func:`workbench.analysis.tokens.goodput`).
    """
    Target.from_url(url)  # a ConfigError naming what is wrong with it
    schedule = arrivals.times_ns()
    probe = (probe or NoiseProbe()).start()
    started = datetime.now(timezone.utc)
    tag = tag or f"wb{os.getpid()}"
    watched = {} if watch is None else {"watch": watch}
    d = driver(url, payloads, schedule, tag=tag, warmup=warmup, timeout_s=timeout_s, **watched)
    health = d.server_before or {}
    server_stages = server_stage_names(d.results, health.get("stages"))
    results, notes = fitted_to_client(d.results, server_stages)
    requests, stages = client_tables(results, d.origin_ns)
    units = client_units(results, d.origin_ns, health.get("stream"))
    streamed = {}
    if units is not None:
        good = goodput(requests, stages, units, ttft_ms, tpot_ms)
        streamed = {"streams": stream_counts(results)} | ({"goodput": good} if good else {})
    summary = load_summary(requests)
    server = summary_of_server(d)
    noise = served_noise(
        probe.finish(None, requests.loc[requests["ok"], "dur_ns"].to_numpy()),
        lag_percentiles(d.lags_ns),
        server["server_cpu_s"] if _is_local(url) else None,
    )
    stage_names = []
    if any(r.server_total_ns is not None for r in results):
        stage_names = [NETWORK, *server_stages]
    notes += [*health.get("notes", []), *(d.server_after or {}).get("notes", []), *d.notes]
    meta = ServedMeta(
        pipeline=pipeline or health.get("pipeline") or "served",
        description=f"served at {url}",
        stages=stage_names,
        config=Config.from_dict(health.get("config") or {}),
        env=Env.from_dict(_client_env()),
        created=started.isoformat(),
        timing=Timing(warmup=0, requests=int(len(requests)), clock="time.perf_counter_ns"),
        noise=Noise.from_dict(noise),
        status="interrupted" if d.interrupted else "complete",
        load=Load.from_dict(load_section(summary, d.lags_ns, arrivals, health.get("policy"))),
        serving=Serving.from_dict(
            {
                "role": "client",
                "url": url,
                "server_timing": bool(stage_names),
                "request_id_prefix": tag,
                "client": _client_name(),
                "generator_lag": lag_percentiles(d.lags_ns),
                **server,
                **streamed,
                "notes": list(dict.fromkeys(notes)),
            }
        ),
    )
    run = Run(meta=meta, requests=requests, stages=stages, units=units)
    if d.interrupted:
        raise Interrupted(run, f"interrupted after {len(requests)} of {len(schedule)} requests")
    return run


def _is_local(url: str) -> bool:
    return (urlparse(url).hostname or "") in LOOPBACK


def served_noise(
    noise: dict[str, Any], lag: dict[str, float], server_cpu_s: float | None
) -> dict[str, Any]:
    """The machine's noise record with the local server's CPU taken out and the lag rule added."""
    out = dict(noise)
    if out.get("noisy") is not None and server_cpu_s is not None and out.get("duration_s"):
        server_cores = server_cpu_s / out["duration_s"]
        readings = {
            k: v for k, v in out.items() if k not in ("noisy", "reasons", "fix", "thresholds")
        }
        readings["other_cores"] = round(max(readings["other_cores"] - server_cores, 0.0), 3)
        out = assess(readings | {"server_cores": round(server_cores, 3)})
    return lag_noise(out, lag)


def _client_env() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cores": os.cpu_count(),
        "client": _client_name(),
    }


def _client_name() -> str:
    return f"workbench_serve.http1 (asyncio protocols, select loop, {SPIN_NS // 1000} us spin to each send)"
