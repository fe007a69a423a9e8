"""The public names of workbench.plots, the light import of workbench, and payload size on a big trace."""

import subprocess
import sys
from pathlib import Path

import workbench.plots as plots

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_public_names_are_exact():
    public = sorted(n for n, v in vars(plots).items() if callable(v) and not n.startswith("_"))
    assert public == [
        "attribute_figure",
        "batching_curves_figure",
        "budget_figure",
        "compare_figure",
        "distribution_figure",
        "flame_figure",
        "generative_figure",
        "gpu_timeline_figure",
        "latency_over_run_figure",
        "launch_figure",
        "queueing_breakdown_figure",
        "ratio_figure",
        "request_flame_chart",
        "step_breakdown_figure",
        "survival_figure",
        "tail_figure",
        "trace_flame_figure",
        "transfer_figure",
        "wait_time_figure",
    ]


def test_workbench_and_its_analyses_do_not_import_plotly():
    code = (
        "import sys, workbench, workbench.analysis.budget, workbench.analysis.flame; "
        "sys.exit('plotly' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_every_trace_figure_stays_small_on_a_synthetic_trace():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_figures
    finally:
        sys.path.remove(str(BENCHMARKS))
    events = bench_figures.synthetic_events(30_000)
    rows = bench_figures.run(events, baseline=True)
    assert [r["figure"] for r in rows] == list(bench_figures.figures())
    for row in rows:
        assert row["bytes"] < bench_figures.GOAL_BYTES, row
    by_name = {r["figure"]: r for r in rows}
    assert by_name["GPU timeline"]["bytes_ratio"] > 10  # raw bars ship every event


def test_a_title_of_several_lines_is_padded_to_start_inside_the_figure():
    """plotly drew a title with <br> lines 12 px higher than a one-line title: the launch verdict was cut off."""
    import plotly.graph_objects as go

    from workbench.plots.style import layout

    pads = [
        layout(go.Figure(), t).to_dict()["layout"]["title"]["pad"]["t"]
        for t in ("a", "a<br><sup>b</sup>")
    ]
    assert pads == [10, 22]
