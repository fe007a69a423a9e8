"""Helpers for the example pipeline tests (fixtures live in conftest.py)."""

from __future__ import annotations

import itertools
import statistics
import time

from workbench import PipelineConfig
from workbench.examples import factory


def build(name: str, **kwargs):
    """Build example ``name`` with a PipelineConfig made of ``kwargs``."""
    return factory(name)(PipelineConfig(**kwargs))


def take(pipe, n: int) -> list:
    return list(itertools.islice(pipe.item_iterator(), n))


def stage_medians(pipe, batch_size: int, calls: int = 30, warmup: int = 3) -> dict[str, int]:
    """Median wall time in ns per stage over ``calls`` batches (own perf_counter_ns loop).

    The stage-order tests that use it keep a margin shown at load 10-13 (9 busy loops beside them on
    this 2-core machine, three runs, tests/README.md): the expected stage's median over the next one
    was 2.0-2.2x (image preprocess, share 0.67-0.69 against the bound 0.4), 3.4-4.0x (tabular
    hydrate) and 77-276x (text forward at batch 1 and 4)."""
    items = pipe.item_iterator()
    times: dict[str, list[int]] = {s.name: [] for s in pipe.stages}
    for call in range(warmup + calls):
        out = list(itertools.islice(items, batch_size))
        for stage in pipe.stages:
            start = time.perf_counter_ns()
            out = stage.fn(out)
            if call >= warmup:
                times[stage.name].append(time.perf_counter_ns() - start)
    return {name: int(statistics.median(v)) for name, v in times.items()}
