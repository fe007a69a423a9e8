"""Our traces open in TensorBoard's (deprecated) profiler plugin, torch-tb-profiler 0.4.3.

The plugin's own parser reads the recorded runs' traces and finds the
ProfilerStep steps; we only check compatibility, never use its figures.
"""

from pathlib import Path

import pytest

from workbench import load_run

pytestmark = pytest.mark.filterwarnings(
    "ignore:The copy keyword is deprecated"
)  # inside the plugin

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


@pytest.mark.parametrize("name", ["text-cpu-bs8-fp32", "image-cuda-bs64-fp32"])
def test_torch_tb_profiler_parses_our_trace(name, tmp_path):
    data = pytest.importorskip("torch_tb_profiler.profiler.data")
    trace = load_run(RUNS / name).trace_path
    profile = data.RunProfileData.parse(trace.name.split(".")[0], None, str(trace), str(tmp_path))
    assert profile.steps_names == ["1", "2", "3"]
    assert profile.has_kernel == ("cuda" in name)
