"""``workbench profile``: measure a pipeline and write a run folder."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from pathlib import Path

from ..config import BATCH_SIZES, PRECISIONS, THREAD_COUNTS, PipelineConfig, option_value
from ..device import require_torch
from ..errors import ConfigError
from ..guard import Interrupted
from ..memory import describe
from ..pipeline import load_factory
from ..record.meta import STATUS_TIMEOUT, ProfileMeta
from ..record import save_meta, summarized
from ..runner import (
    DEFAULT_MAX_DURATION_S,
    DEFAULT_MIN_DURATION_S,
    DEFAULT_REQUESTS,
    DEFAULT_TRACED,
    DEFAULT_UTILIZATION,
    Pace,
    profile,
)
from ..timing import SYNC_POLICIES
from .output import (
    ProgressBar,
    add_number,
    check_out,
    default_folder,
    dumps,
    number,
    pipeline_name,
    ranged,
    save_measured,
    stdout_to_stderr,
)
from .show import print_budget, print_failure_lines, print_failure_sections
from ..examples import factory
from ..analysis.budget import all_failed, any_failed, budget, failure_summary, records_summary
from ..audit.rules import LOW_UTILIZATION, TIME_TAIL_RATIO, service
from ..wings import absent_options, hook

PROFILE_REQUESTS = number("--requests", 1, 10**8, "requests", integer=True)
WARMUP = number("--warmup", 0, 10**7, "requests", integer=True)
TRACED = number("--traced", 0, 10**4, "requests", integer=True)
TIMEOUT = number("--timeout-s", 0, 7 * 86_400, "s", lo_open=True)
MAX_DURATION = number("--max-duration", 0, 7 * 86_400, "s", lo_open=True)
RATE = number("--rate", 0, 10**7, "requests/s", lo_open=True)
UTILIZATION = number("--utilization", 0, 0.99, "", lo_open=True)
MIN_DURATION = number("--min-duration", 0, 7 * 86_400, "s")
BATCH_SIZE = ranged("--batch-size", BATCH_SIZES)
THREADS = ranged("--threads", THREAD_COUNTS)
PHASES = {"timing": "closed loop", "paced": "paced"}  # the runner's progress phases, as drawn


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "profile",
        help="profile a pipeline stage by stage and write a run folder",
        description="Profile a pipeline: a timing run (percentiles) and a traced run (torch.profiler). "
        "By default the timing run is paced: --requests back to back (the service-time reference), "
        f"then requests on a Poisson schedule at {DEFAULT_UTILIZATION:g} of the capacity they "
        f"measured for at least --min-duration ({DEFAULT_MIN_DURATION_S:g} s) and until the p99 "
        "interval is narrow, timed from their due times; --closed-loop is the quick back-to-back run.",
    )
    add_pipeline_arguments(p)
    add_number(
        p,
        PROFILE_REQUESTS,
        DEFAULT_REQUESTS,
        f"closed-loop requests (pipeline calls, back to back), default {DEFAULT_REQUESTS} (bounds "
        "the p99 interval): the capacity and service-time reference of a paced run, the whole "
        "timing run with --closed-loop",
    )
    add_number(p, WARMUP, 10, "warm-up requests reported apart, default 10")
    add_number(
        p,
        TRACED,
        DEFAULT_TRACED,
        f"requests in the separate traced run (0: no trace), default {DEFAULT_TRACED} (the "
        "slowest 3 against the median 10)",
    )
    p.add_argument(
        "--sync",
        choices=SYNC_POLICIES,
        default="stage",
        help="CUDA synchronization policy (see docs)",
    )
    add_number(
        p,
        TIMEOUT,
        None,
        "per-request timeout (default: none); a request past it is a Timeout failure, "
        "the run stops and is saved as 'incomplete: timeout', exit 1",
        metavar="SECONDS",
    )
    add_number(
        p,
        MAX_DURATION,
        DEFAULT_MAX_DURATION_S,
        f"stop measuring after this many seconds, whichever of --requests and this comes "
        f"first (default {DEFAULT_MAX_DURATION_S:g})",
        metavar="SECONDS",
    )
    add_pacing_arguments(p)
    add_fail_on_error(p)
    _add_record_and_output_arguments(p)
    p.set_defaults(func=run)


def _add_record_and_output_arguments(p) -> None:
    """What the runs record beside the timings (stacks, shapes, module names) and where it goes."""
    p.add_argument(
        "--no-stacks",
        dest="stacks",
        action="store_false",
        help="the traced run records no Python call stacks inside stages (with_stack, on by default)",
    )
    p.add_argument(
        "--no-sample-stacks",
        dest="sample_stacks",
        action="store_false",
        help="the timing run samples no Python stacks (on by default: a thread samples every request's "
        "stack every 5 ms, so the slow requests' own frames explain the tail)",
    )
    p.add_argument(
        "--record-shapes", action="store_true", help="the traced run records operator input shapes"
    )
    p.add_argument(
        "--with-modules", action="store_true", help="the traced run records nn.Module names"
    )
    p.add_argument(
        "--out", type=Path, help="run folder to write (default runs/NAME-DEVICE-bsN-PRECISION-TIME)"
    )
    p.add_argument("--json", action="store_true", help="print the budget as one JSON object")
    hook("serve", "add_profile_arguments", absent_options("serve", "--otel"))(p)


def add_pacing_arguments(p: argparse.ArgumentParser) -> None:
    paced = p.add_mutually_exclusive_group()
    add_number(
        paced,
        RATE,
        None,
        "pace the measured requests: Poisson arrivals at this rate, after the --requests closed-loop "
        "ones (kept as the service-time reference), so idle gaps, background threads and periodic "
        "jobs act on them as in production",
    )
    add_number(
        paced,
        UTILIZATION,
        None,
        "pace at this fraction of the capacity the closed-loop requests measured (default "
        f"{DEFAULT_UTILIZATION:g} when neither --rate nor --closed-loop is given)",
    )
    paced.add_argument(
        "--closed-loop",
        action="store_true",
        help="the quick run: only the --requests closed-loop requests, back to back (no pacing, "
        "so no tail from time: no periodic job, idle gap or background thread is seen)",
    )
    add_number(
        p,
        MIN_DURATION,
        DEFAULT_MIN_DURATION_S,
        f"a paced run goes on at least this long, then until its p99 interval is within 20 %% "
        f"(or --max-duration); it sees periodic spikes of periods up to about a tenth of it "
        f"(default {DEFAULT_MIN_DURATION_S:g}: up to about {DEFAULT_MIN_DURATION_S / 10:g} s; "
        "benchmarks/results/periodic.md) and wider than the time between two requests",
        metavar="SECONDS",
    )


def pace_from_args(args) -> Pace | None:
    """The schedule --rate or --utilization asks for (default: the default utilization), or None."""
    if args.closed_loop:
        return None
    utilization = DEFAULT_UTILIZATION if args.rate is None and args.utilization is None else None
    return Pace(
        rate_rps=args.rate,
        utilization=args.utilization or utilization,
        min_duration_s=args.min_duration,
    )


def add_fail_on_error(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-on-error",
        action="store_true",
        help="exit 1 when any request failed (warm-up and traced included); "
        "without it, exit 1 only when every measured request failed",
    )


def add_pipeline_arguments(p: argparse.ArgumentParser, default_batch_size: int = 1):
    """The pipeline's options; returns the group of its sources (--example, --pipeline)."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--example", help="a shipped example: tabular, text, image or generate")
    src.add_argument("--pipeline", help="your factory: MODULE:FUNCTION or path/to/file.py:FUNCTION")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    add_number(p, BATCH_SIZE, default_batch_size, "items per pipeline call")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a free option for the factory (value parsed as JSON when it can be); repeatable",
    )
    add_number(
        p,
        THREADS,
        None,
        "torch CPU threads for the run (default: torch's own "
        "choice); measure with the thread count your server uses",
    )
    return src


def apply_threads(args) -> None:
    """Set --threads in the calling thread (the runner sets it in each stage thread)."""
    if args.threads is None:
        return
    require_torch().set_num_threads(args.threads)


def config_from_args(args) -> PipelineConfig:
    options = {}
    for pair in args.option:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {pair!r}: expected KEY=VALUE")
        options[key] = option_value("--option", key, value)
    return PipelineConfig(
        device=args.device,
        batch_size=args.batch_size,
        precision=args.precision,
        options=options,
        threads=args.threads,
    )


def factory_from_args(args):
    if args.example is not None:  # --example '' is a name to refuse, not a missing option
        return factory(args.example)
    return load_factory(args.pipeline)


def run(args) -> int:
    config = config_from_args(args)
    progress = None
    if sys.stderr.isatty():  # a bar on a terminal: requests, then wall time against --min-duration
        bar = ProgressBar()
        progress = lambda done, total, phase: bar(PHASES.get(phase, phase), done, total)
    apply_threads(args)
    factory = factory_from_args(args)
    device = args.device.replace(":", "")
    out = args.out or default_folder(
        pipeline_name(args), device, f"bs{args.batch_size}", args.precision
    )
    check_out(out, folder=True)  # before measuring: a run is never measured to be thrown away
    # what stages print never mixes with the JSON object
    with kept_on_interrupt(out), stdout_to_stderr(args.json):
        result = profile(  # saved as measured, before any summary (on_recorded)
            factory,
            config,
            requests=args.requests,
            warmup=args.warmup,
            traced=args.traced,
            sync=args.sync,
            timeout_s=args.timeout_s,
            max_duration_s=args.max_duration,
            stacks=args.stacks,
            shapes=args.record_shapes,
            modules=args.with_modules,
            sample_stacks=args.sample_stacks,
            on_recorded=lambda run: save_measured(run, out),
            pace=pace_from_args(args),
            progress=progress,
        )
    if progress is not None:
        print(file=sys.stderr)
    path, failed = saved_summaries(result), result.summary_failures
    # --otel: spans from the recorded timestamps, after the run
    hook("serve", "otel_hook")(args, result, path)
    report = summarized(failed, "the budget", budget, result)
    if args.json:
        print(dumps((report or {}) | {"run_dir": str(path)}))
    else:
        if report is not None:
            summarized(failed, "printing the budget", print_budget, report, sys.stdout)
        print_pacing(result.meta.timing.pacing)
        print(f"\nrun written to {path}")
    verdict = max(guard_verdict(result), failure_verdict(result, args.fail_on_error, "profile"))
    print_summary_failures(result, "profile")
    return verdict


def print_pacing(pacing: dict | None) -> None:
    """A paced run's schedule against its closed-loop reference, and what a gap between them means."""
    if pacing is None:
        return
    closed, ratio = pacing["closed_loop"], pacing["p99_over_closed_loop"]
    load = pacing["rate_rps"] / pacing["capacity_rps"] if pacing["capacity_rps"] else None
    at = f" ({load:.0%} of the closed-loop capacity)" if load is not None else ""
    print(
        f"\npaced at {pacing['rate_rps']:.4g} requests/s{at} for {pacing['wall_s']:.3g} s: "
        f"p99 {pacing['paced']['p99_ms']:.4g} ms from the due time, "
        f"{service(pacing)['p99_ms']:.4g} ms from the send, against {closed['p99_ms']:.4g} ms "
        f"closed loop ({closed['count']} requests back to back); send lag p99 "
        f"{pacing['lag_p99_ms']:.3g} ms (the wait behind the request before: unattributed above)"
    )
    if load is not None and load <= LOW_UTILIZATION and (ratio or 0.0) >= TIME_TAIL_RATIO:
        print(
            "the tail comes from time, not from the request's own work (workbench audit names where)"
        )


def saved_summaries(run) -> Path:
    """The summaries computed since ``run`` was saved written into its run.json; the run's path."""
    if isinstance(run.meta, ProfileMeta) and run.meta.stacks is not None:
        summarized(run.summary_failures, "writing the stack summary", save_meta, run)
    return run.path


def print_summary_failures(run, command: str) -> None:
    """One line on stderr per summary of ``run`` that raised (the run is saved; its exit code stands)."""
    debug = os.environ.get("WORKBENCH_DEBUG") == "1"
    for failure in run.summary_failures:
        if debug:
            traceback.print_exception(failure.error, file=sys.stderr)
        print(
            f"workbench {command}: {failure}; the run is saved at {run.path} without it "
            "(a bug in the workbench: please report it)",
            file=sys.stderr,
        )


def failure_verdict(run, fail_on_error: bool, command: str) -> int:
    """1 (a measured failure) when every measured request failed, or any failed with --fail-on-error;
    the failures printed to stderr per stage."""
    requests, order = run.requests, list(run.meta.stages)
    if all_failed(requests):
        print(
            f"workbench {command}: every measured request failed ({int((~requests['warmup']).sum())}):",
            file=sys.stderr,
        )
        lines = summarized(
            run.summary_failures, "the failure summary", failure_summary, requests, order
        )
        print_failure_lines(lines or {}, sys.stderr)
        return 1
    load = getattr(run.meta, "load", None)  # load and served runs
    trace = run.meta.trace if isinstance(run.meta, ProfileMeta) else None
    warm_executors = load.warmup_failures if load else []
    if fail_on_error and (any_failed(requests, trace) or warm_executors):
        print(f"workbench {command}: requests failed (--fail-on-error):", file=sys.stderr)
        traced = trace.failures if trace else []

        def sections():
            return [
                ("measured", failure_summary(requests, order, warmup=False)),
                ("warm-up", failure_summary(requests, order, warmup=True)),
                ("traced run", records_summary(traced)),
                ("executor warm-up", records_summary(warm_executors)),
            ]

        found = summarized(run.summary_failures, "the failure summary", sections) or []
        print_failure_sections(found, sys.stderr, indent="  ")
        return 1
    return 0


@contextlib.contextmanager
def kept_on_interrupt(out: Path, command: str = "profile"):
    """On Ctrl-C during the block, keep what was measured at ``out`` (or say nothing was), then stop."""
    try:
        yield
    except Interrupted as stop:
        run = stop.run
        if run is None or len(run.requests) == 0:
            what = "interrupted before any request finished; no run written"
        else:  # saved as measured (profile's on_recorded), or now
            path = saved_summaries(run) if run.path is not None else save_measured(run, out)
            what = (
                f"interrupted after {len(run.requests)} requests; run written to {path} "
                f"(status: {run.meta.status})"
            )
        print(f"workbench {command}: {what}", file=sys.stderr)
        if run is not None and run.path is not None:
            print_summary_failures(run, command)
        raise


def guard_verdict(run) -> int:
    """Warn about a suspected leak; 1 (a measured failure) when a request timed out, else 0."""
    memory = run.meta.memory
    if memory and memory.leak_suspected:
        leak = summarized(run.summary_failures, "the memory summary", describe, memory.to_dict())
        if leak is not None:
            print(f"workbench profile: warning: {leak}", file=sys.stderr)
    if run.meta.status != STATUS_TIMEOUT:
        return 0
    failure = run.requests.iloc[-1]
    if failure["ok"]:  # the timing run finished; a stage of the traced run hung
        traced = ((run.meta.trace.failures if run.meta.trace else None) or [{}])[0]
        what = (
            f"{traced.get('message', 'the traced run timed out')}; the timing run is kept and "
            "the run was saved as 'incomplete: timeout' (no trace)"
        )
    else:
        what = (
            f"request {failure['request']} timed out: {failure['error_message']}; the run "
            "stopped and was saved as 'incomplete: timeout'"
        )
    print(f"workbench profile: {what}", file=sys.stderr)
    return 1
