import numpy as np
import pytest
from plots_helpers import decode, make_run

from workbench.errors import ConfigError
from workbench.plots import survival_figure
from workbench.plots.distributions import survival_points


def test_survival_is_the_share_at_least_this_slow_down_to_one_request():
    x, y = survival_points(np.array([3, 1, 2]) * 1_000_000)
    assert x.tolist() == [1.0, 2.0, 3.0]
    assert y.tolist() == pytest.approx([1.0, 2 / 3, 1 / 3])


def test_thinning_keeps_every_one_of_the_slowest_ranks():
    x, y = survival_points(np.arange(1, 10_001) * 1_000, max_points=100)
    assert len(x) <= 100 and x[0] == 0.001 and y[0] == 1.0
    assert x[-50:].tolist() == [
        (10_000 - 49 + i) / 1_000 for i in range(50)
    ]  # the slowest 50, exact
    assert y[-1] == 1 / 10_000


def test_figure_log_axes_p99_and_the_count_p999_needs(toy_run):
    fig = survival_figure(*toy_run, stage="post").to_dict()
    line, p99, top, p999 = fig["data"]
    assert line["name"] == "measured (n=100)"  # warm-up left out
    assert decode(line["x"])[-1] == pytest.approx(2.099) and decode(line["y"])[-1] == 0.01
    assert p99["name"] == "p99 2.1 ms" and decode(p99["x"]) == pytest.approx([2.09801] * 2)
    assert top["name"] == "max 2.1 ms (at or above p97.05)"  # 100 * 0.05 ** (1 / 100) = 97.049
    assert decode(top["x"]) == pytest.approx([2.099]) and decode(top["y"]) == [0.01]
    assert p999["name"] == "p99.9: 100 requests; 5661 bound it"
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    assert fig["layout"]["yaxis"]["ticktext"] == ["all", "1 in 10", "1 in 100"]


def test_figure_draws_p999_with_its_interval_when_the_count_bounds_it():
    requests, stages = make_run({"model": [1_000_000 * (i + 1) for i in range(6000)]}, glue_ns=0)
    fig = survival_figure(requests, stages, ["model"]).to_dict()
    p999 = fig["data"][3]
    assert p999["name"] == "p99.9 5994 ms [5989, 6000]"
    assert decode(p999["x"]) == pytest.approx([5994.001] * 2)
    assert decode(p999["y"]) == pytest.approx([1 / 6000, 1.0])


def test_unknown_stage_is_refused_and_no_requests_give_an_empty_figure(toy_run):
    with pytest.raises(ConfigError, match="stage='nope' is not in"):
        survival_figure(*toy_run, stage="nope")
    requests, stages, order = toy_run
    fig = survival_figure(requests[requests["warmup"]], stages, order).to_dict()
    assert "no successful measured requests" in fig["layout"]["annotations"][0]["text"]


def test_the_share_axis_title_fits_the_plot_height(toy_run):
    """ "share of requests this slow or slower (log scale)" (345 px at 14 px) ran out of a 290 px plot (issue 40)."""
    layout = survival_figure(*toy_run).to_dict()["layout"]
    plot_px = 450 - layout["margin"]["t"] - layout["margin"]["b"]
    title = layout["yaxis"]["title"]["text"]
    assert title == "share this slow or slower" and len(title) * 7.7 < plot_px
