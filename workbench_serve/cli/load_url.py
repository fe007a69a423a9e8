"""``workbench load --url``: drive a served pipeline from this (separate) process.

Payloads come from ``--payloads FILE`` (one request body per line, sent
without its newline) or from the item source of ``--example`` /
``--pipeline`` built here with the same options (items as bytes: bytes as
they are, str as UTF-8, anything else as JSON).
"""

from __future__ import annotations

import sys

from workbench.analysis.budget import failure_summary
from workbench.analysis.stats import summarize_ns
from workbench.analysis.tokens import token_summary, token_text
from workbench.batching.policy import BatchPolicy
from workbench.batching.summary import format_summary, load_summary
from workbench.cli.load_args import (
    arrivals_from_args,
    describe_arrivals,
    describe_load,
    schedule_keys,
    schedule_line,
    summary_json,
)
from workbench.cli.output import check_out, default_folder, dumps, save_measured
from workbench.cli.profile import (
    config_from_args,
    factory_from_args,
    failure_verdict,
    kept_on_interrupt,
)
from workbench.errors import ConfigError
from workbench.files import read_capped
from workbench.noise import noise_line
from workbench.pipeline import resolve_pipeline

from ..loadrun import run_http_load
from ..locust_drive import WORKER_STAGE, LocustEngine, locust_available, with_client
from ..otel.export import otel_hook
from ..protocol import item_bytes

MAX_PAYLOAD_BYTES = 2**30  # request bodies, one per line, held in memory to cycle through


def payloads_from_args(args, n: int) -> list[bytes]:
    """``n`` request bodies (cycled from --payloads, or drawn from the pipeline's item source)."""
    if args.payloads is not None:
        raw = read_capped(args.payloads, MAX_PAYLOAD_BYTES, ConfigError, "payload file")
        lines = [ln for ln in raw.splitlines() if ln.strip()]
        if not lines:
            raise ConfigError(f"--payloads {args.payloads}: the file has no request bodies")
        return lines
    if args.batch_size is None:  # the pipeline built as serve builds it (for --max-batch-size)
        args.batch_size = args.max_batch_size
    pipe = resolve_pipeline(factory_from_args(args), config_from_args(args))
    return [item_bytes(x) for _, x in zip(range(max(n, 1)), pipe.item_iterator())]


def served_sweep(args):
    """``load --sweep --url``: a point's ``start(point_args, arrivals, watch)`` and the sweep's header."""
    payloads = payloads_from_args(args, 2_000)

    def start(point, arrivals, watch):
        return http_load(point, payloads, arrivals, watch)

    # "pipeline": None when no --example: the server names it (first point)
    return start, {"kind": "served", "pipeline": args.example, "url": args.url, "policy": None}


def run_http_load_command(args) -> int:
    arrivals = arrivals_from_args(args, args.requests, args.duration)
    out = args.out or default_folder("load-url")
    check_out(out, folder=True)  # before measuring
    payloads = payloads_from_args(args, min(len(arrivals.times_ns()), 10_000))
    with kept_on_interrupt(out, "load"):
        run = http_load(args, payloads, arrivals)  # the workbench's generator, or --engine locust
    path = save_measured(run, out)
    summary = load_summary(run.requests)
    serving, noise = run.meta.serving, run.meta.noise
    joined, lag = _joined(run), serving.generator_lag
    tokens = _tokens(run)
    if args.json:
        print(
            dumps(
                summary_json(summary, joined)
                | tokens
                | {
                    "generator_lag": lag,
                    "generator_lag_ms": lag["max_ms"],
                    **schedule_keys(run.meta.load),
                    "noise": {"noisy": noise.noisy, "reasons": noise.reasons, "fix": noise.fix},
                    "failures": failure_summary(run.requests, run.stage_names),
                    "server_timing": serving.server_timing,
                    "notes": serving.extra.get("notes", []),
                    "run_dir": str(path),
                }
            )
        )
    else:
        print(
            f"{run.meta.pipeline} served at {args.url}: {_describe_served(arrivals, run.meta.load.policy)}"
        )
        print(format_summary(summary))
        for name, row in joined.items():  # server_end_to_end, network: None without Server-Timing
            if row:
                label = name.replace("_", " ")
                print(f"{label}: p50 {row['p50_ms']:.3f} ms, p99 {row['p99_ms']:.3f} ms")
        if not serving.server_timing:
            print("the server sent no Server-Timing: end to end only")
        if tokens:
            print("\n".join(_token_lines(tokens)))
        for note in serving.extra.get("notes", []):
            print(f"note: {note}")
        print(
            f"generator lag: p50 {lag['p50_ms']:.3f} ms, p99 {lag['p99_ms']:.3f} ms, max {lag['max_ms']:.3f} ms"
        )
        print(schedule_line(run.meta.load))
        if noise.noisy:
            print(noise_line(noise))
        print(f"\nrun written to {path}")
    otel_hook(args, run, path)
    verdicts = failure_verdict(run, args.fail_on_error, "load"), _server_lost_verdict(run)
    return max(*verdicts, _worker_lost_verdict(run))


def _tokens(run) -> dict:
    """``tokens`` (:func:`workbench.analysis.tokens.token_summary`), ``streams`` and ``goodput`` of a run
    against a server that streamed; empty for one that did not."""
    if run.units is None:
        return {}
    extra = run.meta.serving.extra
    return {
        "tokens": token_summary(run.requests, run.stages, run.units),
        "streams": extra.get("streams"),
        "goodput": extra.get("goodput"),
    }


def _token_lines(tokens: dict) -> list[str]:
    lines = token_text(tokens["tokens"])
    s = tokens["streams"]
    if s and s["failed_requests"]:
        lines.append(
            f"  {s['failed_requests']} failed requests had streamed {s['failed_units']} units "
            "first (in the units table, not in the figures)"
        )
    good = tokens["goodput"]
    if good:
        bounds = [f"{k[:4].upper()} <= {good[k]:g} ms" for k in ("ttft_ms", "tpot_ms") if good[k]]
        share = "-" if good["share"] is None else f"{100 * good['share']:.1f} %"
        lines.append(
            f"goodput: {good['good']} of {good['requests']} requests ({share}) met "
            + " and ".join(bounds)
        )
    return lines


LOST = ("ServerDisconnected", "ConnectionRefusedError", "ConnectionResetError", "BrokenPipeError")


def _server_lost_verdict(run) -> int:
    """1 when requests got no answer because the server closed or refused their connection (it stopped mid-run)."""
    req = run.requests
    lost = req[(req["error_stage"] == "network") & req["error_type"].isin(LOST)]
    if lost.empty:
        return 0
    print(
        f"workbench load: {len(lost)} of {len(req)} requests got no answer: the server closed or refused their "
        f"connection ({', '.join(sorted(set(lost['error_type'])))}); did it stop? The answered ones are in the run",
        file=sys.stderr,
    )
    return 1


def _worker_lost_verdict(run) -> int:
    """1 when a Locust worker failed: its requests are in the run as lost, the notes say why."""
    lost = int((run.requests["error_stage"] == WORKER_STAGE).sum())
    if not lost:
        return 0
    print(
        f"workbench load: {lost} of {len(run.requests)} requests were lost with their Locust "
        f"worker; the others are in the run. "
        + " ".join(n for n in run.meta.serving.extra.get("notes", []) if "Locust worker" in n),
        file=sys.stderr,
    )
    return 1


def _describe_served(arrivals, server_policy) -> str:
    """The arrivals and the server's own batching policy (from its /healthz; this command's flags are not it)."""
    try:
        policy = BatchPolicy(
            int(server_policy["max_batch_size"]),
            float(server_policy["max_wait_ms"]),
            int(server_policy["concurrency"]),
        )
    except (TypeError, KeyError, ValueError, ConfigError):
        return f"{describe_arrivals(arrivals)}(the server did not say its batching policy)"
    return describe_load(arrivals, policy) + " (the server's policy)"


def _joined(run) -> dict:
    """``server_end_to_end`` and ``network`` percentiles (ms) of the successful requests; empty without Server-Timing."""
    if not run.meta.serving.server_timing:
        return {"server_end_to_end": None, "network": None}
    req = run.requests[run.requests["ok"]]
    st = run.stages[run.stages["request"].isin(req["request"])]
    network = st.loc[st["stage"] == "network"].set_index("request")["dur_ns"]
    from_send = (
        req.set_index("request")["dur_ns"] - req["lag_ns"].to_numpy()
    )  # dur: from the due time
    server = from_send - network.reindex(req["request"]).fillna(0).astype("int64").to_numpy()
    return {
        "server_end_to_end": summarize_ns(server.to_numpy(dtype="int64")),
        "network": summarize_ns(network.to_numpy(dtype="int64")),
    }


def engine_from_args(args):
    """The ``driver`` of :func:`workbench_serve.loadrun.run_http_load` (None: the workbench's own generator)."""
    if args.engine == "workbench":
        if args.expect_workers is not None or args.workers != 1:
            raise ConfigError("--workers/--expect-workers are for --engine locust")
        return None  # (--engine locust without --url is refused by hooks.served_load)
    locust_available()
    return LocustEngine(args.workers, args.expect_workers, args.master_host, args.master_port)


def http_load(args, payloads: list[bytes], arrivals, watch=None):
    """One served load run with the engine ``args`` name (``load --url``, and each point of a served sweep).

    watch: a sweep point's :class:`~workbench.analysis.windows.StabilityWatch`; the generator (the
    workbench's own, or Locust's workers told by their master) stops once it says the point is stable.
    """
    engine = engine_from_args(args)
    options = {"pipeline": args.example, "timeout_s": args.timeout, "watch": watch}
    options |= {k: getattr(args, k, None) for k in ("ttft_ms", "tpot_ms")}  # goodput's bounds
    if engine is None:
        return run_http_load(args.url, payloads, arrivals, **options)
    run = run_http_load(args.url, payloads, arrivals, driver=engine.drive, **options)
    return with_client(run, engine.client_name())
