"""The generative explorer's tables: continuous batching simulated over arrival rates, beside live runs.

Input: continuous ``load`` runs of one generative pipeline (``load --max-num-seqs ...``: each holds
``load.continuous.step_model``, the step model fitted to its own steps, and its requests' tokens).
Per precision, :func:`recorded_setup` takes the step model of the run at the highest rate (the most
batched steps) and the request lengths of that run; :func:`simulated_curve` runs
:func:`~.continuous.simulate_continuous` at a grid of rates with them; :func:`measured_points` reads
the same figures off the live runs. One row per rate or run, the same columns for both
(:data:`POINT_COLUMNS`): ``throughput_rps`` (finished requests over the first arrival to the last
token), ``ttft_p99_ms``, ``itl_p99_ms`` and ``goodput`` (:func:`~.continuous.goodput`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..analysis.stats import NS_PER_MS, percentile_ns
from ..analysis.tokens import token_requests, unit_gaps
from ..errors import ConfigError
from ..units import ns_to_s
from .arrivals import Arrivals
from .continuous import ContinuousPolicy, StepTimes, goodput, simulate_continuous

POINT_COLUMNS = ["rate_rps", "throughput_rps", "ttft_p99_ms", "itl_p99_ms", "goodput"]
POLICY = tuple(ContinuousPolicy().params())  # the policy columns of measured_points


@dataclass(frozen=True)
class Setup:
    """What the simulator needs of one precision: the step model, request lengths, the run it came from."""

    times: StepTimes
    lengths: list[tuple[int, int]]
    run: str


def token_point(requests, stages, units, *, ttft_ms: float, tpot_ms: float) -> dict:
    """:data:`POINT_COLUMNS` but ``rate_rps`` of one run's tables (live or simulated)."""
    per = token_requests(requests, stages, units)
    ok = requests[requests["ok"]]
    span = int((ok["start_ns"] + ok["dur_ns"]).max() - requests["start_ns"].min()) if len(ok) else 0
    return {
        "throughput_rps": len(per) / ns_to_s(span) if span > 0 else 0.0,
        "ttft_p99_ms": percentile_ns(per["ttft_ns"], 99) / NS_PER_MS,
        "itl_p99_ms": percentile_ns(unit_gaps(requests, units)["itl_ns"], 99) / NS_PER_MS,
        "goodput": goodput(per, ttft_ms, tpot_ms),
    }


def simulated_curve(
    setup: Setup,
    policy: ContinuousPolicy,
    rates_rps: Sequence[float],
    *,
    requests: int,
    ttft_ms: float,
    tpot_ms: float,
    seed: int = 0,
) -> pd.DataFrame:
    """:data:`POINT_COLUMNS`, one row per rate: ``requests`` seeded Poisson arrivals at that rate, each
    with the setup's lengths in turn, through the simulator under ``policy``."""
    lengths = [setup.lengths[i % len(setup.lengths)] for i in range(requests)]
    rows = []
    for rate in rates_rps:
        arrivals = Arrivals("poisson", rate_rps=float(rate), count=requests, seed=seed).times_ns()
        sim = simulate_continuous(arrivals, lengths, setup.times, policy)
        point = token_point(sim.requests, sim.stages, sim.units, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
        rows.append({"rate_rps": float(rate)} | point)
    return pd.DataFrame(rows, columns=POINT_COLUMNS)


def measured_points(runs: Sequence, *, ttft_ms: float, tpot_ms: float) -> pd.DataFrame:
    """:data:`POINT_COLUMNS` of continuous load runs (``Run`` objects), with ``precision``,
    ``max_num_seqs``, ``max_batched_tokens``, ``chunk_tokens`` and ``run`` (its label), by rate."""
    rows = []
    for run in runs:
        rate, continuous = _recorded(run)
        point = token_point(run.requests, run.stages, run.units, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
        rows.append(
            {"rate_rps": rate}
            | point
            | {"precision": run.meta.config.precision, "run": _name(run)}
            | {k: continuous[k] for k in POLICY}
        )
    table = pd.DataFrame(rows, columns=[*POINT_COLUMNS, "precision", "run", *POLICY])
    return table.sort_values(["precision", "rate_rps"], kind="stable", ignore_index=True)


def recorded_setup(runs: Sequence) -> dict[str, Setup]:
    """Per precision of ``runs`` (continuous load runs): the :class:`Setup` of its highest-rate run,
    its lengths ``(prompt tokens, tokens out)`` per finished request (the prompt from the run's
    ``prompt_tokens`` option)."""
    if not runs:
        raise ConfigError("no continuous load runs given: record some (load --max-num-seqs ...)")
    best: dict[str, tuple[float, object]] = {}
    for run in runs:
        precision, rate = run.meta.config.precision, _recorded(run)[0]
        if precision not in best or rate > best[precision][0]:
            best[precision] = (rate, run)
    setups = {}
    for precision, (_, run) in sorted(best.items()):
        prompt = int(run.meta.config.options["prompt_tokens"])
        answers = run.units.groupby("request")["unit"].count()
        cont = run.meta.load.continuous
        times = StepTimes.from_dict(cont["step_model"], cont.get("step_noise_ns", ()))
        setups[precision] = Setup(times, [(prompt, int(n)) for n in answers], _name(run))
    return setups


def _recorded(run) -> tuple[float, dict]:
    """``(arrival rate, load.continuous)`` of a continuous load run at a rate with its prompt length,
    or a ConfigError naming the run."""
    load = getattr(run.meta, "load", None)  # load and served runs
    continuous = load.continuous if load is not None else None
    rate = (load.arrivals or {}).get("rate_rps") if load is not None else None
    if continuous is None or rate is None or "prompt_tokens" not in run.meta.config.options:
        raise ConfigError(
            f"{_name(run)}: not a continuous load run at a rate with a prompt_tokens option; record "
            "one: load --example generate --max-num-seqs 8 --option prompt_tokens=32 --rate R --out DIR"
        )
    return float(rate), continuous


def _name(run) -> str:
    return run.path.name if run.path is not None else run.label
