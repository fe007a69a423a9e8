import subprocess
import sys

import workbench.batching as batching


def test_all_is_exact():
    assert batching.__all__ == sorted(
        [
            "Arrivals",
            "BatchFormer",
            "ContinuousPolicy",
            "StepTimes",
            "fit_step_times",
            "goodput",
            "goodput_knee",
            "simulate_continuous",
            "BatchPolicy",
            "DynamicBatcher",
            "ServiceModel",
            "Simulation",
            "load_summary",
            "read_arrivals_csv",
            "run_load",
            "service_model_from_runs",
            "simulate",
            "sweep",
        ]
    )
    for name in batching.__all__:
        assert callable(getattr(batching, name))


SIMULATE_WITHOUT_TORCH = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in {'torch', 'plotly', 'ipywidgets'}:
            raise ImportError('blocked for test: ' + name)
sys.meta_path.insert(0, Block())
from workbench.batching import Arrivals, BatchPolicy, ServiceModel, simulate, sweep, load_summary
from workbench.batching import policy, live, summary, continuous, continuous_live
m = ServiceModel.from_samples({1: [1e6], 4: [2e6]})
s = load_summary(simulate(m, Arrivals('poisson', rate_rps=500, count=1000), BatchPolicy(4, 1)).requests)
print(s['end_to_end']['count'])
"""


def test_simulator_and_live_modules_import_without_torch():
    proc = subprocess.run(
        [sys.executable, "-c", SIMULATE_WITHOUT_TORCH], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1000"
