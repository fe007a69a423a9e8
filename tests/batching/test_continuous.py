import itertools

import pandas as pd
import pytest

from workbench.analysis.tokens import token_requests, unit_gaps
from workbench.batching.arrivals import Arrivals
from workbench.batching.continuous import (
    FEATURES,
    ContinuousPolicy,
    Scheduler,
    Seq,
    StepTimes,
    fit_step_times,
    goodput,
    goodput_curve,
    goodput_knee,
    simulate_continuous,
)
from workbench.errors import ConfigError

# a decode step 1000 ns + 100 per sequence + 1 per context token; a prefill chunk 500 + 10 per token
TIMES = StepTimes((1000.0, 100.0, 1.0, 500.0, 10.0))


def figures(run):
    per = token_requests(run.requests, run.stages, run.units).set_index("request")
    gaps = unit_gaps(run.requests, run.units)
    return per, {r: g["itl_ns"].tolist() for r, g in gaps.groupby("request")}


def test_requests_join_and_leave_between_steps_with_chunked_prefill():
    # step 1 (t=0): r0 and r1 join (max 2); r0 prefills a chunk of 4 of 6, r1 its 2: 2*500 + 6*10
    # step 2 (1060): r1 decodes (context 3): 1000+100+3, r0 its last 2 prompt tokens: 500+20 -> 2683
    # step 3 (2683): r1 left, r2 (arrived at 100) joins; r0 decodes (context 7), r2 prefills 1 -> 4300
    # step 4 (4300): r2 left after its one token; r0 decodes (context 8): 1108 -> 5408
    run = simulate_continuous(
        [0, 0, 100], [(6, 3), (2, 2), (1, 1)], TIMES, ContinuousPolicy(2, 8, chunk_tokens=4)
    )
    per, itl = figures(run)
    assert per["ttft_ns"].tolist() == [2683, 1060, 4200]
    assert per["end_to_end_ns"].tolist() == [5408, 2683, 4200]
    assert per["tokens_out"].tolist() == [3, 2, 1]
    assert itl == {0: [1617, 1108], 1: [1623]}
    assert per["tpot_ns"].tolist()[:2] == [1362, 1623]
    waits = run.stages[run.stages["stage"] == "queue_wait"]["dur_ns"].tolist()
    assert waits == [0, 0, 2583]  # r2 waited for a free sequence from 100 to 2683
    assert run.steps["dur_ns"].tolist() == [1060, 1623, 1617, 1108]
    assert run.steps[list(FEATURES)].values.tolist() == [
        [0, 0, 0, 2, 6],
        [1, 1, 3, 1, 2],
        [1, 1, 7, 1, 1],
        [1, 1, 8, 0, 0],
    ]


def test_a_whole_prompt_waits_for_a_step_with_room():
    sched = Scheduler(ContinuousPolicy(4, 6))
    for i, prompt in enumerate((4, 3)):
        sched.arrive(Seq(i, 0, prompt, 2))
    sched.admit(0)
    first = sched.plan()
    assert [(s.request, n) for s, n in first.prefill] == [(0, 4)]  # 3 more do not fit in 6
    sched.advance(first)
    second = sched.plan()  # r0 decodes one, r1's 3 fit in the 5 left
    assert [s.request for s in second.decode] == [0]
    assert [(s.request, n) for s, n in second.prefill] == [(1, 3)]


def test_a_prompt_longer_than_the_budget_needs_chunks():
    with pytest.raises(ConfigError, match="does not fit max_batched_tokens"):
        Scheduler(ContinuousPolicy(2, 8)).arrive(Seq(0, 0, 9, 1))
    with pytest.raises(ConfigError, match="at least max_num_seqs"):
        ContinuousPolicy(16, 8)


def test_the_fit_recovers_the_step_model_and_drops_a_negative_term():
    rows = []
    for seqs, ctx, chunks, tokens in itertools.product(
        (0, 1, 4), (0, 50, 300), (0, 1, 2), (0, 7, 64)
    ):
        feats = (int(seqs > 0), seqs, ctx if seqs else 0, chunks, tokens if chunks else 0)
        rows.append(dict(zip(FEATURES, feats)) | {"dur_ns": TIMES.step_ns_of(feats)})
    steps = pd.DataFrame(rows)
    assert fit_step_times(steps).coef_ns == pytest.approx(TIMES.coef_ns)
    # a term that only lowers the fit is dropped (coefficient 0), the others refit
    steps["dur_ns"] = (
        1000 * steps["decode_step"] + 500 * steps["prefill_chunks"] - 2 * steps["prefill_tokens"]
    )
    coef = fit_step_times(steps).coef_ns
    assert coef[FEATURES.index("prefill_tokens")] == 0.0
    assert min(coef) >= 0.0


def test_goodput_and_the_rate_where_it_falls_short():
    per = pd.DataFrame(
        {
            "ttft_ns": [1_000_000, 3_000_000, 1_000_000],
            "tpot_ns": pd.array([100_000, 100_000, None], "Int64"),
        }
    )
    assert goodput(per, ttft_ms=2.0, tpot_ms=0.2) == pytest.approx(2 / 3)
    assert goodput(per, ttft_ms=5.0, tpot_ms=0.05) == pytest.approx(1 / 3)  # one token: no TPOT
    assert goodput(per.iloc[:0], 1.0, 1.0) is None
    knee = goodput_knee([4.0, 1.0, 2.0], [0.5, 1.0, 0.95], target=0.9)
    assert knee == {"target": 0.9, "last_good_rps": 2.0, "first_short_rps": 4.0}
    assert goodput_knee([1.0], [0.5], 0.9)["last_good_rps"] is None
    assert goodput_knee([1.0], [0.95], 0.9)["first_short_rps"] is None


def test_the_fit_takes_each_shape_s_median_so_a_preempted_call_does_not_pull_it():
    rows = [
        dict(zip(FEATURES, (1, b, 0, 0, 0))) | {"dur_ns": 1000 + 100 * b + extra}
        for b in (1, 2, 4)
        for extra in (0, 0, 5_000_000 if b == 4 else 0)  # one call of b=4 lost 5 ms to the machine
    ]
    assert fit_step_times(pd.DataFrame(rows)).coef_ns == pytest.approx((1000, 100, 0, 0, 0))


def test_the_fit_is_a_median_line_a_preempted_step_of_its_own_shape_does_not_pull():
    rows = [dict(zip(FEATURES, (1, b, 0, 0, 0))) | {"dur_ns": 1000 + 100 * b} for b in range(1, 8)]
    rows[3]["dur_ns"] += 5_000_000  # b=4 measured once, 5 ms lost to the machine
    coef = fit_step_times(pd.DataFrame(rows)).coef_ns
    assert coef == pytest.approx((1000, 100, 0, 0, 0), rel=1e-3)


def test_the_goodput_curve_finds_where_the_simulated_server_stops_keeping_its_bounds():
    # 40 requests of 20 prompt and 10 answer tokens; alone one has TTFT 0.7 us and TPOT 1.1 us
    lengths = [(20, 10)] * 40
    table, knee = goodput_curve(
        TIMES,
        ContinuousPolicy(4, 64),
        lengths,
        [1e3, 1e5, 1e6, 1e7],
        ttft_ms=0.005,
        tpot_ms=0.002,
        target=0.9,
    )
    # past capacity (~230k req/s: 4 sequences of 10 steps of ~1.5 us) only the first 4 keep TTFT
    assert table["goodput"].tolist() == [1.0, 1.0, 0.1, 0.1]
    assert knee == {"target": 0.9, "last_good_rps": 1e5, "first_short_rps": 1e6}
    assert table["throughput_rps"].is_monotonic_increasing


def test_the_goodput_curve_s_throughput_runs_from_the_first_arrival_to_the_last_token():
    lengths, policy = [(20, 10)] * 40, ContinuousPolicy(4, 64)
    table, _ = goodput_curve(TIMES, policy, lengths, [1e5], ttft_ms=1, tpot_ms=1, target=0.9)
    arrivals = Arrivals("poisson", rate_rps=1e5, count=40, seed=0).times_ns()
    run = simulate_continuous(arrivals, lengths, TIMES, policy)
    last_ns = int((run.requests["start_ns"] + run.requests["dur_ns"]).max())
    # the first arrival is ~10 us in, a few % of the span: from 0 the throughput reads low
    assert table["throughput_rps"].tolist() == [pytest.approx(40e9 / (last_ns - arrivals[0]))]


def test_the_fit_keeps_each_step_s_residual_and_the_loop_s_time_between_steps():
    # decodes of 1 sequence (1100 ns modelled): nine on time, one 2200 ns late (an interrupt); each
    # starts 50 ns after the previous end, but the first follows an idle wait (no decode) of 10 us
    rows, start = [dict(zip(FEATURES, (0, 0, 0, 1, 10))) | {"start_ns": 0, "dur_ns": 600}], 600
    for k in range(10):
        start += 10_000 if k == 0 else 50
        dur = 3300 if k == 4 else 1100
        rows.append(dict(zip(FEATURES, (1, 1, 0, 0, 0))) | {"start_ns": start, "dur_ns": dur})
        start += dur
    model = fit_step_times(pd.DataFrame(rows))
    assert model.step_ns_of((1, 1, 0, 0, 0)) == 1100 and model.step_ns_of((0, 0, 0, 1, 10)) == 600
    assert model.between_ns == 50.0  # the gaps before decodes; the idle one precedes a prefill
    assert len(model.noise_ns) == 100 and model.noise_ns[0] == pytest.approx(0, abs=1e-6)
    assert model.noise_ns[-1] == pytest.approx(2200) and sum(q > 1 for q in model.noise_ns) == 9
    assert StepTimes.from_dict(model.describe(), model.noise_ns) == model
    assert StepTimes.from_dict(TIMES.describe() | {"between_ns": 0}).between_ns == 0.0
    # steps timed alone have no start_ns: the loop's time is unknown there, 0
    assert fit_step_times(pd.DataFrame(rows).drop(columns="start_ns")).between_ns == 0.0


def test_the_simulator_draws_each_step_s_noise_with_its_seed_after_the_loop_s_time():
    steady = simulate_continuous([0], [(1, 3)], TIMES, ContinuousPolicy(2, 8))
    assert steady.steps["dur_ns"].tolist() == [510, 1102, 1103]
    looped = StepTimes(TIMES.coef_ns, between_ns=40.0)
    run = simulate_continuous([0], [(1, 3)], looped, ContinuousPolicy(2, 8))
    assert run.steps["start_ns"].tolist() == [40, 590, 1732]  # 40 ns before each step
    noisy = StepTimes(TIMES.coef_ns, noise_ns=(0.0, 1000.0, -5000.0))
    drawn = [
        simulate_continuous([0], [(1, 3)], noisy, ContinuousPolicy(2, 8), seed=s).steps["dur_ns"]
        for s in range(30)
    ]
    for k, base in enumerate((510, 1102, 1103)):  # each step + 0, + 1000 or floored at 0
        assert {d.iloc[k] for d in drawn} == {base, base + 1000, 0}
    again = simulate_continuous([0], [(1, 3)], noisy, ContinuousPolicy(2, 8), seed=3)
    assert again.steps["dur_ns"].tolist() == drawn[3].tolist()
