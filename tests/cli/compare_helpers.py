"""Saved runs with exact stage times (a fake clock), for the compare and gate command tests."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

from tests.conftest import FakeClock
from workbench import Pipeline, profile


def saved_run(
    path: Path,
    forward_ns: int,
    *,
    name: str = "toy",
    noisy: bool | None = False,
    requests: int = 40,
    extra_stage: bool = False,
    config=None,
    drift_after: int | None = None,
    drift_ns: int = 0,
    readings: dict | None = None,
) -> Path:
    """A run folder: parse 1000 ns and forward ``forward_ns`` per request, noise flag set to ``noisy``;
    forward takes ``drift_ns`` more from its ``drift_after``-th call on (the machine slowed down mid-run);
    ``readings``: more fields of the noise record (``other_cores``, ``cores``)."""
    clock = FakeClock()
    calls = itertools.count()

    def forward(b):
        slow = drift_ns if drift_after is not None and next(calls) >= drift_after else 0
        return clock.advance(forward_ns + slow) or b

    def build(config):
        pipe = Pipeline(
            name, items=lambda: itertools.count(), description=str(config.options.get("k", ""))
        )
        pipe.add("parse", lambda b: clock.advance(1000) or b)
        pipe.add("forward", forward)
        if extra_stage:
            pipe.add("post", lambda b: b)
        return pipe

    run = profile(build, config, requests=requests, warmup=0, traced=0, clock=clock)
    noise = {"noisy": noisy, "reasons": ["set by the test"], "fix": None, **(readings or {})}
    run.meta = (
        run.meta.replace(noise=noise)
        if hasattr(run.meta, "replace")
        else dataclasses.replace(run.meta, noise=noise)
    )
    run.save(path)
    return path
