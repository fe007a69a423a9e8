"""audit --try: concrete changes per run, measured through an injected comparison, never promised."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.audit.report import audit_run
from workbench.audit.trial import concrete_change, try_actions
from workbench.record import load_run

RUNS = Path(__file__).resolve().parents[2] / "data" / "runs"


@dataclass
class FakeComparison:
    result: dict


def fake_compare(ratios):
    calls = []

    def compare(factory, configs, *, base, requests, seed):
        calls.append((configs[1], base, requests))
        r = ratios[tuple(configs[1].items())]
        e2e = {
            "p50_ratio": r,
            "p50_ci": [r - 0.02, r + 0.02],
            "p99_ratio": r,
            "p99_ci": [r - 0.05, r + 0.05],
            "verdict": "faster" if r < 0.97 else "no detectable difference",
        }
        return FakeComparison({"end_to_end": e2e, "noise": {"noisy": False}, "min_effect": 0.02})

    compare.calls = calls
    return compare


def test_concrete_changes_follow_the_run_config():
    run = load_run(RUNS / "text-cpu-bs8-fp32")
    assert concrete_change(run, {"title": "t", "try": {"precision": "bf16"}}) == (
        {"precision": "bf16"},
        None,
    )
    assert concrete_change(run, {"title": "t", "try": {"batch_size": "double"}}) == (
        {"batch_size": 16},
        None,
    )
    assert concrete_change(run, {"title": "t", "try": None}) == (None, None)
    cuda = load_run(RUNS / "text-cuda-bs1-fp32")
    assert (
        concrete_change(cuda, {"title": "t", "try": {"precision": "int8"}})[1]
        == "int8 dynamic quantization runs on CPU only"
    )


def test_a_cuda_graph_is_tried_only_where_the_factory_has_the_option():
    graph = {"title": "t", "try": {"cuda_graph": True}}
    assert concrete_change(load_run(RUNS / "text-cuda-bs1-fp32"), graph) == (
        {"cuda_graph": True},
        None,
    )
    assert concrete_change(load_run(RUNS / "text-cuda-bs1-fp32-graph"), graph) == (
        None,
        "the run already replays its forward from a CUDA graph",
    )
    assert concrete_change(load_run(RUNS / "text-cpu-bs8-fp32"), graph) == (
        None,
        "a CUDA graph replays GPU launches; this run is on the CPU",
    )
    assert concrete_change(load_run(RUNS / "image-cuda-bs1-fp32"), graph)[
        1
    ].startswith(  # format 1: no factory
        "only the text example has a cuda_graph option"
    )


def test_measured_gains_are_attached_and_shared_between_findings():
    run = load_run(RUNS / "text-cpu-bs8-fp32")
    run.meta = run.meta.replace(
        config=run.meta.config.to_dict() | {"threads": 2}
    )  # as if recorded with two threads: threads=1 is tried
    compare = fake_compare(
        {
            (("precision", "bf16"),): 0.8,
            (("precision", "int8"),): 1.0,
            (("threads", 1),): 0.5,
            (("compile", True),): 0.9,
            (("channels_last", True),): 1.0,
        }
    )
    entry = audit_run(run, try_actions=True, try_requests=60, compare_fn=compare)
    actions = {a["title"]: a for f in entry["findings"] for a in f["actions"]}
    bf16 = actions["Run the model in bf16 (or int8 dynamic quantization on CPU)"]["measured"]
    assert bf16["p50_ratio"] == 0.8 and bf16["verdict"] == "faster" and bf16["per"] == "request"
    assert bf16["sentence"].startswith("precision=bf16: end-to-end p50 x0.80 [0.78, 0.82]")
    assert actions["Compile the model with torch.compile"]["measured"]["p50_ratio"] == 0.9
    untried = [a for a in actions if "not_tried" not in actions[a] and "measured" not in actions[a]]
    assert all(
        actions[a]["try"] is None for a in untried
    )  # only actions the workbench cannot make itself
    assert [c[0] for c in compare.calls] == [
        {"precision": "bf16"},
        {"precision": "int8"},
        {"threads": 1},
        {"compile": True},
        {"channels_last": True},
    ]
    assert all(c[2] == 60 for c in compare.calls)
    assert "measured: threads=1: end-to-end p50 x0.50" in entry["summary"]


def test_a_batch_size_trial_reports_per_item_ratios():
    run = load_run(RUNS / "text-cuda-bs1-fp32")  # launch-bound: the launch action doubles the batch
    findings = [
        {
            "kind": "launch",
            "actions": [
                {
                    "title": "Batch more requests per call",
                    "why": "",
                    "try": {"batch_size": "double"},
                }
            ],
        }
    ]
    compare = fake_compare({(("batch_size", 2),): 1.2})
    try_actions(run, findings, requests=40, compare_fn=compare)
    m = findings[0]["actions"][0]["measured"]
    assert (
        m["per"] == "item"
        and m["p50_ratio"] == pytest.approx(0.6)
        and m["p50_ci"] == pytest.approx([0.59, 0.61])
    )
    assert m["verdict"] == "faster"


def test_a_run_that_already_used_one_thread_is_not_tried_again():
    run = load_run(RUNS / "text-cpu-bs8-fp32")
    run.meta = run.meta.replace(config=run.meta.config.to_dict() | {"threads": 1})
    assert concrete_change(run, {"title": "t", "try": {"threads": 1}}) == (
        None,
        "the run already used one torch thread",
    )


def test_a_run_whose_factory_cannot_be_rebuilt_says_so(tmp_path):
    run = load_run(RUNS / "text-cpu-bs8-fp32")
    fingerprint = run.meta.fingerprint.to_dict() if run.meta.fingerprint else {}
    run.meta = run.meta.replace(
        pipeline="someone-elses", fingerprint=fingerprint | {"factory": None}
    )
    findings = [
        {"kind": "compute", "actions": [{"title": "x", "why": "", "try": {"precision": "bf16"}}]}
    ]
    assert try_actions(run, findings, compare_fn=fake_compare({})) == []
    assert "does not say which factory built it" in findings[0]["actions"][0]["not_tried"]


def test_compile_and_channels_last_are_tried_as_model_options():
    run = load_run(RUNS / "image-cpu-bs1-fp32")
    assert concrete_change(run, {"title": "t", "try": {"compile": True}}) == (
        {"compile": True},
        None,
    )
    assert concrete_change(run, {"title": "t", "try": {"channels_last": True}}) == (
        {"channels_last": True},
        None,
    )


def test_a_failing_trial_is_reported_not_raised():
    run = load_run(RUNS / "text-cpu-bs8-fp32")

    def broken(*args, **kwargs):
        raise RuntimeError("inductor needs a C++ compiler\nmore lines")

    findings = [
        {"kind": "compute", "actions": [{"title": "c", "why": "", "try": {"compile": True}}]}
    ]
    try_actions(run, findings, compare_fn=broken)
    assert (
        findings[0]["actions"][0]["measured"]["sentence"]
        == "compile=True: not measured: RuntimeError: inductor needs a C++ compiler"
    )


def test_lowering_the_max_wait_is_simulated_on_a_load_runs_own_arrivals(tmp_path):
    from workbench.audit.trial import simulate_wait
    from workbench.cli import main

    out = tmp_path / "load"
    # max batch 2 at 400 req/s with 4 ms of wait: the run's batches cover sizes 1 and 2, so the
    # service model built from the run itself covers the policy
    assert main(
        [
            "load",
            "--example",
            "tabular",
            "--rate",
            "400",
            "--duration",
            "2",
            "--max-batch-size",
            "2",
            "--max-wait-ms",
            "4",
            "--threads",
            "1",
            "--out",
            str(out),
        ]
    ) in (0, 1)
    result = simulate_wait(load_run(out))["simulated"]
    assert result["max_wait_ms"] == 2.0 and result["p50_ratio"] > 0 and result["p99_ratio"] > 0
    assert result["sentence"].startswith("max_wait_ms=2 (from 4): simulated p50 x")
    assert "not measured" in result["sentence"]
    assert "not_tried" in simulate_wait(load_run(RUNS / "text-cpu-bs1-fp32"))


def test_pinned_memory_is_tried_only_for_a_pageable_gpu_run():
    pageable = load_run(RUNS / "image-cuda-bs64-fp32-pageable")
    action = {"title": "t", "try": {"pin_memory": True}}
    assert concrete_change(pageable, action) == ({"pin_memory": True}, None)
    assert (
        concrete_change(load_run(RUNS / "image-cuda-bs64-fp32"), action)[1]
        == "the run already copied from pinned memory"
    )
    assert "CPU" in concrete_change(load_run(RUNS / "image-cpu-bs1-fp32"), action)[1]


def test_a_kv_cache_is_tried_where_the_run_turned_it_off_and_its_tpot_is_in_the_sentence():
    kv = {"title": "t", "try": {"kv_cache": True}}
    assert concrete_change(load_run(RUNS / "generate-cpu-bs1-fp32-nokv"), kv) == (
        {"kv_cache": True},
        None,
    )
    assert concrete_change(load_run(RUNS / "generate-cpu-bs1-fp32"), kv)[1].startswith(
        "the run was not made with kv_cache=false"
    )

    def compare(factory, configs, *, base, requests, seed):
        e2e = {"p50_ratio": 0.5, "p50_ci": [0.4, 0.6], "p99_ratio": 0.5, "p99_ci": [0.4, 0.6]}
        tpot = {"name": "tpot", "p50_ratio": 0.4, "p50_ci": [0.35, 0.45]} | {
            "p99_ratio": 0.4,
            "p99_ci": [0.3, 0.5],
        }
        result = {"end_to_end": e2e | {"verdict": "faster"}, "tokens": {"metrics": [tpot]}}
        return FakeComparison(result | {"noise": {"noisy": False}})

    finding = {"kind": "decode_growth", "actions": [dict(kv)]}
    try_actions(load_run(RUNS / "generate-cpu-bs1-fp32-nokv"), [finding], compare_fn=compare)
    measured = finding["actions"][0]["measured"]
    assert measured["tpot"] == {"p50_ratio": 0.4, "p50_ci": [0.35, 0.45]} | {
        "p99_ratio": 0.4,
        "p99_ci": [0.3, 0.5],
    }
    assert "per request; TPOT p50 x0.40 [0.35, 0.45]: faster" in measured["sentence"]
