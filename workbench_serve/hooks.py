"""What the core calls in the serve wing (through the ``workbench.wings`` entry point ``serve``).

``load``'s options of a served run (``--url``, ``--engine``...) and ``profile --otel`` are added where
the core asks for them (:func:`workbench.wings.hook`), with the checks of their combinations; what
they do lives beside the server and the load generator, imported when first asked for.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from workbench.cli.output import add_number, number
from workbench.errors import ConfigError

# need the HTTP client, Locust's driver or OTel: imported when first asked for, not at every parse
_LATER = {
    "run_http_load_command": "workbench_serve.cli.load_url",
    "served_sweep": "workbench_serve.cli.load_url",
    "otel_hook": "workbench_serve.otel.export",
}
__all__ = ["add_load_arguments", "add_profile_arguments", "served_load", *_LATER]

HTTP_TIMEOUT = number("--timeout", 0, 86_400, "s", lo_open=True)
TTFT_BOUND = number("--ttft-ms", 0, 86_400_000, "ms", lo_open=True)
TPOT_BOUND = number("--tpot-ms", 0, 86_400_000, "ms", lo_open=True)
WORKERS = number("--workers", 1, 1024, "processes", integer=True)
EXPECT_WORKERS = number("--expect-workers", 1, 65_536, "processes", integer=True)
MASTER_PORT = number("--master-port", 0, 65_535, "(TCP port)", integer=True)


def add_load_arguments(load: argparse.ArgumentParser, sources) -> None:
    """``--payloads`` (a third of the ``sources`` beside --example/--pipeline), ``--url``,
    ``--timeout``, ``--ttft-ms``, ``--tpot-ms``, ``--otel``, then the load generator's group."""
    sources.add_argument(
        "--payloads", type=Path, help="with --url: a file of request bodies, one per line"
    )
    load.add_argument(
        "--url",
        help="drive a server (workbench serve or any POST /predict) at http://HOST:PORT "
        "from this process instead of an in-process batcher",
    )
    add_number(load, HTTP_TIMEOUT, 30.0, "with --url: seconds before a request fails (default 30)")
    for bound, what in ((TTFT_BOUND, "TTFT"), (TPOT_BOUND, "TPOT")):
        add_number(
            load,
            bound,
            None,
            f"with --url, a server that streams: goodput counts requests whose {what} is at most this",
        )
    load.add_argument(
        "--otel",
        action="store_true",
        help="export each request as OpenTelemetry spans after the run",
    )
    _add_engine_arguments(load)


def _add_engine_arguments(load: argparse.ArgumentParser) -> None:
    """``--engine``, ``--workers``, ``--expect-workers``, ``--master-host``, ``--master-port``."""
    g = load.add_argument_group("load generator of --url (--engine)")
    g.add_argument(
        "--engine",
        choices=("workbench", "locust"),
        default="workbench",
        help="workbench (default: this process's own generator, one machine) or locust (Locust's master "
        "and --workers processes, headless; more workers on other machines with --expect-workers)",
    )
    add_number(g, WORKERS, 1, "--engine locust: worker processes started here (default 1)")
    add_number(
        g,
        EXPECT_WORKERS,
        None,
        "--engine locust: workers to wait for, those started here included (default --workers); "
        "start the others with: python -m workbench locust-worker --master HOST",
    )
    g.add_argument(
        "--master-host",
        default="127.0.0.1",
        help="--engine locust: the address the master listens on (0.0.0.0 for workers on other machines)",
    )
    add_number(g, MASTER_PORT, 0, "--engine locust: its port (default: a free one)")


def add_profile_arguments(profile: argparse.ArgumentParser) -> None:
    """``profile --otel``."""
    profile.add_argument(
        "--otel",
        action="store_true",
        help="export each request as OpenTelemetry spans after the run "
        "(OTLP to $OTEL_EXPORTER_OTLP_ENDPOINT, else otel-spans.jsonl in the run folder)",
    )


def served_load(args) -> bool:
    """Whether ``load`` (or ``load --sweep``) drives a server: ``--url``; the options that need it
    are refused without it, and ``--timeout-s`` (the in-process load's) with it."""
    if args.engine != "workbench" and not args.url:
        raise ConfigError("--engine locust sends to a server: give --url")
    if (args.ttft_ms is not None or args.tpot_ms is not None) and not args.url:
        raise ConfigError("--ttft-ms and --tpot-ms are goodput's bounds for --url: give --url")
    if args.payloads is not None and not args.url:
        raise ConfigError(
            "--payloads is for --url (a served pipeline); give --example or --pipeline for an in-process load"
        )
    if args.url and args.timeout_s is not None:
        raise ConfigError(
            "--timeout-s bounds the in-process load's pipeline calls; with --url use --timeout"
        )
    return bool(args.url)


def __getattr__(name: str):
    if name not in _LATER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LATER[name]), name)
