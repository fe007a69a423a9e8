"""A decode stage made of torch operators is judged compute from its traced time, whatever its name says."""

from __future__ import annotations

import itertools

import pytest

from workbench.audit.report import run_facts
from workbench.audit.rules import findings


def test_a_torch_decode_stage_is_compute_and_gets_the_compute_actions(tmp_path):
    torch = pytest.importorskip("torch")
    from workbench import Pipeline, profile

    torch.manual_seed(0)
    weight = torch.randn(256, 256)
    pipe = Pipeline("generator", items=lambda: itertools.count())

    @pipe.stage
    def parse(batch):
        return torch.randn(len(batch), 256)

    @pipe.stage
    def decode(x):  # an autoregressive step: torch work, named like image decoding
        for _ in range(8):
            x = torch.tanh(x @ weight)
        return x

    run = profile(pipe, requests=40, warmup=2, traced=3, max_duration_s=None, sample_stacks=False)
    run.save(tmp_path / "run")
    facts = run_facts(run)
    decision = facts["role_decisions"]["decode"]
    assert (decision["role"], decision["source"], decision["library"], decision["overrules"]) == (
        "compute",
        "evidence",
        "torch",
        "preprocess",
    )
    assert decision["share"] >= 0.5
    found = [f for f in findings(facts) if f["stage"] == "decode" and f["kind"] == "compute"]
    assert found  # (a busy machine may add a tail finding for decode too)
    assert "decode is compute, not preprocess as its name suggests" in found[0]["evidence"]
    assert [a["try"] for a in found[0]["actions"]][:2] == [
        {"precision": "bf16"},
        {"precision": "int8"},
    ]
