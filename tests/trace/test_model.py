"""The one trace model: events loaded once, the launch join and the other derived tables computed
once per :class:`Trace` and shared by every analysis (``analyze()`` joined GPU work to launches
11 times before the model existed)."""

import subprocess
import sys

import pandas as pd
import pytest

from workbench.analysis import launches, trace_report, trace_stages, transfers
from workbench.trace import Trace, derived, load_trace
from tests.support import tables
from tests.support.synthetic import example_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return load_trace(example_trace().write(tmp_path_factory.mktemp("m") / "t.json"))


def test_analyze_joins_launches_once(tmp_path, monkeypatch):
    fresh = load_trace(example_trace().write(tmp_path / "t.json"))
    computed = []
    real = Trace.derive
    monkeypatch.setattr(
        Trace,
        "derive",
        lambda self, fn: (
            (computed.append(fn.__name__) if fn not in self._memo else None) or real(self, fn)
        ),
    )
    report = trace_report.analyze(fresh)
    assert computed.count("launch_join") == 1  # the numpy join every launch table reads
    assert len(computed) == len(set(computed))  # every derived table computed once
    assert report["launch_pairs"]["count"] == 4 and report["launches"]["graph_gpu_count"] == 2
    assert report["trace"]["path"] == str(fresh.path) and report["trace"]["events"] == 19


def test_derived_tables_are_memoised_on_the_trace(trace):
    assert trace.meta["platform"] == "cuda" and repr(trace).endswith("19 events)")
    assert launches.launch_pairs(trace).equals(launches.launch_pairs(trace))
    assert launches.launch_join(trace) is launches.launch_join(trace)
    assert tables.gpu_work_with_launch(trace).equals(tables.gpu_work_with_launch(trace))
    joined = tables.gpu_work_with_launch(trace)
    assert joined["launch_name"].tolist()[:3] == [
        "cudaLaunchKernel",
        "cudaMemcpyAsync",
        "cudaLaunchKernel",
    ]
    assert (
        joined["launch_ts_ns"].isna().tolist() == [False] * 6 + [True] * 2
    )  # the two orphan kernels
    assert len(tables.profiler_steps(trace)) == 2 and transfers.copy_table(trace)["key"].size == 1
    assert trace_stages.trace_stage_summary(trace)["stage"].tolist() == ["forward"]


def test_a_trace_built_from_a_table_has_its_own_memo(trace):
    other = Trace(trace.events)
    assert other.path is None and other.meta == {} and len(other) == 19
    assert Trace(trace.events.iloc[:0]) and len(Trace(trace.events.iloc[:0])) == 0
    assert launches.launch_pairs(other).equals(launches.launch_pairs(trace))
    assert Trace.of(other) is other and Trace.of(trace.events).events is trace.events


def test_callers_cannot_change_the_memoised_tables(trace):
    pairs = launches.launch_pairs(trace)
    pairs["launch_delay_ns"] = 0
    assert launches.launch_pairs(trace)["launch_delay_ns"].tolist() == [
        20_000,
        15_000,
        138_000,
        19_500,
    ]
    assert launches.launch_pairs(trace) is not pairs


def test_derived_runs_once_per_trace(trace):
    runs = []

    @derived
    def table(t: Trace) -> pd.DataFrame:
        runs.append(t)
        return pd.DataFrame({"n": [len(t.events)]})

    assert (
        table(trace)["n"].tolist() == [19]
        and table(trace)["n"].tolist() == [19]
        and runs == [trace]
    )


def test_other_launch_names_are_computed_not_memoised(trace):
    graph = launches.launch_pairs(trace, names={"cudaGraphLaunch"})
    assert graph["gpu_name"].tolist() == ["g1", "g2"] and len(launches.launch_pairs(trace)) == 4


def test_trace_of_refuses_other_types():
    with pytest.raises(TypeError, match="a workbench.trace.Trace or an events table, got list"):
        Trace.of([1, 2])


def test_trace_does_not_import_analysis():
    """The dependency runs one way: trace -> analysis, never back (the old model closed a cycle)."""
    code = (
        "import sys, workbench.trace, workbench.trace.load; "
        "print(sorted(m for m in sys.modules if m.startswith('workbench.analysis')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_columns_and_the_pandas_table_are_the_same_events(trace):
    """The loader builds numpy columns; ``events`` is built from them, and read back gives them again."""
    import pandas as pd

    from workbench.trace.columns import Columns

    cols = trace.columns
    assert len(cols) == len(trace.events) == 19
    back = Columns.from_frame(trace.events)
    assert (back.ts_ns == cols.ts_ns).all() and (back.correlation == cols.correlation).all()
    assert list(back.name.labels) == list(cols.name.labels) and (back.kind == cols.kind).all()
    pd.testing.assert_frame_equal(back.to_frame(), trace.events, check_exact=True)
    assert cols.name.take(cols.of_kinds(["kernel"])).values().tolist()[:2] == ["gemm", "relu"]
