import pytest
from plots_helpers import decode, summary_of

from workbench.errors import ConfigError
from workbench.plots import budget_figure


def test_bars_are_the_summary_percentiles_in_pipeline_order(toy_summary):
    data = budget_figure(toy_summary).to_dict()["data"]
    assert [t["name"] for t in data] == ["p50", "p95", "p99"]
    expected_x = ["parse", "model", "post", "unattributed", "end_to_end"]
    by_name = toy_summary.set_index("name")
    for trace, col in zip(data, ["p50_ms", "p95_ms", "p99_ms"]):
        assert list(trace["x"]) == expected_x
        assert decode(trace["y"]) == [by_name.loc[n, col] for n in expected_x]
    assert decode(data[2]["y"])[1] == 10.0  # model p99 is exactly 10 ms


def test_share_of_each_stage_is_in_the_hover(toy_summary):
    trace = budget_figure(toy_summary).to_dict()["data"][0]
    shares = [c[0] for c in trace["customdata"]]
    assert shares[1] == "82.6%"  # model: 10 ms of 12.101 ms mean
    assert [c[1] for c in trace["customdata"]] == [100] * 5
    ticks = budget_figure(toy_summary).to_dict()["layout"]["xaxis"]["ticktext"]
    assert list(ticks)[:2] == ["parse<br>0.4%", "model<br>82.6%"]


def test_sla_line_and_verdict(toy_summary):
    fig = budget_figure(toy_summary, sla_ms=12).to_dict()
    shapes = fig["layout"]["shapes"]
    assert len(shapes) == 1 and shapes[0]["y0"] == shapes[0]["y1"] == 12.0
    assert fig["layout"]["title"]["text"].endswith("end-to-end p99 12.20 ms, OVER the 12 ms SLA")
    assert (
        "within the 15 ms SLA"
        in budget_figure(toy_summary, sla_ms=15).to_dict()["layout"]["title"]["text"]
    )
    assert "shapes" not in budget_figure(toy_summary).to_dict()["layout"]


def test_waterfall_of_means_adds_up_to_end_to_end(toy_summary):
    trace = budget_figure(toy_summary, mode="waterfall").to_dict()["data"][0]
    assert list(trace["x"]) == ["parse", "model", "post", "unattributed", "end_to_end"]
    y = decode(trace["y"])
    assert y == [0.0505, 10.0, 2.0495, 0.001, 12.101]
    assert sum(y[:-1]) == pytest.approx(y[-1], abs=1e-12)
    assert list(trace["measure"]) == ["relative"] * 4 + ["total"]


def test_no_measured_requests_gives_an_annotated_empty_figure(toy_run):
    requests, stages, order = toy_run
    only_warm = requests.assign(warmup=True)
    fig = budget_figure(summary_of(only_warm, stages, order)).to_dict()
    assert fig["data"] == []
    assert fig["layout"]["annotations"][0]["text"] == "no measured requests in this run"


def test_bad_input_names_the_problem(toy_summary):
    with pytest.raises(ConfigError, match="missing columns"):
        budget_figure(toy_summary.drop(columns=["p99_ms"]))
    with pytest.raises(ConfigError, match="mode="):
        budget_figure(toy_summary, mode="stacked")


def test_payload_is_small(toy_summary):
    assert len(budget_figure(toy_summary, sla_ms=20).to_json()) < 20_000


def _split_tail_run():
    """100 measured requests, parse 1 ms, model 5 ms, post 1 ms, 1 us glue; parse is 9 ms in requests 0 and 1,
    post 9 ms in requests 2 and 3: the slowest requests are slow in different stages."""
    from types import SimpleNamespace

    from plots_helpers import ORDER, make_run

    ms = 1_000_000
    durs = {
        "parse": [9 * ms if i < 2 else ms for i in range(100)],
        "model": [5 * ms] * 100,
        "post": [9 * ms if i in (2, 3) else ms for i in range(100)],
    }
    requests, stages = make_run(durs)
    return SimpleNamespace(
        requests=requests,
        stages=stages,
        stage_names=list(ORDER),
        meta=SimpleNamespace(noise=None, stacks=None),
    )


def test_requests_view_stacks_the_p99_requests_own_stages_which_add_up():
    from workbench.analysis.budget import percentile_request_parts, stage_summary

    run = _split_tail_run()
    summary = stage_summary(run)
    at = percentile_request_parts(run)
    # nearest rank: the 99th of 100 by (end to end, id): requests 0-3 tie at 15.001 ms, so #2 (parse 1, post 9)
    assert at["request"].tolist() == [53, 2]  # p50: the 50th, of 96 ties at 7.001 ms from #4
    p99 = at.iloc[1]
    assert (p99["parse"], p99["model"], p99["post"]) == (1.0, 5.0, 9.0)
    assert p99["unattributed"] == pytest.approx(0.001) and p99["end_to_end"] == pytest.approx(
        15.001
    )
    fig = budget_figure(summary, mode="requests", at=at).to_dict()
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    assert [t["name"] for t in bars] == ["parse", "model", "post", "unattributed"]
    assert list(bars[0]["x"]) == ["p50 request (#53)", "p99 request (#2)"]
    stacked = sum(decode(t["y"])[1] for t in bars)
    marker = next(t for t in fig["data"] if t["name"] == "end to end")
    assert stacked == pytest.approx(decode(marker["y"])[1]) == pytest.approx(15.001)
    assert fig["layout"]["barmode"] == "stack"
    # each stage's own p99 taken apart sums past the end-to-end p99: why the percentile view never stacks
    stages = summary[summary["kind"] == "stage"]["p99_ms"].sum()
    assert stages > summary.set_index("name").loc["end_to_end", "p99_ms"] + 5


def test_percentile_view_says_its_bars_do_not_add_up(toy_summary):
    fig = budget_figure(toy_summary).to_dict()
    assert fig["layout"]["barmode"] == "group"
    assert "do not add up" in fig["layout"]["legend"]["title"]["text"]


def test_requests_view_needs_its_requests(toy_summary):
    with pytest.raises(ConfigError, match="percentile_request_parts"):
        budget_figure(toy_summary, mode="requests")


def test_run_budget_figure_computes_the_percentile_requests():
    from workbench.plots.budget import run_budget_figure

    fig = run_budget_figure(_split_tail_run(), mode="requests").to_dict()
    assert list(fig["data"][0]["x"]) == ["p50 request (#53)", "p99 request (#2)"]
