"""audit --try shows what a change costs in outputs beside what it gains, and marks an action whose argmax
agreement falls below the threshold (issue 26, part 3)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.audit.trial import AGREEMENT_THRESHOLD, try_actions
from workbench.record import load_run

RUNS = Path(__file__).resolve().parents[2] / "data" / "runs"


@dataclass
class FakeComparison:
    result: dict


def compare_with_outputs(agreement: float):
    def compare(factory, configs, *, base, requests, seed):
        e2e = {
            "p50_ratio": 0.6,
            "p50_ci": [0.58, 0.62],
            "p99_ratio": 0.6,
            "p99_ci": [0.55, 0.65],
            "verdict": "faster",
        }
        outputs = {
            "max_abs_error": 0.0123,
            "max_rel_error": 0.02,
            "argmax_agreement": agreement,
            "items": 64,
        }
        return FakeComparison(
            {"end_to_end": e2e, "noise": {"noisy": False}, "min_effect": 0.02, "outputs": outputs}
        )

    return compare


def bf16_finding():
    return [{"kind": "compute", "actions": [{"title": "bf16", "try": {"precision": "bf16"}}]}]


def test_gain_and_agreement_side_by_side_and_a_mark_below_the_threshold():
    run = load_run(RUNS / "text-cpu-bs8-fp32")
    findings = bf16_finding()
    try_actions(run, findings, compare_fn=compare_with_outputs(0.953125))
    measured = findings[0]["actions"][0]["measured"]
    assert AGREEMENT_THRESHOLD == 0.99 and measured["agreement_below_threshold"] is True
    assert measured["outputs"]["argmax_agreement"] == 0.953125
    assert measured["sentence"].endswith(
        "faster (interleaved, 200 requests each); outputs: argmax agrees on 95.3 % of 64 items, max abs error "
        "0.0123 (rel 0.02) - BELOW the 99 % agreement threshold: it changes predictions, check them before "
        "adopting it"
    )


def test_an_action_that_keeps_the_predictions_is_not_marked():
    run = load_run(RUNS / "text-cpu-bs8-fp32")
    findings = bf16_finding()
    try_actions(run, findings, compare_fn=compare_with_outputs(1.0))
    measured = findings[0]["actions"][0]["measured"]
    assert measured["agreement_below_threshold"] is False and "BELOW" not in measured["sentence"]
    assert "argmax agrees on 100.0 % of 64 items" in measured["sentence"]
