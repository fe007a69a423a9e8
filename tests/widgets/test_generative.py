"""GenerativeExplorer through its widget state: controls -> simulated curve beside the live runs, caches."""

from __future__ import annotations

import pytest

from tests.support.continuous_runs import continuous_run
from workbench.widgets import GenerativeExplorer
from workbench.widgets.batching import RATES

BOUNDS = dict(ttft_ms=0.001, tpot_ms=0.0011)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Folders of fp32 runs at 1,000 and 200,000 req/s and a bf16 run at 1,000."""
    root = tmp_path_factory.mktemp("continuous")
    made = [("fp32", 1000.0), ("fp32", 200_000.0), ("bf16", 1000.0)]
    return [continuous_run(r, p).save(root / f"{p}-r{r:g}") for p, r in made]


def explorer(runs, **kw) -> GenerativeExplorer:
    return GenerativeExplorer(runs, debounce_s=0, requests=40, seed=2, **BOUNDS, **kw).wait()


def test_first_view_is_fp32_at_its_highest_recorded_rate_beside_its_live_runs(runs):
    ex = explorer(runs)
    assert ex.precision.options == ("bf16", "fp32") and ex.precision.value == "fp32"
    assert (ex.max_num_seqs.value, ex.max_batched_tokens.value, ex.chunk_tokens.value) == (4, 64, 0)
    assert ex.rate.value == 200_000.0 and list(ex.rates) == [50_000.0 * k for k in range(1, 11)]
    fig = ex.pane.figure
    assert [t.name for t in fig.data] == ["simulated", "measured", "this setting"] * 3
    assert list(fig.data[1].customdata) == [1000.0, 200_000.0]  # fp32's live runs, not bf16's
    # the simulated point at the recorded rate and arrivals is the live run's, to the nanosecond
    assert fig.data[2].x == (fig.data[1].x[1],) and fig.data[2].y == (fig.data[1].y[1],)
    assert ex.status.value.startswith(
        "fp32, 2e+05 req/s offered: 2.062e+05 req/s, TTFT p99 0.00513 ms, ITL p99 0.0021 ms, "
        "goodput 42% (40 simulated requests; steps of fp32-r200000; measured points: "
        "max_num_seqs 4, max_batched_tokens 64)"
    )
    assert ex.simulations == RATES + 1 and ex.message == ""


def test_the_rate_alone_simulates_one_rate_and_a_setting_seen_before_none(runs):
    ex = explorer(runs)
    ex.set(rate=100_000.0).wait()
    assert ex.simulations == RATES + 2
    ex.set(max_num_seqs=2).wait()
    assert ex.simulations == 2 * RATES + 3  # a new policy: its curve and its point
    ex.set(max_num_seqs=4, rate=200_000.0).wait()
    assert ex.simulations == 2 * RATES + 3  # drawn from the cache
    ex.set(precision="bf16").wait()
    assert list(ex.pane.figure.data[1].customdata) == [1000.0]
    assert (
        ex.status.value.startswith("bf16, 2e+05 req/s")
        and "steps of bf16-r1000;" in ex.status.value
    )


def test_a_setting_the_scheduler_refuses_is_named_and_the_figure_stays(runs):
    ex = explorer(runs)
    shown = ex.pane.figure.to_dict()
    ex.set(max_batched_tokens=32).wait()  # a 40-token prompt does not fit without chunked prefill
    assert ex.message.startswith("request 0: a prompt of 40 tokens does not fit max_batched_tokens")
    assert ex.pane.figure.to_dict() == shown
    ex.set(chunk_tokens=16).wait()
    assert ex.message == "" and ex.status.value.startswith("fp32, 2e+05 req/s")


def test_start_false_waits_for_the_first_move(runs):
    ex = explorer(runs, start=False)
    assert ex.simulations == 0 and ex.pane.updates == 0
    ex.set(rate=100_000.0).wait()
    assert ex.simulations == RATES + 1
