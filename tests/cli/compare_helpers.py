"""Saved runs with exact stage times (a fake clock), for the compare and gate command tests."""
from __future__ import annotations

import itertools
from pathlib import Path

from tests.conftest import FakeClock
from workbench import Pipeline, profile


def saved_run(path: Path, forward_ns: int, *, name: str = "toy", noisy: bool | None = False, requests: int = 40,
              extra_stage: bool = False, config=None) -> Path:
    """A run folder: parse 1000 ns and forward ``forward_ns`` per request, noise flag set to ``noisy``."""
    clock = FakeClock()

    def build(config):
        pipe = Pipeline(name, items=lambda: itertools.count())
        pipe.add("parse", lambda b: clock.advance(1000) or b)
        pipe.add("forward", lambda b: clock.advance(forward_ns) or b)
        if extra_stage:
            pipe.add("post", lambda b: b)
        return pipe

    run = profile(build, config, requests=requests, warmup=0, traced=0, clock=clock)
    run.meta["noise"] = {"noisy": noisy, "reasons": ["set by the test"], "fix": None}
    run.save(path)
    return path
