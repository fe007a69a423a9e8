"""The trace model: events loaded once, the launch join and other derived tables computed
once and shared by every analysis (``analyze()`` joined GPU work to launches 11 times)."""
import pytest

from workbench.analysis import launches, steps, trace_report, trace_stages, transfers
from workbench.analysis.model import TraceModel, model_of
from workbench.trace import load_trace
from workbench.trace.synthetic import example_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return load_trace(example_trace().write(tmp_path_factory.mktemp("m") / "t.json"))


def test_analyze_joins_launches_once(trace, monkeypatch):
    calls = []
    real = launches.join_launches
    monkeypatch.setattr(launches, "join_launches", lambda model: calls.append(model) or real(model))
    report = trace_report.analyze(trace)
    assert len(calls) == 1
    assert report["launch_pairs"]["count"] == 4 and report["launches"]["graph_gpu_count"] == 2
    assert report["trace"]["path"] == str(trace.path) and report["trace"]["events"] == 19


def test_model_tables_are_the_analyses_results(trace):
    model = TraceModel.of(trace)
    assert model_of(model) is model and model.path == trace.path and model.meta["platform"] == "cuda"
    events = trace.events
    assert model.launch_pairs.equals(launches.launch_pairs(events))
    assert model.launch_calls.equals(launches.launch_calls(events))
    assert model.profiler_steps.equals(steps.profiler_steps(events))
    assert model.trace_stage_summary.equals(trace_stages.trace_stage_summary(events))
    assert model.memcpy_events.equals(transfers.memcpy_events(events))
    joined = model.gpu_work_with_launch
    assert joined["launch_name"].tolist()[:3] == ["cudaLaunchKernel", "cudaMemcpyAsync", "cudaLaunchKernel"]
    assert joined["launch_ts_ns"].isna().tolist() == [False] * 6 + [True] * 2  # the two orphan kernels


def test_callers_cannot_change_the_cached_tables(trace):
    model = TraceModel.of(trace)
    pairs = launches.launch_pairs(model)
    pairs["launch_delay_ns"] = 0
    assert launches.launch_pairs(model)["launch_delay_ns"].tolist() == [20_000, 15_000, 138_000, 19_500]
    assert launches.launch_pairs(model) is not model.launch_pairs


def test_other_launch_names_are_computed_not_cached(trace):
    model = TraceModel.of(trace)
    graph = launches.launch_pairs(model, names={"cudaGraphLaunch"})
    assert graph["gpu_name"].tolist() == ["g1", "g2"] and len(model.launch_pairs) == 4


def test_old_name_of_the_trace_stage_summary_warns(trace):
    with pytest.deprecated_call(match="trace_stage_summary"):
        old = trace_stages.stage_summary(trace.events)
    assert old.equals(trace_stages.trace_stage_summary(trace.events))


def test_model_of_refuses_other_types():
    with pytest.raises(TypeError, match="events table, a Trace or a TraceModel"):
        model_of([1, 2])
