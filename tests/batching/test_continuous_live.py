"""The live continuous batching run, with an injected clock and a fake step API whose calls take the
step model's time: it schedules as the simulator does, to the nanosecond, and records the tokens."""

import itertools
import random

import pytest

from tests.conftest import FakeClock
from workbench import Pipeline
from workbench.analysis.budget import budget
from workbench.batching.arrivals import Arrivals
from workbench.batching.continuous import ContinuousPolicy, StepTimes, simulate_continuous
from workbench.batching.live import run_load
from workbench.batching.policy import BatchPolicy
from workbench.errors import ConfigError
from workbench.guard import Interrupted
from workbench.record import load_run

TIMES = StepTimes((1000.0, 100.0, 0.0, 500.0, 10.0))


class FakeSteps:
    """A step API whose decode and prefill advance the clock by the step model's time."""

    def __init__(self, clock: FakeClock, slots: int) -> None:
        self.clock, self.free, self.calls = clock, list(range(slots)), []

    @staticmethod
    def lengths(item):
        return item

    def join(self, item):
        return self.free.pop()

    def leave(self, slot):
        self.free.append(slot)

    def prefill(self, slot, n):
        self.calls.append(("prefill", slot, n))
        self.clock.advance(500 + 10 * n)

    def decode(self, slots):
        self.calls.append(("decode", tuple(slots)))
        self.clock.advance(1000 + 100 * len(slots))
        return [0] * len(slots)


def lengths(n: int) -> list[tuple[int, int]]:
    rng = random.Random(1)
    return [(rng.randint(1, 40), rng.randint(1, 12)) for _ in range(n)]


def generative(clock: FakeClock, items, offer_steps: bool = True) -> Pipeline:
    pipe = Pipeline("gen", items=lambda: iter(items))
    pipe.add("generate", lambda batch: iter(batch), stream=True)
    if offer_steps:
        pipe.steps = lambda slots: FakeSteps(clock, slots)
    return pipe


def sleeper(clock: FakeClock):
    return lambda s: clock.advance(round(s * 1e9))


def test_live_tokens_are_the_simulated_ones_to_the_nanosecond(tmp_path):
    clock, items = FakeClock(), lengths(40)
    arrivals = Arrivals("poisson", rate_rps=200_000, count=40, seed=2)
    policy = ContinuousPolicy(4, 32, chunk_tokens=16)
    run = run_load(
        generative(clock, items),
        arrivals=arrivals,
        policy=BatchPolicy(1, 0.0),
        continuous=policy,
        clock=clock,
        sleep=sleeper(clock),
    )
    sim = simulate_continuous(arrivals.times_ns(), items, TIMES, policy)
    assert run.units.equals(sim.units)
    assert run.requests.equals(sim.requests)
    assert run.stages.equals(sim.stages)
    assert run.requests["queue_wait_ns"].max() > 0  # requests waited for a free sequence
    cont = run.meta.load.continuous
    assert cont["max_num_seqs"] == 4 and cont["chunk_tokens"] == 16
    assert cont["steps"] == len(sim.steps)
    # the model fitted to the run's own steps is the fake's: decode 1000 + 100 a sequence, chunk 500 + 10
    assert StepTimes.from_dict(cont["step_model"]).coef_ns == pytest.approx(TIMES.coef_ns, abs=1e-6)
    run.save(tmp_path / "run")  # a load run that show reports tokens of
    report = budget(load_run(tmp_path / "run"))
    assert report["tokens"]["requests"] == 40
    assert report["tokens"]["tokens"] == sum(a for _, a in items)


def test_requests_unfinished_at_the_drain_deadline_fail():
    clock, items = FakeClock(), [(10, 1_000_000)] + [(5, 2)] * 3
    arrivals = Arrivals("poisson", rate_rps=1e6, count=4, seed=0)
    run = run_load(
        generative(clock, items),
        arrivals=arrivals,
        policy=BatchPolicy(1, 0.0),
        continuous=ContinuousPolicy(1, 16),
        drain_timeout_s=0.01,
        clock=clock,
        sleep=sleeper(clock),
    )
    req = run.requests
    assert req["ok"].tolist() == [False, False, False, False]  # the first holds the only sequence
    assert set(req["error_type"]) == {"DrainTimeout"}
    assert req["batch"].tolist() == [0, -1, -1, -1]


def test_a_streaming_pipeline_without_a_step_api_is_refused():
    arrivals = Arrivals("poisson", rate_rps=100, count=3, seed=0)
    items = itertools.repeat((3, 2))
    with pytest.raises(ConfigError, match=r"streams its answer \(stream=True\) but the pipeline"):
        run_load(
            generative(FakeClock(), items, offer_steps=False),
            arrivals=arrivals,
            policy=BatchPolicy(1, 0.0),
        )
    plain = Pipeline("plain", items=lambda: itertools.count())
    plain.add("double", lambda b: [2 * x for x in b])
    with pytest.raises(ConfigError, match="offers no step API"):
        run_load(
            plain, arrivals=arrivals, policy=BatchPolicy(1, 0.0), continuous=ContinuousPolicy()
        )


def test_ctrl_c_keeps_what_finished_and_stops_the_rest():
    clock = FakeClock()
    pipe = generative(clock, [(4, 2)] * 3 + [(4, 50)])
    made = pipe.steps
    calls = []

    def interrupting(slots):
        steps = made(slots)
        decode = steps.decode

        def counted(seqs):
            calls.append(seqs)
            if len(calls) == 12:  # after the warm-up's 3, Ctrl-C on the 9th step's decode
                raise KeyboardInterrupt
            return decode(seqs)

        steps.decode = counted
        return steps

    pipe.steps = interrupting
    arrivals = Arrivals("poisson", rate_rps=1e6, count=4, seed=0)
    with pytest.raises(Interrupted) as stopped:
        run_load(
            pipe,
            arrivals=arrivals,
            policy=BatchPolicy(1, 0.0),
            continuous=ContinuousPolicy(1, 16),
            clock=clock,
            sleep=sleeper(clock),
        )
    run = stopped.value.run
    assert run.meta.status == "interrupted"
    assert run.requests["ok"].tolist() == [True, True, True, False]
    assert run.requests["error_type"].tolist()[3] == "RunStopped"


def test_what_the_continuous_run_does_not_do_is_refused_not_ignored():
    arrivals = Arrivals("poisson", rate_rps=100, count=3, seed=0)
    items = [(3, 2)] * 3
    common = {"arrivals": arrivals, "policy": BatchPolicy(1, 0.0)}
    with pytest.raises(ConfigError, match="no per-step guard yet: leave --timeout-s out"):
        run_load(generative(FakeClock(), items), timeout_s=1.0, **common)
    with pytest.raises(ConfigError, match="load --sweep does not sweep a continuous"):
        run_load(generative(FakeClock(), items), watch=object(), **common)
