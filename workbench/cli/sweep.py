"""``workbench load --sweep``: a capacity sweep, in process or against ``--url``, into a sweep
folder; a point is a ``load`` run of windows until the last three are stable (batching.capacity).
"""

from __future__ import annotations

import argparse
import importlib.util
from datetime import datetime, timezone
from pathlib import Path

from ..errors import ConfigError
from .load_args import (
    CONCURRENCY,
    RATE,
    arrivals_from_args,
    batch_size_is_max,
    policy_from_args,
)
from .output import OptionError, add_number, check_out, default_folder, dumps, number, pipeline_name
from .profile import apply_threads, config_from_args, factory_from_args, kept_on_interrupt
from .show import footer, table_header, table_row
from ..wings import wing
from ..batching.capacity import SweepPlan, add_prediction, parse_sweep, run_sweep, write_sweep
from ..batching.live import run_load
from ..batching.service_model import service_model_from_runs
from ..batching.simulator import sweep
from ..plots.batching import sweep_record_figure


WINDOW_S = number("--window-s", 0, 3_600, "s", lo_open=True)
# 200 %: three non-negative windows always lie within 200 % of their mean (a point that settles at the third)
STABILITY = number("--stability", 0, 200, "%", lo_open=True)
MAX_WINDOWS = number("--max-windows", 3, 1_000, "windows", integer=True)
SLA_MS = number("--sla-ms", 0, 3_600_000, "ms", lo_open=True)
MAX_POINTS = number("--max-points", 1, 100, "points", integer=True)
MAX_SWEEP_VALUES = 100  # points of a listed sweep; each runs --window-s x --max-windows at most


def sweep_spec(text: str) -> str:
    """The argparse ``type`` of ``--sweep``: each listed value a finite number in its option's range, at most
    :data:`MAX_SWEEP_VALUES` of them; the text is kept (``SweepPlan`` parses its form and order)."""
    name, sep, spec = text.partition("=")
    if not sep or name not in ("rate", "concurrency") or spec == "auto":
        return text  # its form is judged by batching.capacity.parse_sweep, in one line
    shown = text if len(text) <= 40 else text[:37] + "..."
    parts = spec.split(",")
    if len(parts) > MAX_SWEEP_VALUES:
        raise OptionError(
            f"--sweep {shown}: {len(parts):,} values; at most {MAX_SWEEP_VALUES} points per sweep"
        )
    kind = RATE if name == "rate" else CONCURRENCY
    for part in parts:
        value = part.strip()
        if name == "concurrency" and value.endswith(".0"):
            value = value[:-2]  # 2.0 is a whole number of executors
        try:
            kind(value)
        except OptionError:
            what = "an integer" if name == "concurrency" else "a number"
            raise OptionError(
                f"--sweep {shown}: each {name} must be {what} {kind.range_text}, got {part[:20]!r}"
            ) from None
    return text


def add_sweep_arguments(load: argparse.ArgumentParser) -> None:
    g = load.add_argument_group("capacity sweep (--sweep)")
    g.add_argument(
        "--sweep",
        metavar="PARAM=VALUES",
        type=sweep_spec,
        help="rate=50,100,200 | rate=auto | concurrency=1,2,4: one run per point into a sweep folder "
        f"[at most {MAX_SWEEP_VALUES} values; rate {RATE.range_text}, concurrency {CONCURRENCY.range_text}]",
    )
    add_number(g, WINDOW_S, 5.0, "--sweep: seconds per measurement window (default 5)")
    add_number(
        g,
        STABILITY,
        10.0,
        "--sweep: a point is stable when the p50 and p99 of its last three windows are within "
        "this %% of their mean (default 10, perf_analyzer's rule)",
    )
    add_number(
        g,
        MAX_WINDOWS,
        10,
        "--sweep: at most this many windows per point (default 10; stability compares three): "
        "a point stops after its first three stable windows (their figures), else runs them all "
        "(the last three's figures)",
    )
    add_number(g, SLA_MS, None, "--sweep: the p99 target (the knee; rate=auto stops past it)")
    add_number(g, MAX_POINTS, 12, "--sweep rate=auto: at most this many points (default 12)")
    g.add_argument(
        "--figure",
        type=Path,
        metavar="FILE.html",
        help="--sweep: also write the latency-throughput figure (SLA, knee, simulator) as a standalone page",
    )
    g.add_argument(
        "--service",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="--sweep: profiler runs for the simulator's predicted curve (default in process: the sweep's "
        "own points, their measured service times)",
    )


def plan_from_args(args):
    parameter, values = parse_sweep(args.sweep)
    if args.arrivals not in ("poisson", "bursty"):
        raise ConfigError(
            "--sweep needs --arrivals poisson or bursty (a replayed file has its own rate)"
        )
    if values is None and args.rate is None:
        args.rate = 50.0
    if parameter == "concurrency" and args.rate is None:
        raise ConfigError("--sweep concurrency=...: give the arrival rate with --rate")
    if parameter == "concurrency" and args.url:
        raise ConfigError(
            "--sweep concurrency with --url: the server's executors are set by `workbench serve "
            "--concurrency`; sweep the rate against a server"
        )
    if args.requests is not None:
        raise ConfigError(
            "--requests: a sweep point's length is --window-s x --max-windows; leave --requests out"
        )
    return SweepPlan(
        parameter,
        values,
        window_s=args.window_s,
        max_windows=args.max_windows,
        stability_pct=args.stability,
        sla_ms=args.sla_ms,
        start_rate_rps=args.rate or 50.0,
        max_points=args.max_points,
    )


def run_sweep_command(args) -> int:
    plan = plan_from_args(args)
    start, header = wing("serve").served_sweep(args) if args.url else _in_process(args)

    def measure(value, folder: Path, watch):  # one point's run, saved in its folder
        point = argparse.Namespace(**vars(args))
        if plan.parameter == "rate":
            point.rate = value
        else:
            point.concurrency = int(value)
        # Ctrl-C in a point: its requests so far are kept (sweep.json holds the points before it)
        with kept_on_interrupt(folder, "load --sweep"):
            run = start(point, arrivals_from_args(point, None, plan.duration_s), watch)
        run.save(folder)
        return run

    out = args.out or default_folder("sweep", header["pipeline"] or "served")
    check_out(out, folder=True)  # before measuring (a name too long for a folder was exit 3)
    if args.figure is not None:
        check_out(args.figure, folder=False)
    header |= {"created": datetime.now(timezone.utc).isoformat()}
    if not args.json:
        print(
            f"sweep of {header['pipeline'] or 'served'} ({header['kind']}): {args.sweep}, up to {plan.max_windows} windows of "
            f"{plan.window_s:g} s per point, stopping once three are within {plan.stability_pct:g} %"
        )
        print(table_header())
    record = run_sweep(
        plan, measure, out, header, on_point=None if args.json else lambda p: print(table_row(p))
    )
    record = _predict(args, plan, record, out)
    if args.figure is not None:  # a standalone page: plotly.js inlined, it opens offline
        if importlib.util.find_spec("plotly") is None:
            raise ConfigError("--figure needs plotly: pip install 'plotly>=5.20'")
        title = f"{record['pipeline']} ({record['kind']}): latency vs throughput"
        tmp = args.figure.with_name(f".{args.figure.name}.tmp")
        sweep_record_figure(record, title=title).write_html(tmp, include_plotlyjs=True)
        tmp.replace(args.figure)
    if args.json:
        print(dumps(record | {"sweep_dir": str(out)}))
    else:
        print(footer(record))
        print(f"\nsweep written to {out}")
    return 0


def _in_process(args):
    batch_size_is_max(args)
    apply_threads(args)
    factory, config = factory_from_args(args), config_from_args(args)

    def start(point, arrivals, watch):
        return run_load(
            factory,
            config,
            arrivals=arrivals,
            policy=policy_from_args(point),
            drain_timeout_s=args.drain_timeout,
            timeout_s=args.timeout_s,
            watch=watch,
        )

    policy = policy_from_args(args).params()
    header = {"kind": "load", "pipeline": pipeline_name(args), "url": None, "policy": policy}
    return start, header


def _predict(args, plan, record: dict, out: Path) -> dict:
    """The simulator's curve at the measured rates for the same policy (``--service``, else the points' runs)."""
    if plan.parameter != "rate" or not record["points"]:
        return record
    if args.service:
        sources, label = list(args.service), "--service " + " ".join(map(str, args.service))
    elif record["kind"] == "load":
        sources = [out / p["run"] for p in record["points"]]
        label = "the sweep's own points (measured service times)"
    else:
        why = "a served sweep: give --service RUN_DIR... (profiler runs) for the simulator's curve"
        return record | {"prediction": {"source": None, "why": why}}
    policy = record["policy"]
    try:
        model = service_model_from_runs(sources)
        predicted = sweep(
            model,
            [p["rate_rps"] for p in record["points"]],
            [policy["max_batch_size"]],
            [policy["max_wait_ms"]],
            requests=20_000,
            concurrency=policy["concurrency"],
            seed=args.seed,
        )
    except ConfigError as exc:  # e.g. no measured batch of the largest size: said, not fatal
        record = record | {"prediction": {"source": None, "why": str(exc)}}
    else:
        record = add_prediction(record, predicted, label)
    write_sweep(out, record)
    return record
