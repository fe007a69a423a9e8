"""Continuous batching at the token level, as vLLM's scheduler does it: the rule and its simulator.

The rule (:class:`Scheduler`, shared with the live run of ``continuous_live``):

1. **Admit** arrived requests, in arrival order, while fewer than ``max_num_seqs`` run.
2. **Decode first**: every running sequence past its prompt takes one token of the step's budget of
   ``max_batched_tokens``.
3. **Prefill** with what is left, in admission order: ``min(prompt left, chunk_tokens, budget
   left)`` tokens each (chunked prefill); without ``chunk_tokens`` a prompt goes whole or waits for
   a step with room (one longer than ``max_batched_tokens`` is refused).
4. **Emit** at the step's end a token per decoded sequence and the first token of each prompt
   finished; a sequence with all its ``answer`` tokens leaves.

A step's time is :class:`StepTimes`, a linear model fitted to measured steps. The simulator writes a
live run's tables, so :mod:`workbench.analysis.tokens` gives TTFT, ITL and TPOT of both alike, and
:func:`goodput` judges them against bounds (vLLM's serving benchmark's goodput). No command
simulates it: no run folder holds each request's prompt and answer lengths.

The generative explorer's tables: :func:`recorded_setup`, then :func:`simulated_curve` and
:func:`measured_points` (``throughput_rps``: finished requests over first arrival to last token).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..analysis.stats import NS_PER_MS, percentile_ns
from ..analysis.tokens import meets_bounds, token_requests, unit_gaps
from ..errors import ConfigError
from ..record.tables import build_tables, build_units, request_row
from ..timing import StageFailure
from ..units import ns_to_s
from .arrivals import Arrivals
from .summary import LAGGED_COLUMNS

STREAM_STAGE = "generate"  # the stage the units belong to, in the simulated and the live run
STAGES = ["queue_wait", STREAM_STAGE]
DRAINED = StageFailure(
    STREAM_STAGE, "DrainTimeout", "not finished before the run's drain deadline (drain_timeout_s)"
)
# the features of a step, in StepTimes' coefficient order
FEATURES = ("decode_step", "decode_seqs", "context_tokens", "prefill_chunks", "prefill_tokens")


@dataclass(frozen=True)
class ContinuousPolicy:
    """``max_num_seqs`` running sequences at most, ``max_batched_tokens`` tokens a step (decodes and
    prefill chunks), ``chunk_tokens`` prompt tokens of one sequence a step (None: whole prompts)."""

    max_num_seqs: int = 8
    max_batched_tokens: int = 512
    chunk_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_batched_tokens", "chunk_tokens"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and value >= 1):
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if self.max_batched_tokens < self.max_num_seqs:
            raise ConfigError(
                f"max_batched_tokens ({self.max_batched_tokens}) must be at least max_num_seqs "
                f"({self.max_num_seqs}): every running sequence decodes one token a step"
            )

    def params(self) -> dict:
        return asdict(self)


@dataclass
class Seq:
    """One request in the scheduler: its prompt and answer lengths, what is done of them."""

    request: int
    arrival_ns: int
    prompt: int
    answer: int
    prefilled: int = 0
    emitted: int = 0
    admitted_ns: int | None = None
    batch: int = -1  # the step it joined the running batch before (-1: never admitted)
    handle: object = None  # the live run's sequence (its step API's), None when simulated


@dataclass
class Step:
    """One step's work: the sequences decoding, and ``(sequence, prompt tokens)`` prefill chunks."""

    decode: list[Seq]
    prefill: list[tuple[Seq, int]]

    def features(self) -> tuple[int, ...]:
        """The step's :data:`FEATURES` (context: the decoded sequences' tokens so far)."""
        context = sum(s.prompt + s.emitted for s in self.decode)
        chunks = sum(n for _, n in self.prefill)
        return (int(bool(self.decode)), len(self.decode), context, len(self.prefill), chunks)


@dataclass
class Scheduler:
    """The rule of the module docstring over a queue of arrived requests and the running batch."""

    policy: ContinuousPolicy
    waiting: deque = field(default_factory=deque)
    running: list[Seq] = field(default_factory=list)
    steps: int = 0  # steps advanced

    def arrive(self, seq: Seq) -> None:
        if self.policy.chunk_tokens is None and seq.prompt > self.policy.max_batched_tokens:
            raise ConfigError(
                f"request {seq.request}: a prompt of {seq.prompt} tokens does not fit "
                f"max_batched_tokens ({self.policy.max_batched_tokens}) without chunked prefill; "
                "set chunk_tokens or raise max_batched_tokens"
            )
        self.waiting.append(seq)

    def admit(self, now_ns: int) -> list[Seq]:
        """Step 1: the requests that joined the running batch at ``now_ns``."""
        joined = []
        while self.waiting and len(self.running) < self.policy.max_num_seqs:
            seq = self.waiting.popleft()
            seq.admitted_ns, seq.batch = now_ns, self.steps
            self.running.append(seq)
            joined.append(seq)
        return joined

    def plan(self) -> Step:
        """Steps 2 and 3: the next step's decodes and prefill chunks."""
        decode = [s for s in self.running if s.prefilled == s.prompt]
        budget = self.policy.max_batched_tokens - len(decode)
        chunk = self.policy.chunk_tokens
        prefill = []
        for s in self.running:
            left = s.prompt - s.prefilled
            if not left or budget <= 0:
                continue
            n = min(left, budget) if chunk is None else min(left, chunk, budget)
            if chunk is None and n < left:
                break  # a whole prompt waits for a step with room; later ones wait behind it
            prefill.append((s, n))
            budget -= n
        return Step(decode, prefill)

    def advance(self, step: Step) -> tuple[list[Seq], list[Seq]]:
        """Step 4: ``(sequences that emitted a token, sequences that left)`` after ``step`` ran."""
        self.steps += 1
        emitted = list(step.decode)
        for s, n in step.prefill:
            s.prefilled += n
            if s.prefilled == s.prompt:
                emitted.append(s)
        for s in emitted:
            s.emitted += 1
        left = [s for s in emitted if s.emitted >= s.answer]
        if left:
            self.running = [s for s in self.running if s.emitted < s.answer]
        return emitted, left


@dataclass(frozen=True)
class StepTimes:
    """A step's time in ns: ``coef_ns`` times the step's :data:`FEATURES`, plus a residual drawn
    from ``noise_ns`` (quantiles of measured minus modelled: the tail that sets p99; added, as an
    interrupt costs the same whatever the step), after ``between_ns``, the loop's own time."""

    coef_ns: tuple[float, ...]
    between_ns: float = 0.0
    noise_ns: tuple[float, ...] = ()

    def step_ns_of(self, features: Sequence[int], rng: np.random.Generator | None = None) -> int:
        ns = float(np.dot(self.coef_ns, features))
        if self.noise_ns and rng is not None:
            ns += self.noise_ns[int(rng.integers(len(self.noise_ns)))]
        return max(int(round(ns)), 0)

    def describe(self) -> dict:
        coef = {f"{name}_ns": float(c) for name, c in zip(FEATURES, self.coef_ns)}
        return coef | {"between_ns": float(self.between_ns)}

    @classmethod
    def from_dict(cls, described: dict, noise_ns: Sequence[float] = ()) -> "StepTimes":
        """The model :meth:`describe` wrote (``load.continuous.step_model``, ``step_noise_ns``)."""
        coef = tuple(float(described[f"{name}_ns"]) for name in FEATURES)
        return cls(coef, float(described.get("between_ns", 0.0)), tuple(map(float, noise_ns)))


ROBUST_ROUNDS = 50  # reweighted rounds of the median fit
RESIDUAL_FLOOR_NS = 1.0  # residuals under 1 ns weigh as 1 ns (no division by zero)
NOISE_QUANTILES = 100  # the residuals kept: measured - modelled at quantiles (i + 0.5) / 100


def fit_step_times(steps: pd.DataFrame) -> StepTimes:
    """The step model of measured steps (``continuous_live.profile_steps``, or a live run's):
    ``dur_ns`` against the :data:`FEATURES` columns, coefficients >= 0. Each shape counts by its
    median and the fit is least absolute deviations (reweighted least squares), so steps a busy
    machine preempted do not pull it; a feature always 0 gets 0. Every step's residual goes into
    ``noise_ns``, where the preempted steps count again; a live run's steps (``start_ns``) also
    give ``between_ns``."""
    shapes = steps.groupby(list(FEATURES), as_index=False)["dur_ns"].median()
    x = shapes[list(FEATURES)].to_numpy("float64")
    y = shapes["dur_ns"].to_numpy("float64")
    coef = _nonneg_fit(x, y, np.ones(len(y)))
    for _ in range(ROBUST_ROUNDS):
        weight = 1.0 / np.maximum(np.abs(y - x @ coef), RESIDUAL_FLOOR_NS)
        coef = _nonneg_fit(x, y, weight)
    residual = (
        steps["dur_ns"].to_numpy("float64") - steps[list(FEATURES)].to_numpy("float64") @ coef
    )
    at = (np.arange(NOISE_QUANTILES) + 0.5) / NOISE_QUANTILES
    noise = np.quantile(residual, at, method="inverted_cdf") if len(residual) else ()
    return StepTimes(tuple(float(c) for c in coef), _between_ns(steps), tuple(map(float, noise)))


def _between_ns(steps: pd.DataFrame) -> float:
    """Median ns from a step's end to the next's start when the loop did not wait for arrivals."""
    if "start_ns" not in steps or len(steps) < 2:
        return 0.0
    start, dur = steps["start_ns"].to_numpy(), steps["dur_ns"].to_numpy()
    gap = (start[1:] - start[:-1] - dur[:-1])[steps["decode_seqs"].to_numpy()[1:] > 0]
    return float(np.median(gap)) if len(gap) else 0.0


def _nonneg_fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Weighted least squares, a negative coefficient's feature dropped and the rest refit."""
    root = np.sqrt(weight)[:, None]
    used = np.flatnonzero(x.any(axis=0))
    coef = np.zeros(x.shape[1])
    while used.size:
        fit = np.linalg.lstsq(x[:, used] * root, y * root[:, 0], rcond=None)[0]
        if (fit >= 0).all():
            coef[used] = fit
            break
        used = np.delete(used, int(np.argmin(fit)))
    return coef


@dataclass
class ContinuousRun:
    """A simulated (or live) continuous run: run-record ``requests``, ``stages`` and ``units`` tables
    (ns from the first arrival) and ``steps`` (``start_ns``, ``dur_ns`` and the :data:`FEATURES`)."""

    requests: pd.DataFrame
    stages: pd.DataFrame
    units: pd.DataFrame
    steps: pd.DataFrame


def simulate_continuous(
    arrival_ns: Sequence[int],
    lengths: Sequence[tuple[int, int]],
    times: StepTimes,
    policy: ContinuousPolicy,
    seed: int = 0,
) -> ContinuousRun:
    """Run :class:`Scheduler` on requests arriving at ``arrival_ns`` (sorted) with ``(prompt tokens,
    answer tokens)`` ``lengths``: each step starts ``times.between_ns`` after the admissions and
    takes ``times.step_ns_of`` its features (its noise drawn with ``seed``)."""
    seqs = [Seq(i, int(t), p, a) for i, (t, (p, a)) in enumerate(zip(arrival_ns, lengths))]
    sched, now, k, log = Scheduler(policy), 0, 0, TokenLog()
    rng, between = np.random.default_rng(seed), int(round(times.between_ns))
    while k < len(seqs) or sched.running or sched.waiting:
        if not sched.running and not sched.waiting:
            now = max(now, seqs[k].arrival_ns)
        while k < len(seqs) and seqs[k].arrival_ns <= now:
            sched.arrive(seqs[k])
            k += 1
        sched.admit(now)
        step = sched.plan()
        start = now + between
        end = start + times.step_ns_of(step.features(), rng)
        log.step(step, start, end)
        emitted, _ = sched.advance(step)
        log.emit(emitted, end)
        now = end
    return log.run(seqs)


class TokenLog:
    """Steps and unit times as a run goes, then the run tables (:meth:`run`)."""

    def __init__(self) -> None:
        self.steps: list[tuple] = []
        self.units: list[tuple[int, int, int]] = []  # (request, unit, at_ns)

    def step(self, step: Step, start_ns: int, end_ns: int) -> None:
        self.steps.append((start_ns, end_ns - start_ns, *step.features()))

    def emit(self, seqs: list[Seq], at_ns: int) -> None:
        self.units += [(s.request, s.emitted - 1, at_ns) for s in seqs]

    def run(
        self,
        seqs: Sequence[Seq],
        stopped_ns: int | None = None,
        failure: StageFailure | None = None,
    ) -> ContinuousRun:
        """The run tables (``queue_wait_ns`` to admission, ``service_ns`` from it to the last unit,
        ``batch`` the step it joined before); a request not finished at ``stopped_ns`` fails there
        with ``failure`` (default :data:`DRAINED`)."""
        last = {r: at for r, _, at in self.units}  # each request's last unit
        req_rows, st_rows = [], []
        for s in seqs:
            done = s.emitted >= s.answer
            end = last[s.request] if done else stopped_ns
            admitted = end if s.admitted_ns is None else s.admitted_ns
            failed = None if done else failure or DRAINED
            row = request_row(s.request, False, s.arrival_ns, end - s.arrival_ns, failed, 1)
            wait, service = admitted - s.arrival_ns, end - admitted
            loads = (s.arrival_ns, 0, wait, service, s.batch, 0)
            req_rows.append(row | dict(zip(LAGGED_COLUMNS, loads)))  # batch_wait, lag 0
            st_rows.append((s.request, STAGES[0], 0, s.arrival_ns, wait, None))
            if s.admitted_ns is not None:
                st_rows.append((s.request, STAGES[1], 1, admitted, service, None))
        requests, stages = build_tables(req_rows, st_rows, LAGGED_COLUMNS)
        units = build_units((r, STREAM_STAGE, u, at) for r, u, at in sorted(self.units))
        steps = pd.DataFrame(self.steps, columns=["start_ns", "dur_ns", *FEATURES], dtype="int64")
        return ContinuousRun(requests, stages, units, steps)


def goodput(per: pd.DataFrame, ttft_ms: float, tpot_ms: float) -> float | None:
    """The share of requests meeting both bounds, from :func:`workbench.analysis.tokens.token_requests`
    rows (:func:`workbench.analysis.tokens.meets_bounds`); None without requests."""
    return None if per.empty else float(meets_bounds(per, ttft_ms, tpot_ms).mean())


def goodput_knee(
    rates_rps: Sequence[float], goodputs: Sequence[float | None], target: float
) -> dict:
    """The arrival rate where goodput falls below ``target``: the last rate before and the first."""
    good = None
    for rate, share in sorted(zip(rates_rps, goodputs)):
        if share is None or share < target:
            return {"target": target, "last_good_rps": good, "first_short_rps": float(rate)}
        good = float(rate)
    return {"target": target, "last_good_rps": good, "first_short_rps": None}


def goodput_curve(
    times: StepTimes,
    policy: ContinuousPolicy,
    lengths: Sequence[tuple[int, int]],
    rates_rps: Sequence[float],
    *,
    ttft_ms: float,
    tpot_ms: float,
    target: float,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """``(table, knee)``: simulated goodput and throughput per arrival rate, and its knee."""
    setup = Setup(times, list(lengths), "")
    bounds = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms}
    curve = simulated_curve(setup, policy, rates_rps, requests=len(lengths), seed=seed, **bounds)
    table = curve[["rate_rps", "goodput", "throughput_rps"]]
    return table, goodput_knee(table["rate_rps"], table["goodput"], target)


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
    best: dict[str, object] = {}  # the first of the highest rate (a stable sort)
    for run in sorted(runs, key=lambda run: _recorded(run)[0], reverse=True):
        best.setdefault(run.meta.config.precision, run)
    setups = {}
    for precision, run in sorted(best.items()):
        prompt = int(run.meta.config.options["prompt_tokens"])
        answers = run.units.groupby("request")["unit"].count()
        cont = run.meta.load.continuous
        times = StepTimes.from_dict(cont["step_model"], cont.get("step_noise_ns", ()))
        setups[precision] = Setup(times, [(prompt, int(n)) for n in answers], _name(run))
    return setups


def _recorded(run) -> tuple[float, dict]:
    """``(arrival rate, load.continuous)`` of a continuous load run, or a ConfigError naming it."""
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
