"""``workbench serve``: the pipeline behind an HTTP server (see ``workbench.serving.server``)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from ..errors import ConfigError
from .load_args import BATCH, CONCURRENCY, WAIT_MS
from .numbers import number, ranged
from .output import check_out, save_measured
from .profile import add_pipeline_arguments, apply_threads, config_from_args, factory_from_args

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
PENDING = number("--max-pending", 1, 10**8, "requests", integer=True)
BACKLOG = number("--accept-backlog", 1, 65_535, "connections", integer=True)


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
    p.add_argument(
        "--port",
        type=PORT,
        default=8000,
        help=ranged("port (default 8000; 0: any free port, printed)", PORT),
    )
    p.add_argument(
        "--max-batch-size", type=BATCH, default=8, help=ranged("largest batch (default 8)", BATCH)
    )
    p.add_argument(
        "--max-wait-ms",
        type=WAIT_MS,
        default=5.0,
        help=ranged("batching wait of the oldest request (default 5)", WAIT_MS),
    )
    p.add_argument(
        "--concurrency",
        type=CONCURRENCY,
        default=1,
        help=ranged("batches executed at once (default 1)", CONCURRENCY),
    )
    p.add_argument(
        "--warmup",
        type=WARMUP,
        default=5,
        help=ranged("untimed warm-up calls per executor and size (default 5)", WARMUP),
    )
    p.add_argument(
        "--drain-timeout",
        type=DRAIN_S,
        default=10.0,
        help=ranged("seconds to finish queued requests at shutdown (default 10)", DRAIN_S),
    )
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
        "--otel", action="store_true", help="export each request as OpenTelemetry spans at shutdown"
    )
    add_edge_arguments(p)
    p.set_defaults(func=run_serve_command)


def add_edge_arguments(p) -> None:
    """The network edge's limits (``workbench.serving.edge.EdgeLimits``; docs/serving.md lists them)."""
    from ..serving.edge import EdgeLimits

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
    g.add_argument(
        "--max-header-bytes",
        type=HEADER_BYTES,
        default=d.max_header_bytes,
        help=ranged(
            f"request line + headers, else 431 (default {d.max_header_bytes})", HEADER_BYTES
        ),
    )
    g.add_argument(
        "--max-body-bytes",
        type=BODY_BYTES,
        default=d.max_body_bytes,
        help=ranged(f"request body, else 413 (default {d.max_body_bytes})", BODY_BYTES),
    )
    g.add_argument(
        "--max-request-id",
        type=REQUEST_ID,
        default=d.max_request_id_chars,
        help=ranged(
            f"X-Request-Id characters, else 400 (default {d.max_request_id_chars})", REQUEST_ID
        ),
    )
    g.add_argument(
        "--header-timeout",
        type=HEADER_S,
        default=d.header_timeout_s,
        help=ranged(
            f"seconds to send a request head, else 408 (default {d.header_timeout_s:g})", HEADER_S
        ),
    )
    g.add_argument(
        "--body-timeout",
        type=BODY_S,
        default=d.body_timeout_s,
        help=ranged(
            f"seconds to send a body after its head, else 408 (default {d.body_timeout_s:g})",
            BODY_S,
        ),
    )
    g.add_argument(
        "--keep-alive-timeout",
        type=KEEP_ALIVE_S,
        default=d.keep_alive_s,
        help=ranged(
            f"seconds an idle keep-alive connection stays open (default {d.keep_alive_s:g})",
            KEEP_ALIVE_S,
        ),
    )
    g.add_argument(
        "--max-connections",
        type=CONNECTIONS,
        default=d.max_connections,
        help=ranged(
            f"open connections, else 503 + Retry-After (default {d.max_connections})", CONNECTIONS
        ),
    )
    g.add_argument(
        "--max-pending",
        type=PENDING,
        default=d.max_pending,
        help=ranged(
            f"requests queued or running, else 503 + Retry-After (default {d.max_pending})", PENDING
        ),
    )
    g.add_argument(
        "--accept-backlog",
        type=BACKLOG,
        default=d.accept_backlog,
        help=ranged(
            "listen queue, and the most connections accepted per event-loop turn "
            f"(default {d.accept_backlog})",
            BACKLOG,
        ),
    )


def edge_limits_from_args(args):
    from ..serving.edge import EdgeLimits

    return EdgeLimits(
        allow_hosts=tuple(h.strip().lower() for h in args.allow_host if h.strip()),
        control_token=args.control_token,
        max_header_bytes=args.max_header_bytes,
        max_body_bytes=args.max_body_bytes,
        max_request_id_chars=args.max_request_id,
        header_timeout_s=args.header_timeout,
        body_timeout_s=args.body_timeout,
        keep_alive_s=args.keep_alive_timeout,
        max_connections=args.max_connections,
        max_pending=args.max_pending,
        accept_backlog=args.accept_backlog,
    )


def run_serve_command(args) -> int:
    from ..batching.policy import BatchPolicy
    from ..runner import resolve_pipeline
    from ..serving.server import serve

    policy = BatchPolicy(args.max_batch_size, args.max_wait_ms, args.concurrency)
    if args.batch_size is not None and args.batch_size != args.max_batch_size:
        raise ConfigError(
            "--batch-size: serve builds the pipeline for --max-batch-size; leave --batch-size out"
        )
    args.batch_size = args.max_batch_size
    limits = edge_limits_from_args(args)
    out = (
        args.out
        or Path("runs")
        / f"serve-{args.example or Path(args.pipeline.split(':')[0]).stem}-"
        f"{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    )
    check_out(out, folder=True)  # before serving: what is measured is never thrown away
    apply_threads(args)
    pipe = resolve_pipeline(factory_from_args(args), config_from_args(args))

    def ready(url: str) -> None:
        control = (
            "POST /shutdown with X-Workbench-Token"
            if limits.control_token
            else "SIGTERM or Ctrl-C to stop"
        )
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
    )
    path = save_measured(run, out)
    load, serving = run.meta.load, run.meta.serving
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
    print(
        f"stopped by {serving.stopped_by}: {load.requests} requests, {load.failed} failed; "
        f"run written to {path}",
        flush=True,
    )
    from ..otel.export import otel_hook

    otel_hook(args, run, path)
    return 1 if load.failed else 0
