"""``stage_summary(run)`` and ``budget(run)`` take the run and warn about nothing."""

from __future__ import annotations

import pytest

from tests.conftest import toy_pipeline
from workbench import profile
from workbench.analysis.budget import budget, stage_summary


@pytest.fixture
def run(fake_clock):
    pipe = toy_pipeline(fake_clock, {"parse": 100_000, "forward": 300_000}, fail={"forward": {4}})
    return profile(pipe, requests=5, warmup=1, traced=0, clock=fake_clock, max_duration_s=None)


def test_stage_summary_takes_the_run(run, recwarn):
    table = stage_summary(run)
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    assert table["name"].tolist() == ["parse", "forward", "end_to_end", "unattributed"]
    assert table["mean_ms"].tolist()[:2] == [0.1, 0.3] and table["count"].tolist() == [4, 4, 4, 4]


def test_budget_takes_the_run(run, recwarn):
    report = budget(run)
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    assert (
        report["kind"] == "profile"
        and report["status"] == "complete"
        and report["errors"] == {"parse": 0, "forward": 1}
    )
    assert [s["mean_ms"] for s in report["stages"]] == [0.1, 0.3]
