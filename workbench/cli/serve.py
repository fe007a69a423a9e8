"""``workbench serve``: the pipeline behind an HTTP server (see ``workbench.serving.server``)."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from ..errors import ConfigError
from .profile import add_pipeline_arguments, apply_threads, config_from_args, factory_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="serve a pipeline over HTTP behind the dynamic batcher",
                              description="POST /predict (one item), GET /healthz, POST /shutdown; stage times in "
                                          "Server-Timing; on SIGTERM or /shutdown the run folder is written to --out.")
    add_pipeline_arguments(p, default_batch_size=None)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port, printed)")
    p.add_argument("--max-batch-size", type=int, default=8, help="largest batch (default 8)")
    p.add_argument("--max-wait-ms", type=float, default=5.0, help="batching wait of the oldest request (default 5)")
    p.add_argument("--concurrency", type=int, default=1, help="batches executed at once (default 1)")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up calls per executor and size (default 5)")
    p.add_argument("--drain-timeout", type=float, default=10.0, help="seconds to finish queued requests at shutdown")
    p.add_argument("--out", type=Path, help="run folder written at shutdown (default runs/serve-NAME-TIME)")
    p.add_argument("--gc", choices=("freeze", "default"), default="freeze",
                   help="freeze: gc.freeze() after the warm-up, so full collections skip the model and torch "
                        "(default, as production servers do); default: Python's collector unchanged")
    p.add_argument("--otel", action="store_true", help="export each request as OpenTelemetry spans at shutdown")
    p.set_defaults(func=run_serve_command)


def run_serve_command(args) -> int:
    from ..batching.policy import BatchPolicy
    from ..runner import resolve_pipeline
    from ..serving.server import serve

    policy = BatchPolicy(args.max_batch_size, args.max_wait_ms, args.concurrency)
    if args.batch_size is not None and args.batch_size != args.max_batch_size:
        raise ConfigError("--batch-size: serve builds the pipeline for --max-batch-size; leave --batch-size out")
    args.batch_size = args.max_batch_size
    out = args.out or Path("runs") / f"serve-{args.example or Path(args.pipeline.split(':')[0]).stem}-" \
                                     f"{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if out.exists():
        raise ConfigError(f"--out {out} already exists; pick another folder")
    apply_threads(args)
    pipe = resolve_pipeline(factory_from_args(args), config_from_args(args))

    def ready(url: str) -> None:
        print(f"serving {pipe.name} on {url} (POST /predict, GET /healthz, POST /shutdown); "
              f"run folder at shutdown: {out}", flush=True)

    run = serve(pipe, policy, host=args.host, port=args.port, warmup=args.warmup,
                drain_timeout_s=args.drain_timeout, ready=ready, gc_mode=args.gc)
    path = run.save(out)
    load, gc_note = run.meta["load"], run.meta["serving"]["gc"]
    print(f"gc ({gc_note['mode']}): {gc_note['collections']} collections while serving, "
          f"{gc_note['pause_ms_total']:.1f} ms in all, the longest {gc_note['pause_ms_max']:.1f} ms", flush=True)
    print(f"stopped by {run.meta['serving']['stopped_by']}: {load['requests']} requests, {load['failed']} failed; "
          f"run written to {path}", flush=True)
    from ..otel.export import otel_hook

    otel_hook(args, run, path)
    return 1 if load["failed"] else 0
