"""An audit explains a run once: the tail, GC and head-of-line figures are the budget's, not computed
a second time over the same tables (each a pass over every request: seconds at a million)."""

from __future__ import annotations

from tests.conftest import toy_pipeline
from workbench import profile
from workbench.analysis import budget
from workbench.audit import report

EXPLAINED = {"tail_attribution": "tail", "gc_summary": "gc", "head_of_line": "blocking"}


def test_each_explanation_is_computed_once_per_audit(fake_clock, monkeypatch):
    run = profile(
        toy_pipeline(fake_clock, {"a": 1_000}), requests=4, warmup=0, traced=0, clock=fake_clock
    )
    calls = []
    for name in EXPLAINED:
        real = getattr(budget, name)

        def counted(*args, _real=real, _name=name):
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(budget, name, counted)
        monkeypatch.setattr(report, name, counted, raising=False)  # where the audit had its own
    found = report.run_facts(run)
    assert sorted(calls) == sorted(EXPLAINED)
    for key in ("tail", "gc"):
        assert found[key] is found["budget"][key]
    assert found["blocking"] is found["budget"]["head_of_line"]
