"""Notebook 14 (generative pipelines) and its solutions: their sentences agree with the numbers beside them, and
the recordings in ``data/course/generate-continuous`` and ``data/runs/generate-*`` show what its text says.

The slow tests read an executed notebook's stdout (``test_claims.py``'s pattern); the fast ones check the recorded
runs the notebook reads instead of a long live run.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from nbexec import REPO, SOLUTIONS
from test_claims import NUM, claim, claims, notebook, stdout

from tests.support.cli import main_output
from workbench.analysis.tokens import GROWTH_AGREE, GROWTH_MIN_REQUESTS, GROWTH_RATIO

CONTINUOUS = REPO / "data" / "course" / "generate-continuous"
RUNS = REPO / "data" / "runs"
BOUNDS = dict(ttft_ms=50, tpot_ms=5)
GROWS = {"decode steps grow": True, "they do not grow": False, "too few requests to tell": None}


def recorded():
    from workbench import load_run

    return [load_run(p) for p in sorted(CONTINUOUS.iterdir())]


def check_growth(text: str, pattern: str) -> dict[str, bool | None]:
    """Each growth line's verdict follows ``decode_growth``'s rule from the figures printed with it."""
    said = {}
    for m in claims(text, pattern):
        growth, agree, n, verdict = (
            float(m["growth"]),
            float(m["agree"]),
            m["n"],
            GROWS[m["verdict"]],
        )
        if int(n) < GROWTH_MIN_REQUESTS:
            assert verdict is None, m.group(0)
        elif abs(growth - GROWTH_RATIO) > 0.005 and abs(agree - 100 * GROWTH_AGREE) > 0.5:
            assert verdict == (growth >= GROWTH_RATIO and agree >= 100 * GROWTH_AGREE), m.group(0)
        said[m["kv"]] = verdict
    return said


def test_14_recordings_show_the_lessons():
    """bf16 steps cost more than fp32's on this CPU and its live points fall off first; every recorded run says
    it was noisy; the simulator's goodput at fp32, 8 sequences, falls below 90 % inside the explorer's range."""
    from workbench.batching.continuous import (
        ContinuousPolicy,
        goodput_knee,
        measured_points,
        recorded_setup,
        simulated_curve,
    )

    runs = recorded()
    assert all(r.meta.noise.noisy for r in runs)
    assert sorted((r.meta.config.precision, r.meta.load.arrivals["rate_rps"]) for r in runs) == [
        (p, rate) for p in ("bf16", "fp32", "int8") for rate in (20, 40, 80)
    ]
    # 200 requests each; at 20 req/s load's 10 s default duration ended the arrivals at 174
    assert {(r.meta.load.arrivals["rate_rps"], len(r.requests)) for r in runs} == {
        (20, 174),
        (40, 200),
        (80, 200),
    }
    setups = recorded_setup(runs)
    step8 = {p: s.times.coef_ns[0] + 8 * s.times.coef_ns[1] for p, s in setups.items()}
    assert step8["bf16"] > step8["fp32"], step8
    at80 = measured_points(runs, **BOUNDS).query("rate_rps == 80").set_index("precision")
    assert at80["throughput_rps"].idxmin() == "bf16", at80
    curve = simulated_curve(
        setups["fp32"], ContinuousPolicy(8, 512), np.arange(20, 201, 20), requests=300, **BOUNDS
    )
    knee = goodput_knee(curve["rate_rps"], curve["goodput"], 0.9)
    assert knee["last_good_rps"] is not None and knee["first_short_rps"] is not None, knee
    short = curve.set_index("rate_rps").loc[knee["first_short_rps"]]
    assert short["ttft_p99_ms"] > BOUNDS["ttft_ms"] and short["itl_p99_ms"] < BOUNDS["tpot_ms"]
    # "a prefill chunk of 16 ... ITL p99 drops (about a third at 40 requests/s), TTFT rises a little"
    whole, chunked = (
        simulated_curve(
            setups["fp32"], ContinuousPolicy(8, 512, c), [40], requests=300, **BOUNDS
        ).iloc[0]
        for c in (None, 16)
    )
    assert 0.5 < chunked["itl_p99_ms"] / whole["itl_p99_ms"] < 0.8, (whole, chunked)
    assert 1 < chunked["ttft_p99_ms"] / whole["ttft_p99_ms"] < 1.5, (whole, chunked)


def test_14_the_audit_of_the_recorded_run_without_the_cache_proposes_one():
    from workbench import load_run
    from workbench.audit.report import audit_run

    run = load_run(RUNS / "generate-cpu-bs1-fp32-nokv")
    found = {f["kind"]: f for f in audit_run(run)["findings"]}
    assert found["decode_growth"]["actions"][0]["try"] == {"kv_cache": True}


def test_14_compare_of_the_recorded_runs_puts_tpot_below_1_and_ttft_around_it():
    a, b = (str(RUNS / n) for n in ("generate-cpu-bs1-fp32-nokv", "generate-cpu-bs1-fp32"))
    rc, out, err = main_output(["compare", a, b, "--json"])  # the reader in this process
    assert rc == 0, err
    found = {m["name"]: m for m in json.loads(out)["tokens"]["metrics"]}
    assert found["tpot"]["p50_ci"][1] < 1 and found["itl"]["p50_ci"][1] < 1
    assert found["ttft"]["p50_ci"][0] < 1 < found["ttft"]["p50_ci"][1]
    # "both runs ... flagged noisy, so compare withholds its verdict"
    assert {m["p50_verdict"] for m in found.values()} == {"too noisy to tell"}


@pytest.mark.slow
def test_14_generative_pipelines(executed):
    from workbench.batching.continuous import (
        ContinuousPolicy,
        measured_points,
        recorded_setup,
        simulated_curve,
    )

    text = stdout(executed(notebook("14")))
    tpot = {}
    for m in claims(
        text,
        rf"^kv_cache=(False|True): (\d+) requests, (\d+) tokens: TTFT p50 {NUM} ms, ITL p50 {NUM} ms, "
        rf"TPOT p50 {NUM} ms$",
    ):
        assert (int(m.group(2)), int(m.group(3))) == (20, 20 * 32), m.group(0)
        tpot[m.group(1)] = float(m.group(6))
    m = claim(text, rf"^with the cache TPOT p50 is {NUM}x the one without: (the cache|NOT cheaper)")
    ratio = float(m.group(1))
    assert abs(ratio - tpot["True"] / tpot["False"]) <= 0.005 + 0.002 * ratio, m.group(0)
    assert (m.group(2) == "the cache") == (ratio < 1), m.group(0)
    check_growth(
        text,
        rf"^kv_cache=(?P<kv>False|True): the later half of a request's steps (?P<growth>{NUM[1:-1]})x the earlier "
        rf"half, (?P<agree>{NUM[1:-1]})% of (?P<n>\d+) requests slower: (?P<verdict>[a-z ]+)\.$",
    )
    m = claim(text, r"^finding decode_growth \((live|recorded) run\) in generate: decode steps")
    missed = "no decode_growth finding on the live run" in text
    assert m.group(1) == ("recorded" if missed else "live"), m.group(0)
    assert claim(text, r"^  advice: Keep a KV cache: .* \(--try kv_cache=True\)$")
    for m in claims(
        text,
        rf"^(TTFT|TPOT|ITL) p50 with/without the cache: {NUM}x \[{NUM}, {NUM}\] (\(below 1\)|\(above 1\)|"
        r"\(includes 1\)); verdict: (.*)$",
    ):
        lo, hi = float(m.group(3)), float(m.group(4))
        where = "(below 1)" if hi < 1 else "(above 1)" if lo > 1 else "(includes 1)"
        assert m.group(5) == where and lo <= float(m.group(2)) <= hi, m.group(0)

    runs = recorded()
    live = measured_points(runs, **BOUNDS).query("precision == 'fp32'").reset_index(drop=True)
    fp32 = sorted(
        (r for r in runs if r.meta.config.precision == "fp32"),
        key=lambda r: r.meta.load.arrivals["rate_rps"],
    )
    setup, policy = recorded_setup(runs)["fp32"], ContinuousPolicy(8, 512)
    # each replay on its run's arrivals: the same seed and count (174 at 20 req/s, 200 above)
    sim = pd.concat(
        simulated_curve(
            setup, policy, [r.meta.load.arrivals["rate_rps"]], requests=len(r.requests), **BOUNDS
        )
        for r in fp32
    ).reset_index(drop=True)
    rows = claims(
        text,
        rf"^(\d+) req/s: TTFT p99 live {NUM} ms, simulated {NUM} ms \({NUM}x\); ITL p99 live {NUM} ms, "
        rf"simulated {NUM} ms \({NUM}x\)$",
    )
    assert [int(r.group(1)) for r in rows] == [20, 40, 80]
    for r, (_, lv), (_, sv) in zip(rows, live.iterrows(), sim.iterrows()):
        printed = [float(r.group(i)) for i in (2, 3, 5, 6)]
        assert printed == [
            round(x, 2) for x in (lv.ttft_p99_ms, sv.ttft_p99_ms, lv.itl_p99_ms, sv.itl_p99_ms)
        ]
        assert float(r.group(4)) == round(lv.ttft_p99_ms / sv.ttft_p99_ms, 1), r.group(0)
        assert float(r.group(7)) == round(lv.itl_p99_ms / sv.itl_p99_ms, 1), r.group(0)
    m = claim(text, r"^(\d+) of the (\d+) recorded runs were flagged noisy")
    assert (int(m.group(1)), int(m.group(2))) == (sum(r.meta.noise.noisy for r in runs), len(runs))
    m = claim(
        text,
        rf"^goodput stays at or above 90 % up to {NUM} req/s and falls below it at {NUM} req/s \(simulated",
    )
    knee = float(m.group(2))
    assert float(m.group(1)) == knee - 20
    m = claim(
        text,
        rf"^at {NUM} req/s TTFT p99 is {NUM} ms, (over|within) its 50 ms bound; ITL p99 {NUM} ms, (over|within)",
    )
    assert float(m.group(1)) == knee
    assert (m.group(3) == "over") == (float(m.group(2)) > 50) and (m.group(5) == "over") == (
        float(m.group(4)) > 5
    ), m.group(0)


@pytest.mark.slow
def test_14_solutions_answer_from_their_numbers(executed):
    text = stdout(executed(next(p for p in SOLUTIONS if p.name.startswith("14"))))
    rows = claims(
        text,
        rf"^max_num_seqs=(\d+): goodput >= 90 % up to {NUM} req/s, below at {NUM} req/s, where (\d+)% meet the "
        r"TTFT bound and (\d+)% the TPOT bound: (TTFT|TPOT|neither alone) fails first\.$",
    )
    assert [int(r.group(1)) for r in rows] == [4, 8, 16]
    kept = [float(r.group(2)) for r in rows]
    assert (
        kept == sorted(kept) and kept[0] < kept[-1]
    )  # "more sequences a step raise the rate kept"
    for r in rows:
        ttft, tpot = int(r.group(4)), int(r.group(5))
        first = "TTFT" if ttft < tpot else "TPOT" if tpot < ttft else "neither alone"
        assert r.group(6) == first == "TTFT", r.group(
            0
        )  # "at each size here the TTFT bound breaks first"
    said = check_growth(
        text,
        rf"^kv_cache=(?P<kv>False|True), 64 tokens: ITL {NUM} ms at token \d+ -> {NUM} ms at token \d+; the later "
        rf"half (?P<growth>{NUM[1:-1]})x the earlier half, (?P<agree>{NUM[1:-1]})% of (?P<n>\d+) requests slower: "
        r"(?P<verdict>[a-z ]+)\.$",
    )
    assert set(said) == {"True", "False"}
