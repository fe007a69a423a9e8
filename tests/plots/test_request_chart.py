import numpy as np
import pytest
from plots_helpers import decode

from workbench.errors import ConfigError
from workbench.plots import request_flame_chart
from workbench.plots.timeline import nesting_depth
from workbench.plots.style import KIND_COLORS


def bars(fig):
    return {t["name"]: t for t in fig.to_dict()["data"]}


def test_one_request_as_bars_by_kind_and_depth(trace_events):
    fig = request_flame_chart(trace_events)
    layout = fig.to_dict()["layout"]
    assert layout["title"]["text"] == "Request flame chart: ProfilerStep#0, 1 ms"
    assert list(layout["yaxis"]["categoryarray"]) == [
        "thread 100 · 0",
        "thread 100 · 1",
        "thread 100 · 2",
        "thread 100 · 3",
        "GPU 0 stream 7",
    ]
    data = bars(fig)
    assert list(data) == [
        "stage",
        "CPU op",
        "runtime / launch",
        "kernel",
        "memcpy HtoD pageable",
        "memcpy DtoH pinned",
        "memset",
    ]
    kernel = data["kernel"]
    assert decode(kernel["base"]) == [0.04, 0.2] and decode(kernel["x"]) == [0.005, 0.05]
    assert (
        list(kernel["y"]) == ["GPU 0 stream 7"] * 2
        and kernel["marker"]["color"] == KIND_COLORS["kernel"]
    )
    launches = data["runtime / launch"]
    depth_of = dict(zip(decode(launches["base"]), launches["y"]))
    assert (
        depth_of[0.025] == "thread 100 · 3"
    )  # cudaLaunchKernel inside aten::linear inside the stage
    assert depth_of[0.3] == "thread 100 · 2"  # cudaMemcpyAsync directly in the stage
    assert list(data["stage"]["text"]) == ["forward"]  # the stage name, without the range prefix
    assert list(data["kernel"]["text"]) == [
        "",
        "vectorized_elementwise_kernel",
    ]  # 5 us < 4 % of 1 ms: hover only
    assert data["kernel"]["customdata"][0] == ["ampere_sgemm_128x64_tn", "5 us"]


def test_only_the_longest_bars_are_kept(trace_events):
    fig = request_flame_chart(trace_events, max_bars=5)
    assert fig.to_dict()["layout"]["title"]["text"].endswith("(10 shortest events not drawn)")
    assert sum(len(t["y"]) for t in fig.to_dict()["data"]) == 5


def test_request_out_of_range(trace_events):
    with pytest.raises(ConfigError, match="request=1, but the trace has 1 step"):
        request_flame_chart(trace_events, request=1)


def test_without_steps_the_whole_trace_is_one_request(trace_events):
    no_steps = trace_events[trace_events["name"].astype(str) != "ProfilerStep#0"]
    title = request_flame_chart(no_steps).to_dict()["layout"]["title"]["text"]
    assert title.startswith("Request flame chart: whole trace (no ProfilerStep ranges)")


def test_cpu_only_trace_draws_host_calls(cpu_events):
    data = bars(request_flame_chart(cpu_events))
    assert list(data) == ["CPU op"] and len(data["CPU op"]["y"]) == 3


def test_nesting_depth():
    ts = np.array([0, 10, 20, 50, 100])
    dur = np.array([100, 60, 10, 5, 10])
    assert nesting_depth(ts, dur).tolist() == [0, 1, 2, 2, 0]


def test_each_lane_of_a_deep_request_is_tall_enough_for_a_ten_pixel_label(tmp_path):
    """Ten nested lanes in a 320 px figure left 16 px a lane under the margins: labels of about 5 px (issue 40)."""
    from tests.support.synthetic import TraceBuilder
    from workbench.plots.timeline import LANE_PX
    from workbench.trace import load_events

    b = TraceBuilder()
    b.annotation("ProfilerStep#0", 0, 1_000_000)
    for depth in range(1, 10):  # each op nested in the one before: ten lanes on thread 100
        b.op(f"op{depth}", 1_000 * depth, 1_000_000 - 2_000 * depth)
    layout = request_flame_chart(load_events(b.write(tmp_path / "deep.json"))).to_dict()["layout"]
    lanes = len(layout["yaxis"]["categoryarray"])
    per_lane = (layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]) / lanes
    assert lanes == 10 and per_lane == LANE_PX == 26
    assert layout["uniformtext"] == {"minsize": 10, "mode": "hide"}  # a thinner bar shows no label
