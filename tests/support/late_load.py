"""A short in-process load run whose generator falls behind its schedule, on purpose.

The generator's ``sleep`` is replaced by one that oversleeps by ``late_s``: each
send that had to wait goes out at least that late (``time.sleep`` never returns
early), so the run's lag p99 is at least ``late_s`` whatever the machine does.
"""

from __future__ import annotations

import itertools
import time

from workbench import Pipeline
from workbench.batching.arrivals import Arrivals
from workbench.batching.live import run_load
from workbench.batching.policy import BatchPolicy

# 20 Poisson arrivals at 50 req/s: about 0.4 s
ARRIVALS = Arrivals("poisson", rate_rps=50, count=20, seed=3)


def quick_pipeline() -> Pipeline:
    pipe = Pipeline("quick", items=lambda: itertools.count())
    pipe.add("forward", lambda batch: time.sleep(0.0005) or batch)
    return pipe


def late_load_run(late_s: float = 0.0):
    """The (unsaved) run of :data:`ARRIVALS` into ``quick``, each wait for a send ``late_s`` too long."""
    return run_load(
        quick_pipeline(),
        arrivals=ARRIVALS,
        policy=BatchPolicy(4, 1.0),
        warmup=1,
        sleep=lambda s: time.sleep(s + late_s),
    )
