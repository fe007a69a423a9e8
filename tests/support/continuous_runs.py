"""Continuous ``load`` runs of a fake generative pipeline whose steps take ``TIMES`` to the nanosecond.

Every request has a prompt of :data:`PROMPT` tokens (the run's ``prompt_tokens`` option, as the
generate example records it) and :data:`ANSWER` tokens out. Alone (a low rate), a request's prefill
step takes 500 + 10 x 40 = 900 ns (its TTFT) and each decode step 1000 + 100 = 1100 ns (ITL, TPOT).
"""

from __future__ import annotations

from tests.batching.test_continuous_live import TIMES, FakeSteps
from tests.conftest import FakeClock
from workbench import Pipeline, PipelineConfig
from workbench.batching.arrivals import Arrivals
from workbench.batching.continuous import ContinuousPolicy
from workbench.batching.live import run_load
from workbench.batching.policy import BatchPolicy

PROMPT, ANSWER = 40, 3
ALONE_TTFT_NS, ALONE_ITL_NS = 500 + 10 * PROMPT, 1000 + 100
POLICY = ContinuousPolicy(4, 64)
__all__ = ["ALONE_ITL_NS", "ALONE_TTFT_NS", "ANSWER", "POLICY", "PROMPT", "TIMES", "continuous_run"]


def continuous_run(rate_rps: float, precision: str = "fp32", count: int = 40, seed: int = 2):
    """A live continuous run (``Run``, kind load) of ``count`` Poisson arrivals at ``rate_rps``."""
    clock, items = FakeClock(), [(PROMPT, ANSWER)] * count
    config = PipelineConfig(precision=precision, options={"prompt_tokens": PROMPT})
    pipe = Pipeline("gen", items=lambda: iter(items), config=config)
    pipe.add("generate", lambda batch: iter(batch), stream=True)
    pipe.steps = lambda slots: FakeSteps(clock, slots)
    return run_load(
        pipe,
        config,
        arrivals=Arrivals("poisson", rate_rps=rate_rps, count=count, seed=seed),
        policy=BatchPolicy(1, 0.0),
        continuous=POLICY,
        clock=clock,
        sleep=lambda s: clock.advance(round(s * 1e9)),
    )
