import numpy as np
import pytest
from plots_helpers import decode, make_run

from workbench.errors import ConfigError
from workbench.plots import distribution_figure


def traces(fig):
    return {t["name"]: t for t in fig.to_dict()["data"]}


def test_histogram_counts_every_measured_request_and_keeps_warmup_apart(toy_run):
    requests, stages, order = toy_run
    data = traces(distribution_figure(requests, stages, order))
    assert list(data)[:2] == ["measured (n=100)", "warm-up (n=2)"]
    assert [name.split()[0] for name in list(data)[2:]] == ["p50", "p95", "p99"]
    measured, warm = data["measured (n=100)"], data["warm-up (n=2)"]
    assert sum(decode(measured["y"])[:-1]) == 100
    assert sum(decode(warm["y"])[:-1]) == 2
    assert decode(measured["x"]) == decode(warm["x"])  # same bins
    edges = decode(measured["x"])
    assert edges[0] == pytest.approx(12.002) and edges[-1] == pytest.approx(
        133.001
    )  # min measured, max warm-up (ms)
    assert np.allclose(np.diff(np.log(edges)), np.log(edges[1] / edges[0]))  # log-spaced


def test_percentile_markers_are_the_measured_percentiles(toy_run):
    requests, stages, order = toy_run
    data = traces(distribution_figure(requests, stages, order, stage="parse"))
    assert decode(data["p50 0.0505 ms"]["x"]) == [0.0505] * 2
    assert decode(data["p95 0.095 ms"]["x"]) == [0.09505] * 2
    assert decode(data["p99 0.099 ms"]["x"]) == [0.09901] * 2


def test_percentile_values_are_in_the_legend_never_written_beside_the_lines(toy_run):
    """Labels beside the lines overprinted each other and the curve, clipped to "2 ms" at the edge of the static
    page, and their text widened the axis range until the histogram filled 5 % of the width."""
    requests, stages, order = toy_run
    for kind in ("histogram", "cdf"):
        fig = distribution_figure(requests, stages, order, stage="parse", kind=kind).to_dict()
        markers = [t for t in fig["data"] if t["name"].startswith("p")]
        assert [t["mode"] for t in markers] == ["lines"] * 3 and all(
            "text" not in t for t in markers
        )
        assert fig["layout"].get("annotations") is None
        assert all(t.get("showlegend", True) for t in markers)


def test_log_axis_is_labelled_at_decades_only(toy_run):
    """plotly labels minor ticks ("2", "5") on a short log axis: "9 0.1 2 3 ... 1 2"."""
    requests, stages, order = toy_run
    axis = distribution_figure(requests, stages, order).to_dict()["layout"]["xaxis"]
    assert (axis["type"], axis["dtick"], axis["ticksuffix"]) == ("log", 1, " ms")
    assert axis["range"] == [
        1,
        3,
    ]  # 12.002 .. 133.001 ms: the decades 10 ms .. 1000 ms, both labelled
    assert axis["minor"]["ticks"] == ""  # minor ticks: grid lines, no numbers
    parse = distribution_figure(requests, stages, order, stage="parse").to_dict()["layout"]["xaxis"]
    assert parse["range"][1] - parse["range"][0] >= 1


def test_cdf_endpoints(toy_run):
    requests, stages, order = toy_run
    fig = distribution_figure(requests, stages, order, stage="parse", kind="cdf", log_x=False)
    data = traces(fig)
    x, y = decode(data["measured (n=100)"]["x"]), decode(data["measured (n=100)"]["customdata"])
    assert len(x) == 100
    assert (x[0], y[0]) == (0.001, 0.01)
    assert (x[-1], y[-1]) == (0.1, 1.0)
    assert decode(data["warm-up (n=2)"]["x"]) == [40.0, 50.0]
    assert fig.to_dict()["layout"]["xaxis"]["type"] == "linear"


def test_cdf_is_thinned_but_keeps_min_and_max():
    durs = {"a": list(range(1_000, 1_000 + 50_000))}
    requests, stages = make_run(durs, glue_ns=0)
    fig = distribution_figure(requests, stages, ["a"], stage="a", kind="cdf", max_points=500)
    trace = fig.to_dict()["data"][0]
    x, y = decode(trace["x"]), decode(trace["customdata"])
    assert len(x) == 500
    assert (x[0], y[0]) == (0.001, 1 / 50_000)
    assert (x[-1], y[-1]) == (0.050999, 1.0)
    assert len(fig.to_json()) < 40_000


def test_end_to_end_excludes_failed_requests(toy_run):
    requests, stages, order = toy_run
    failed = requests.assign(ok=requests["request"] != 50)
    data = traces(distribution_figure(failed, stages, order))
    assert "measured (n=99)" in data


def test_empty_and_bad_arguments(toy_run):
    requests, stages, order = toy_run
    fig = distribution_figure(requests.iloc[0:0], stages.iloc[0:0], order).to_dict()
    assert (
        fig["data"] == []
        and fig["layout"]["annotations"][0]["text"] == "no successful requests for end to end"
    )
    with pytest.raises(ConfigError, match="kind="):
        distribution_figure(requests, stages, order, kind="violin")
    with pytest.raises(ConfigError, match="not in the pipeline"):
        distribution_figure(requests, stages, order, stage="nope")


def test_a_log_axis_says_so_in_its_title(toy_run):
    requests, stages, order = toy_run
    assert (
        distribution_figure(requests, stages, order).to_dict()["layout"]["xaxis"]["title"]["text"]
        == "end to end latency (ms, log scale)"
    )
    linear = distribution_figure(requests, stages, order, log_x=False).to_dict()["layout"]["xaxis"][
        "title"
    ]["text"]
    assert linear == "end to end latency (ms)"


def test_the_cdf_gives_each_decade_of_the_tail_the_same_height(toy_run):
    """On a 0..1 axis the slowest 10 % of requests were a sliver at y = 1 (issue 40): heights are in nines."""
    requests, stages, order = toy_run
    fig = distribution_figure(requests, stages, order, stage="parse", kind="cdf", log_x=False)
    measured = traces(fig)["measured (n=100)"]
    fraction, height = decode(measured["customdata"]), decode(measured["y"])
    at = {f: h for f, h in zip(fraction, height)}
    assert [round(at[f], 5) for f in (0.5, 0.9, 0.99, 1.0)] == [0.30103, 1.0, 2.0, 3.0]
    axis = fig.to_dict()["layout"]["yaxis"]
    assert axis["range"] == [0, 3] and axis["tickvals"] == [0, 1, 2, 3]
    assert axis["ticktext"] == ["0", "0.9", "0.99", "0.999"]  # p90..max: two thirds of the height
