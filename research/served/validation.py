"""The served validation: the batching simulator against ``workbench serve`` over HTTP (research).

Run by ``python research/served/validate_served.py`` (the table it writes is the
"Served" section of ``benchmarks/results/batching_validation.md``; the
conclusions are in ``docs/serving.md`` and ``benchmarks/results/served_models.md``).

Per configuration: a ``workbench serve`` child process with the configuration's
policy; a probe (``workbench load --url`` in another process, ``PROBE_S``
seconds at twice the in-process capacity) whose completed-request throughput is
the capacity *the server measures* and whose batches, timed by the server
itself, are the ``served`` service model (service times under the server's own
threading: event loop, HTTP parsing and executor sharing the GIL), together with
the batches of calibration runs at ``CALIBRATION_LOADS`` of that capacity
(other seeds), so the small batches a light load forms are measured served too
(sizes none of them formed keep the in-process threaded times). The measured
run at ``load x capacity`` is ``--rounds`` segments (default 4), each right
after one ``CALIBRATION_RUN_S`` calibration run per load, so calibration and measurement share the machine's
state (its speed drifts over tens of seconds); each segment is simulated on its
own arrivals and the latencies are pooled.

**contention** is the served model with the event loop's cost per arrival and
per response fitted from the same probe and calibration batches (``research.served.contention``), the simulator
(``research.served.simulate``) adding them back per batch; **matched** is contention with each batch size's samples taken from the
calibration run nearest the cell's load (the service times depend on how busy
the server is), where that run formed 5 or more such batches. The simulator gets
the arrival times the server saw and is compared with the server-side end to
end of the batcher (batch wait + queue wait + service, what it models); the
server's full end to end (with ingress, handoff, egress) and the client's end
to end are reported beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.batching.policy import BatchPolicy
from workbench.batching.service_model import ServiceModel, service_model_from_runs
from workbench.record import Run, load_run
from workbench_serve.process import ServeProcess

from .contention import batch_features, fit_contention, without_contention
from .phases import Phases, fit_phases
from .simulate import simulate_served

PROBE_S = 3.0
# The measured run is --rounds segments, each after one short calibration run per load: on this VM the
# pipeline's service time drifts by 10-20 % over tens of seconds (text, batch 1: 4.8 ms in a calibration,
# 5.7 ms in the measured run right after it), so calibration and measurement share the machine's state.
# Each new load-generator process tends to start at another speed level, so more rounds average more levels.
# Calibration runs at these fractions of the probed capacity (other seeds than the measured run): the
# batch sizes a light load forms get service times measured by the server itself too, not only the
# full batches of the overloaded probe.
CALIBRATION_LOADS = (0.25, 0.5, 0.75)
CALIBRATION_RUN_S = 1.0  # each calibration run (two of the phases' half-second windows)
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
SCRIPTS = str(Path(__file__).resolve().parents[2] / "scripts")
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)

from payloads import payloads_file  # noqa: E402  (scripts/payloads.py)


def _workbench(*args, timeout=600) -> dict:
    res = subprocess.run(
        [sys.executable, "-m", "workbench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )
    if res.returncode not in (0, 1):
        raise RuntimeError(
            f"workbench {args[0]} failed ({res.returncode}): {res.stderr.strip()[-500:]}"
        )
    return json.loads(res.stdout)


def _start_server(example: str, policy: BatchPolicy, threads: int, out: Path) -> ServeProcess:
    return ServeProcess(
        [
            "--example",
            example,
            "--threads",
            threads,
            "--max-batch-size",
            policy.max_batch_size,
            "--max-wait-ms",
            policy.max_wait_ms,
            "--port",
            0,
            "--out",
            out,
        ],
        env=ENV,
    )


def _as_load_run(run: Run, prefix: str) -> Run:
    """The server's requests of one client (by X-Request-Id prefix), as a load run for the service model."""
    req = run.requests[run.requests["request_id"].astype(str).str.startswith(prefix + "-")]
    st = run.stages[run.stages["request"].isin(req["request"])]
    return Run(
        meta=dict(run.meta.to_dict() if hasattr(run.meta, "to_dict") else run.meta, kind="load"),
        requests=req.reset_index(drop=True),
        stages=st.reset_index(drop=True),
    )


def served_row(example: str, threaded: ServiceModel, cfg: tuple, args, root: Path) -> dict:
    size, wait, process, load = cfg
    policy = BatchPolicy(size, wait)
    tag = f"{example}-mb{size}-w{wait:g}-{process}-{load:g}"
    payloads = payloads_file(example, root)
    server = _start_server(example, policy, args.threads, root / f"served-{tag}")
    url = server.url

    def load_url(rate, duration_s, seed, folder, *extra):
        return _workbench(
            "load",
            "--url",
            url,
            "--payloads",
            payloads,
            "--rate",
            rate,
            "--duration",
            duration_s,
            "--seed",
            seed,
            "--json",
            "--out",
            folder,
            *extra,
        )

    try:
        probe = load_url(
            round(2 * threaded.capacity_rps(size), 1), PROBE_S, args.seed, root / f"probe-{tag}"
        )
        capacity = probe["throughput_rps"]
        rate = round(load * capacity, 1)
        segments: list[tuple[Path, dict]] = []
        for r in range(args.rounds):  # interleaved: the machine's speed drifts over tens of seconds
            for i, fraction in enumerate(CALIBRATION_LOADS):
                load_url(
                    round(fraction * capacity, 1),
                    CALIBRATION_RUN_S,
                    args.seed + 1 + i + 10 * r,
                    root / f"calibration{i}-{r}-{tag}",
                )  # read back by cell_runs
            folder = root / f"client{r}-{tag}"
            segments.append(
                (
                    folder,
                    load_url(
                        rate,
                        args.duration / args.rounds,
                        args.seed + 1000 * r,
                        folder,
                        "--arrivals",
                        process,
                    ),
                )
            )
    finally:
        server.stop()
    measured, probe_run, by_load = cell_runs(root, tag, rounds=len(segments))
    calibration_runs = [probe_run, *(run for runs in by_load for run in runs)]
    fitted = fit_contention(calibration_runs)
    phases = served_phases(calibration_runs, fitted)
    models = served_models(example, threaded, load, calibration_runs, by_load, fitted, phases)
    costs = contention_costs(fitted)
    ok = pd.concat([run.requests[run.requests["ok"]] for run in measured], ignore_index=True)
    batcher_ns = (ok["batch_wait_ns"] + ok["queue_wait_ns"] + ok["service_ns"]).to_numpy()
    client_ns = np.concatenate(
        [load_run(f).requests.query("ok")["dur_ns"].to_numpy() for f, _ in segments]
    )
    lag_p99 = max(c["generator_lag"]["p99_ms"] for _, c in segments)
    gc_note = load_run(root / f"served-{tag}").meta.serving.gc
    row = {
        "example": example,
        "max_batch_size": size,
        "max_wait_ms": wait,
        "arrivals": process,
        "load": load,
        "served_capacity_rps": capacity,
        "rate_rps": rate,
        "duration_s": args.duration,
        "rounds": args.rounds,
        "requests": int(sum(len(run.requests) for run in measured)),
        "failed": int(sum((~run.requests["ok"]).sum() for run in measured)),
        "generator_lag": {"p99_ms": lag_p99},
        "client_p50_ms": float(np.percentile(client_ns, 50)) / 1e6,
        "client_p99_ms": float(np.percentile(client_ns, 99)) / 1e6,
        "server_p50_ms": float(np.percentile(ok["dur_ns"], 50)) / 1e6,
        "server_p99_ms": float(np.percentile(ok["dur_ns"], 99)) / 1e6,
        "noisy": any(c["noise"]["noisy"] for _, c in segments),
        "gc_pause_ms_max": gc_note["pause_ms_max"],
        "per_arrival_ms": fitted.per_arrival_ns / 1e6,
        "per_response_ms": fitted.per_response_ns / 1e6,
    }
    for q, pct in (("p50", 50), ("p99", 99)):
        row[f"batcher_{q}_ms"] = float(np.percentile(batcher_ns, pct)) / 1e6
    schedules = [np.sort(run.requests["arrival_ns"].to_numpy(dtype=np.int64)) for run in measured]
    row["phase_spread"] = phases.spread()
    for name, model in models.items():
        sim_ns = simulate_segments(
            model,
            schedules,
            policy,
            args.sim_replications,
            phases=phases if name == "phases" else None,
            costs=costs if name in COSTED else None,
        )
        for q, pct in (("p50", 50), ("p99", 99)):
            s, v = float(np.percentile(sim_ns, pct)) / 1e6, row[f"batcher_{q}_ms"]
            row |= {
                f"{name}_{q}_ms": s,
                f"{name}_err_{q}": (s - v) / v,
                f"{name}_pass_{q}": abs(s - v) / v <= args.goals[q],
            }
    return row


def cell_runs(
    root: Path, tag: str, rounds: int | None = None
) -> tuple[list[Run], Run, list[list[Run]]]:
    """A cell's runs as the server timed them: the measured segments, the probe, the calibrations by load.

    rounds: default, as many as the cell's ``client{r}-TAG`` folders.
    """
    if rounds is None:
        rounds = sum(1 for _ in root.glob(f"client*-{tag}"))
    served = load_run(root / f"served-{tag}")

    def part(folder: Path) -> Run:
        return _as_load_run(served, load_run(folder).meta.serving.request_id_prefix)

    measured = [part(root / f"client{r}-{tag}") for r in range(rounds)]
    by_load = [
        [part(root / f"calibration{i}-{r}-{tag}") for r in range(rounds)]
        for i in range(len(CALIBRATION_LOADS))
    ]
    return measured, part(root / f"probe-{tag}"), by_load


def contention_costs(fitted) -> dict[str, float]:
    """The fitted costs as :func:`simulate_segments` takes them."""
    return {"per_arrival_ns": fitted.per_arrival_ns, "per_response_ns": fitted.per_response_ns}


def served_phases(calibration_runs: list[Run], fitted) -> Phases:
    """The calibration runs' speed levels per half second and level-free samples (``research.served.phases``)."""
    return fit_phases(calibration_runs, fitted.per_arrival_ns, fitted.per_response_ns)


def served_models(
    example: str,
    threaded: ServiceModel,
    load: float,
    calibration_runs: list[Run],
    by_load: list[list[Run]],
    fitted,
    phases: Phases,
) -> dict[str, ServiceModel]:
    """The served table's service models (see the module docstring); sizes none formed keep ``threaded``'s times.

    ``phases`` (:func:`served_phases`) gives the phases model's samples; simulate it with its speed
    trajectories (``simulate_segments(phases=)``). The models named in ``COSTED`` are simulated with
    the fitted contention costs (``simulate_segments(costs=contention_costs(fitted))``).
    """
    served_samples = service_model_from_runs(calibration_runs, min_batches=5).samples
    costs = contention_costs(fitted)
    nearest = by_load[int(np.argmin([abs(load - x) for x in CALIBRATION_LOADS]))]
    features = pd.concat([batch_features(run.requests) for run in nearest], ignore_index=True)
    matched = {b: v for b, v in without_contention(features, **costs).items() if len(v) >= 5}
    return {
        "threaded": threaded,
        "served": ServiceModel.from_samples(
            {**threaded.samples, **served_samples}, pipeline=example
        ),
        "contention": ServiceModel.from_samples(
            {**threaded.samples, **fitted.samples}, pipeline=example
        ),
        "matched": ServiceModel.from_samples(
            {**threaded.samples, **fitted.samples, **matched}, pipeline=example
        ),
        "phases": ServiceModel.from_samples(
            {**threaded.samples, **phases.samples}, pipeline=example
        ),
    }


COSTED = ("contention", "matched", "phases")  # their samples have the contention costs taken out


def simulate_segments(
    model: ServiceModel,
    schedules: list[np.ndarray],
    policy: BatchPolicy,
    replications: int,
    ranks: np.ndarray | None = None,
    phases: Phases | None = None,
    costs: dict[str, float] | None = None,
) -> np.ndarray:
    """End-to-end latencies (ns) of ``replications`` simulations of each measured segment, pooled.

    phases: each simulation gets its own speed trajectory (seeded by segment and replication).
    costs: the contention costs the simulator adds back (:func:`contention_costs`); default none.
    """
    out = []
    for k, times in enumerate(schedules):
        for seed in range(replications if len(times) else 0):
            speed = (
                phases.trajectory(int(times[-1] - times[0]), np.random.default_rng([k, seed]))
                if phases is not None
                else None
            )
            out.append(
                simulate_served(
                    model,
                    times - times[0],
                    policy,
                    seed=seed,
                    ranks=ranks,
                    speed=speed,
                    **(costs or {}),
                )
                .requests["dur_ns"]
                .to_numpy()
            )
    return np.concatenate(out)


SERVED_MODELS = ("threaded", "served", "contention", "matched", "phases")


def served_markdown(rows: list[dict]) -> str:
    head = (
        "| example | max batch | max wait ms | arrivals | load | served capacity | rate | n | batcher p50 | "
        + " | ".join(f"{m} | err" for m in SERVED_MODELS)
        + " | batcher p99 | "
        + " | ".join(f"{m} | err" for m in SERVED_MODELS)
        + " | per arrival / response us | spread | server p50/p99 | client p50/p99 | lag p99 ms | server GC max ms | noisy |"
    )
    passed = "; ".join(
        f"{m}: p50 {sum(r[f'{m}_pass_p50'] for r in rows)}/{len(rows)}, "
        f"p99 {sum(r[f'{m}_pass_p99'] for r in rows)}/{len(rows)}"
        for m in SERVED_MODELS
    )
    lines = [
        "",
        "## Served (HTTP: workbench serve + load --url in separate processes)",
        "",
        f"Per cell, the measured run is {rows[0]['rounds']} segments of "
        f"{rows[0]['duration_s'] / rows[0]['rounds']:g} s, each right after one "
        f"{CALIBRATION_RUN_S:g}-s calibration run per calibration load (interleaved: the "
        "machine's speed drifts over tens of seconds); the simulator runs each segment and the latencies are "
        "pooled; lag p99 is the worst segment's; server GC max is the longest collection the server saw while serving the cell. "
        "Rates are fractions of the capacity the server measures (a probe at twice the in-process capacity); "
        "the simulator runs on the arrival times the server saw and is compared with the server-side end to "
        "end of the batcher (batch wait + queue wait + service). The server freezes the GC after its warm-up "
        "(`serve --gc freeze`, the default). **threaded**: the in-process threaded service model; **served**: "
        "service times the server measured itself during the probe and calibration runs at "
        f"{', '.join(f'{x:g}' for x in CALIBRATION_LOADS)} of capacity (other seeds); **contention**: the "
        "same batches with the event loop's cost per arrival and per response fitted out "
        "(`research/served/contention.py`), the simulator adding them back per batch, and each batch's "
        "dispatch gap (the time it waited, closed, with the executor free) added to its time; **matched**: as "
        "contention, with each batch size's samples from the calibration run nearest the cell's load where "
        "it formed 5 or more such batches; **phases**: as contention, with the machine's speed as a level "
        "per half second (`research/served/phases.py`): each calibration batch's time divided by its "
        "window's level, and each simulated segment given a speed trajectory of calibration runs' window "
        "levels laid end to end (whole runs drawn at random), so slow phases stay together (spread: the "
        f"levels' coefficient of variation). Passed — {passed}.",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]

    def cell(r, m, q):
        return f"{r[f'{m}_{q}_ms']:.2f} | {r[f'{m}_err_{q}'] * 100:+.0f} %{'' if r[f'{m}_pass_{q}'] else ' **miss**'}"

    for r in rows:
        lines.append(
            f"| {r['example']} | {r['max_batch_size']} | {r['max_wait_ms']:g} | {r['arrivals']} | {r['load']:.2f} | "
            f"{r['served_capacity_rps']:.0f} | {r['rate_rps']:.0f} | {r['requests']} | {r['batcher_p50_ms']:.2f} | "
            + " | ".join(cell(r, m, "p50") for m in SERVED_MODELS)
            + f" | {r['batcher_p99_ms']:.2f} | "
            + " | ".join(cell(r, m, "p99") for m in SERVED_MODELS)
            + f" | {1000 * r['per_arrival_ms']:.0f} / {1000 * r['per_response_ms']:.0f} | {r['phase_spread']:.2f} | "
            f"{r['server_p50_ms']:.2f}/{r['server_p99_ms']:.2f} | "
            f"{r['client_p50_ms']:.2f}/{r['client_p99_ms']:.2f} | {r['generator_lag']['p99_ms']:.2f} | "
            f"{r['gc_pause_ms_max']:.1f} | {'yes' if r['noisy'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"
