"""``workbench serve``: the pipeline behind an HTTP server (see ``workbench_serve.server``)."""

from __future__ import annotations

from pathlib import Path

from ..otel.export import otel_hook
from workbench.pipeline import resolve_pipeline
from workbench.cli.load_args import BATCH, CONCURRENCY, WAIT_MS, batch_size_is_max, policy_from_args
from workbench.cli.output import (
    add_number,
    check_out,
    default_folder,
    number,
    pipeline_name,
    save_measured,
)
from workbench.record.run import summarized
from workbench.cli.profile import (
    add_pipeline_arguments,
    apply_threads,
    config_from_args,
    factory_from_args,
    print_summary_failures,
)
from ..edge import EdgeLimits
from ..records import DISCONNECTED
from ..server import serve

PORT = number("--port", 0, 65_535, "(TCP port)", integer=True)
WARMUP = number("--warmup", 0, 10**6, "calls", integer=True)
DRAIN_S = number("--drain-timeout", 0, 86_400, "s")
HEADER_BYTES = number("--max-header-bytes", 1, 2**30, "bytes", integer=True)
BODY_BYTES = number("--max-body-bytes", 1, 2**34, "bytes", integer=True)
REQUEST_ID = number("--max-request-id", 1, 2**20, "characters", integer=True)
HEADER_S = number("--header-timeout", 0, 86_400, "s", lo_open=True)
BODY_S = number("--body-timeout", 0, 86_400, "s", lo_open=True)
KEEP_ALIVE_S = number("--keep-alive-timeout", 0, 86_400, "s", lo_open=True)
CONNECTIONS = number("--max-connections", 1, 10**6, "connections", integer=True)
CLIENT_CONNECTIONS = number("--max-client-connections", 1, 10**6, "connections", integer=True)
PIPELINED = number("--max-pipelined", 1, 10**6, "requests", integer=True)
SEND_S = number("--send-timeout", 0, 86_400, "s", lo_open=True)
PENDING = number("--max-pending", 1, 10**8, "requests", integer=True)
BACKLOG = number("--accept-backlog", 1, 65_535, "connections", integer=True)
STRIKES = number("--client-strikes", 1, 10**6, "refusals", integer=True)
PENALTY_S = number("--client-penalty", 0, 86_400, "s", lo_open=True)
# The network edge's limits: the option, the EdgeLimits field it sets, its help ({}: the default).
EDGE_LIMITS = (
    (HEADER_BYTES, "max_header_bytes", "request line + headers, else 431 (default {})"),
    (BODY_BYTES, "max_body_bytes", "request body, else 413 (default {})"),
    (REQUEST_ID, "max_request_id_chars", "X-Request-Id characters, else 400 (default {})"),
    (HEADER_S, "header_timeout_s", "seconds to send a request head, else 408 (default {:g})"),
    (BODY_S, "body_timeout_s", "seconds to send a body after its head, else 408 (default {:g})"),
    (
        KEEP_ALIVE_S,
        "keep_alive_s",
        "seconds an idle keep-alive connection stays open (default {:g})",
    ),
    (CONNECTIONS, "max_connections", "open connections, else 503 + Retry-After (default {})"),
    (
        CLIENT_CONNECTIONS,
        "max_client_connections",
        "open connections of one client address, else 503 + Retry-After (default {})",
    ),
    (
        PIPELINED,
        "max_pipelined",
        "requests sent ahead of their response on one connection, else 503 and closed (default {})",
    ),
    (
        SEND_S,
        "send_timeout_s",
        "seconds a client may leave its responses unread once the send buffer is full (default {:g})",
    ),
    (PENDING, "max_pending", "requests queued or running, else 503 + Retry-After (default {})"),
    (
        BACKLOG,
        "accept_backlog",
        "listen queue, and the most connections accepted per event-loop turn (default {})",
    ),
    (
        STRIKES,
        "client_strikes",
        "refusals of one client address (4xx, pipelining, unread replies, slow heads) within "
        "--client-penalty seconds after which its new connections are held unread (default {})",
    ),
    (
        PENALTY_S,
        "client_penalty_s",
        "seconds a client past --client-strikes has its new connections held unread, then closed "
        "(default {:g})",
    ),
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve a pipeline over HTTP behind the dynamic batcher",
        description="POST /predict (one item), GET /healthz, POST /shutdown (with --control-token); "
        "stage times in Server-Timing; on SIGTERM, Ctrl-C or /shutdown the run "
        "folder is written to --out.",
    )
    add_pipeline_arguments(p, default_batch_size=None)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    add_number(p, PORT, 8000, "port (default 8000; 0: any free port, printed)")
    add_number(p, BATCH, 8, "largest batch (default 8)")
    add_number(p, WAIT_MS, 5.0, "batching wait of the oldest request (default 5)")
    add_number(p, CONCURRENCY, 1, "batches executed at once (default 1)")
    add_number(p, WARMUP, 5, "untimed warm-up calls per executor and size (default 5)")
    add_number(p, DRAIN_S, 10.0, "seconds to finish queued requests at shutdown (default 10)")
    p.add_argument(
        "--out", type=Path, help="run folder written at shutdown (default runs/serve-NAME-TIME)"
    )
    p.add_argument(
        "--gc",
        choices=("freeze", "default"),
        default="freeze",
        help="freeze: gc.freeze() after the warm-up, so full collections skip the model and torch "
        "(default, as production servers do); default: Python's collector unchanged",
    )
    p.add_argument(
        "--no-sample-stacks",
        dest="sample_stacks",
        action="store_false",
        help="sample no threads while serving (on by default: a thread samples every thread every "
        "5 ms, so audit of the run folder names the served stages' waits: locks, GIL, I/O, GC)",
    )
    p.add_argument(
        "--otel", action="store_true", help="export each request as OpenTelemetry spans at shutdown"
    )
    add_edge_arguments(p)
    p.set_defaults(func=run_serve_command)


def add_edge_arguments(p) -> None:
    """The network edge's limits (``workbench_serve.edge.EdgeLimits``; docs/serving.md lists them)."""
    d = EdgeLimits()
    g = p.add_argument_group(
        "edge", "who may talk to the server, how much and for how long (docs/serving.md)"
    )
    g.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer this Host name (repeatable; '*': any). Always answered: localhost, 127.0.0.1, "
        "::1 and the --host address (for 0.0.0.0: this machine's names and addresses)",
    )
    g.add_argument(
        "--control-token",
        metavar="TOKEN",
        help="enable POST /shutdown for requests carrying X-Workbench-Token: TOKEN (16+ characters; "
        "default: the endpoint is off, stop with SIGTERM or Ctrl-C)",
    )
    for kind, field, help_text in EDGE_LIMITS:
        add_number(g, kind, getattr(d, field), help_text.format(getattr(d, field)))


def edge_limits_from_args(args):
    return EdgeLimits(
        allow_hosts=tuple(h.strip().lower() for h in args.allow_host if h.strip()),
        control_token=args.control_token,
        **{
            field: getattr(args, kind.option[2:].replace("-", "_"))
            for kind, field, _ in EDGE_LIMITS
        },
    )


def run_serve_command(args) -> int:
    policy = policy_from_args(args)
    batch_size_is_max(args, "serve")
    limits = edge_limits_from_args(args)
    out = args.out or default_folder("serve", pipeline_name(args))
    check_out(out, folder=True)  # before serving: what is measured is never thrown away
    apply_threads(args)
    pipe = resolve_pipeline(factory_from_args(args), config_from_args(args))

    def ready(url: str) -> None:
        stop = "SIGTERM or Ctrl-C to stop"
        control = "POST /shutdown with X-Workbench-Token" if limits.control_token else stop
        print(
            f"serving {pipe.name} on {url} (POST /predict, GET /healthz; {control}); "
            f"run folder at shutdown: {out}",
            flush=True,
        )

    run = serve(
        pipe,
        policy,
        host=args.host,
        port=args.port,
        warmup=args.warmup,
        drain_timeout_s=args.drain_timeout,
        ready=ready,
        gc_mode=args.gc,
        limits=limits,
        sample_stacks=args.sample_stacks,
    )
    path = save_measured(run, out)  # as measured, then explained
    # a client that hung up is recorded as a failed request, but it is no failure of the server's
    failed = int((~run.requests["ok"].astype(bool)).sum())
    hung_up = int((run.requests["error_type"] == DISCONNECTED[1]).sum())
    summarized(run.summary_failures, "the serve report", _report_serve, run, path, hung_up)
    print_summary_failures(run, "serve")
    otel_hook(args, run, path)
    return 1 if failed > hung_up else 0


def _report_serve(run, path, hung_up: int) -> None:
    """The served run's closing lines on stdout: GC while serving, the edge's refusals, the counts."""
    serving, requests = run.meta.serving, run.requests
    gc_note = serving.gc
    print(
        f"gc ({gc_note['mode']}): {gc_note['collections']} collections while serving, "
        f"{gc_note['pause_ms_total']:.1f} ms in all, the longest {gc_note['pause_ms_max']:.1f} ms",
        flush=True,
    )
    refused = serving.extra.get("edge", {}).get("refused") or {}
    if refused:
        print(
            f"refused at the edge: {', '.join(f'{k} {v}' for k, v in refused.items())}", flush=True
        )
    failed = int((~requests["ok"].astype(bool)).sum())
    print(
        f"stopped by {serving.stopped_by}: {len(requests)} requests, {failed} failed"
        f"{f' ({hung_up} hung up)' if hung_up else ''}; run written to {path}",
        flush=True,
    )
