"""``workbench load`` (live dynamic batching under load) and ``workbench simulate`` (its queueing model)."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

from ..noise import noise_line
from ..record.meta import STATUS_TIMEOUT
from ..record import summarized
from .load_args import (
    add_batcher_arguments,
    add_continuous_arguments,
    continuous_from_args,
    schedule_keys,
    schedule_line,
    arrivals_from_args,
    batch_size_is_max,
    describe_arrivals,
    describe_load,
    policy_from_args,
    summary_json,
)
from .output import (
    add_number,
    check_out,
    default_folder,
    dumps,
    number,
    pipeline_name,
    save_measured,
    stdout_to_stderr,
)
from ..wings import absent_options, hook, wing
from .profile import (
    add_fail_on_error,
    add_pipeline_arguments,
    apply_threads,
    config_from_args,
    factory_from_args,
    failure_verdict,
    kept_on_interrupt,
    print_summary_failures,
)
from .show import print_failures
from .sweep import add_sweep_arguments, run_sweep_command
from ..batching.live import run_load
from ..analysis.budget import failure_summary, noise_summary
from ..batching.summary import format_summary, load_summary, simulation_run
from ..analysis.tokens import token_summary, token_text
from ..batching.service_model import service_model_from_runs
from ..batching.simulator import DRAWS, simulate

DURATION_S = number("--duration", 0, 7 * 86_400, "s", lo_open=True)
# what fits in memory is checked from --rate (load_args)
REQUESTS = number("--requests", 1, 10**12, "requests", integer=True)
WAIT_S = number("--drain-timeout", 0, 86_400, "s")
TIMEOUT_S = number("--timeout-s", 0, 86_400, "s", lo_open=True)


def register(subparsers) -> None:
    _register_load(subparsers)
    _register_simulate(subparsers)


def _register_load(subparsers) -> None:
    load = subparsers.add_parser(
        "load",
        help="run a pipeline behind a dynamic batcher under open-loop load",
        description="Live load: arrivals -> dynamic batcher -> pipeline, in this process.",
    )
    sources = add_pipeline_arguments(load, default_batch_size=None)
    add_batcher_arguments(load)
    add_continuous_arguments(load)
    # the serve wing's --url, --payloads, --timeout, --otel, --engine... (a served load)
    hook("serve", "add_load_arguments", absent_options("serve", "--url", "--otel"))(load, sources)
    add_number(load, DURATION_S, 10.0, "seconds of arrivals (default 10)")
    add_number(load, REQUESTS, None, "at most this many requests (default: bounded by --duration)")
    add_number(
        load,
        WAIT_S,
        10.0,
        "seconds to wait for queued requests after the last arrival (default 10)",
    )
    add_number(
        load,
        TIMEOUT_S,
        None,
        "per-call timeout of a batch's pipeline call, warm-up included (default: none); "
        "past it the batch's requests are Timeout failures, the run stops and is saved as "
        "'incomplete: timeout', exit 1",
        metavar="SECONDS",
    )
    load.add_argument("--out", type=Path, help="run folder to write (default runs/load-NAME-TIME)")
    add_fail_on_error(load)
    add_sweep_arguments(load)
    load.set_defaults(func=run_load_command)


def _register_simulate(subparsers) -> None:
    sim = subparsers.add_parser(
        "simulate",
        help="simulate the dynamic batcher from profiled service times",
        description="Discrete-event simulation of the batcher; service times from profiler runs.",
    )
    sim.add_argument(
        "--service",
        nargs="+",
        required=True,
        type=Path,
        metavar="RUN_DIR",
        help="profiler run folders of one pipeline at several --batch-size values, or load run "
        "folders (each batch's occupancy, after an idle gap and back to back)",
    )
    add_batcher_arguments(sim)
    add_number(sim, REQUESTS, 100_000, "simulated requests (default 100000)")
    add_number(sim, DURATION_S, None, "only arrivals in the first this many seconds")
    sim.add_argument(
        "--allow-mixed",
        action="store_true",
        help="pool --service runs whose fingerprints differ in more than batch_size (said in the output)",
    )
    sim.add_argument(
        "--draws",
        choices=DRAWS,
        default="independent",
        help="service times drawn each on its own (default), or in the order the --service runs "
        "measured them from a seeded start (sequence: a live load's slow spells stay spells)",
    )
    sim.add_argument(
        "--out",
        type=Path,
        help="also save the simulation as a run folder (kind simulation) for show",
    )
    sim.set_defaults(func=run_simulate_command)


def run_load_command(args) -> int:
    served = hook("serve", "served_load", lambda args: False)(args)  # checks its options
    if args.sweep:
        return run_sweep_command(args)
    if served:
        return wing("serve").run_http_load_command(args)

    policy, continuous = policy_from_args(args), continuous_from_args(args)
    batch_size_is_max(args)
    apply_threads(args)
    arrivals = arrivals_from_args(args, args.requests, args.duration)
    out = args.out or default_folder("load", pipeline_name(args))
    check_out(out, folder=True)  # before measuring
    with kept_on_interrupt(out, "load"), stdout_to_stderr(args.json):
        run = run_load(
            factory_from_args(args),
            config_from_args(args),
            arrivals=arrivals,
            policy=policy,
            drain_timeout_s=args.drain_timeout,
            timeout_s=args.timeout_s,
            continuous=continuous,
        )
    path = save_measured(run, out)  # as measured, then explained
    # --otel: spans from the recorded timestamps, after the run
    hook("serve", "otel_hook")(args, run, path)
    verdict = max(timeout_verdict(run), failure_verdict(run, args.fail_on_error, "load"))
    failed = run.summary_failures
    reported = summarized(failed, "the load report", _report_load, args, run, arrivals, policy)
    if reported is None and args.json:
        print(dumps({"run_dir": str(path)}))
    elif reported is None:
        print(f"\nrun written to {path}")
    print_summary_failures(run, "load")
    return verdict


def _report_load(args, run, arrivals, policy) -> bool:
    """The load run's summary on stdout (one JSON object with ``--json``); True once printed."""
    load = run.meta.load
    failures, noise = failure_summary(run.requests, run.stage_names), noise_summary(run.meta)
    if load.continuous is not None:  # tokens (TTFT, ITL, TPOT) and steps
        c, rps = load.continuous, load.throughput_rps
        tokens = token_summary(run.requests, run.stages, run.units)
        keys = {"tokens": tokens, "throughput_rps": rps, "continuous": c}
        keys |= {"requests": load.requests, "failed": load.failed}
        what = (
            f"{describe_arrivals(arrivals)}continuous batching max_num_seqs={c['max_num_seqs']} "
            f"max_batched_tokens={c['max_batched_tokens']} chunk={c['chunk_tokens'] or 'whole prompts'}"
        )
        steps = (
            f"{load.requests} requests, {load.failed} failed, "
            + (f"{rps:.1f} req/s; " if rps is not None else "")
            + f"{c['steps']} steps of {c['mean_running'] or 0:.1f} sequences and "
            f"{c['mean_step_tokens'] or 0:.1f} tokens on average"
        )
        lines = ["\n".join(token_text(tokens)), steps]
    else:
        summary, lag = load_summary(run.requests, policy.concurrency), load.generator_lag_ms
        keys = summary_json(summary, {"generator_lag_ms": lag} | schedule_keys(load))
        what = describe_load(arrivals, policy)
        late = (
            f"generator lag: worst {lag:.3f} ms, p99 {load.generator_lag_p99_ms:.3f} ms, "
            f"{load.late_requests} requests more than {load.late_threshold_ms:g} ms late"
        )
        lines = [format_summary(summary), late, schedule_line(load)]
    if args.json:
        print(dumps(keys | {"failures": failures, "noise": noise, "run_dir": str(run.path)}))
        return True
    print(f"{run.meta.pipeline} under load: {what}")
    print(noise_line(noise))
    print("\n".join(lines))
    print_failures({"failures": failures}, sys.stdout)
    print(f"\nrun written to {run.path}")
    return True


def timeout_verdict(run) -> int:
    """1 (a measured failure) with one line on stderr naming the stage that hung, when a call timed out."""
    if run.meta.status != STATUS_TIMEOUT:
        return 0
    req = run.requests
    hung = req[req["error_type"] == "Timeout"]
    if len(hung):
        first = hung.iloc[0]
        where = f"batch {first['batch']} ({int((req['batch'] == first['batch']).sum())} requests)"
        message = first["error_message"]
    else:  # a warm-up call: no request was measured
        first = next(f for f in run.meta.load.warmup_failures if f["type"] == "Timeout")
        where, message = "executor warm-up (no request measured)", first["message"]
    print(
        f"workbench load: {where} timed out: {message}; the run stopped and was saved as "
        "'incomplete: timeout'",
        file=sys.stderr,
    )
    return 1


def run_simulate_command(args) -> int:
    policy = policy_from_args(args)
    arrivals = arrivals_from_args(args, args.requests, args.duration)
    if args.out is not None:
        check_out(args.out, folder=True)
    model = service_model_from_runs(args.service, allow_mixed=args.allow_mixed)
    sim = simulate(model, arrivals, policy, seed=args.seed, draws=args.draws)
    summary = load_summary(sim.requests, policy.concurrency)
    saved = None
    if args.out is not None:  # checked before simulating (check_out)
        created = datetime.now(timezone.utc).isoformat()
        sources = [str(p) for p in args.service]
        saved = simulation_run(sim, model.pipeline, sources, created).save(args.out)
    if args.json:
        sim_keys = {k: getattr(sim, k) for k in ("stable", "capacity_rps", "rate_rps")}
        mixed = {"mixed": model.describe()["mixed"]} if model.mixed else {}
        run_dir = {"run_dir": str(saved)} if saved is not None else {}
        print(dumps(summary_json(summary, sim_keys) | mixed | run_dir))
        return 0
    print(f"simulated {model.pipeline or 'pipeline'}: {describe_load(arrivals, policy)}")
    if model.mixed:
        print(
            "MIXED service runs pooled (--allow-mixed): "
            + "; ".join(f"{f} {a!r} vs {b!r}" for f, a, b in model.mixed)
        )
    print(format_summary(summary))
    unstable = (
        f"UNSTABLE: arrival rate {sim.rate_rps:.1f} req/s >= capacity, the queue grows "
        f"without bound; figures are those of the {summary['requests']} simulated requests"
    )
    print(
        f"capacity {sim.capacity_rps:.1f} req/s at batch size {policy.max_batch_size}; "
        + ("stable" if sim.stable else unstable)
    )
    if saved is not None:
        print(f"\nrun written to {saved}")
    return 0
