"""One memcpy classification: the analysis' classes and the palette agree (AMD ``Host`` memory
is its own kind, not pageable), in the transfer view, the flame graph and the request chart."""

from workbench.analysis.transfers import classify_copy, memcpy_by_host_memory
from workbench.plots import request_flame_chart
from workbench.plots.flame import trace_flame_figure
from workbench.plots.style import KIND_COLORS, KIND_LABELS, copy_palette_key, kind_key
from workbench.plots.transfers import transfer_figure
from workbench.trace import load_trace
from tests.support.synthetic import example_trace

HOST_COPY = "Memcpy HtoD (Host -> Device)"


def test_palette_keys_follow_the_analysis_classes():
    assert classify_copy(HOST_COPY) == ("HtoD", "Host")
    assert (
        kind_key("memcpy", HOST_COPY)
        == "memcpy_htod_host"
        != kind_key("memcpy", "Memcpy HtoD (Pageable -> Device)")
    )
    assert KIND_LABELS["memcpy_htod_host"] == "memcpy HtoD host (AMD)"
    assert [
        copy_palette_key(d, h)
        for d, h in [
            ("DtoD", None),
            ("DtoH", "Pinned"),
            ("HtoD", None),
            ("HtoD", "Managed"),
            ("PtoP", None),
        ]
    ] == ["memcpy_dtod", "memcpy_dtoh_pinned", "memcpy", "memcpy", "memcpy"]


def test_amd_host_copies_are_one_class_with_one_color_everywhere(tmp_path):
    events = load_trace(example_trace(rocm=True).write(tmp_path / "rocm.json"))
    assert memcpy_by_host_memory(events)["key"].tolist() == ["HtoD Host"]
    bars = transfer_figure(events).to_dict()["data"][0]
    assert list(bars["x"]) == ["HtoD Host", "memset"]
    assert list(bars["marker"]["color"]) == [KIND_COLORS["memcpy_htod_host"], KIND_COLORS["memset"]]
    flame = trace_flame_figure(events).to_dict()["data"][0]
    colors = dict(zip(flame["labels"], flame["marker"]["colors"]))
    assert colors[HOST_COPY] == KIND_COLORS["memcpy_htod_host"]
    chart = {t["name"] for t in request_flame_chart(events).to_dict()["data"]}
    assert "memcpy HtoD host (AMD)" in chart and "memcpy HtoD pageable" not in chart
