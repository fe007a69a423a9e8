"""A live load run whose heavy users' hydrate holds the only executor: the audit names head-of-line blocking
and does not advise lowering a max wait that is already short."""

from __future__ import annotations

import itertools
import time

from workbench import Pipeline
from workbench.audit.report import run_facts
from workbench.audit.rules import findings
from workbench.batching import Arrivals, BatchPolicy
from workbench.batching.live import run_load


def heavy_users():
    """hydrate sleeps 1 ms per batch, 60 ms when a heavy user (every 25th) is in it; forward 0.5 ms."""
    pipe = Pipeline("recommend", items=lambda: itertools.count())

    @pipe.stage
    def hydrate(users):
        time.sleep(0.06 if any(u % 25 == 0 for u in users) else 0.001)
        return users

    @pipe.stage
    def forward(users):
        time.sleep(0.0005)
        return users

    return pipe


def test_the_heavy_hydrate_that_held_the_executor_is_named():
    run = run_load(
        heavy_users(),
        arrivals=Arrivals("poisson", rate_rps=200, count=300, seed=3),
        policy=BatchPolicy(4, 2.0),
        warmup=1,
    )
    facts = run_facts(run)
    found = {f["kind"]: f for f in findings(facts)}
    hol = found["head_of_line"]
    assert hol["stage"] == "hydrate" and hol["numbers"]["share_of_queue_wait"] >= 0.5
    assert "hydrate held it for" in hol["evidence"] and "batch " in hol["evidence"]
    queue = found["queue"]
    assert "already below" in queue["evidence"]
    assert all("max wait" not in a["title"] for a in queue["actions"])
