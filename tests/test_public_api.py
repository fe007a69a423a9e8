import subprocess
import sys

import workbench


def test_all_is_exact():
    assert workbench.__all__ == sorted(
        [
            "ConfigError",
            "Pipeline",
            "PipelineConfig",
            "PipelineError",
            "PrecisionError",
            "Run",
            "RunRecordError",
            "Stage",
            "TraceError",
            "WorkbenchError",
            "budget",
            "compare",
            "load_factory",
            "load_run",
            "profile",
            "stage_summary",
        ]
    )
    for name in workbench.__all__:
        assert getattr(workbench, name) is not None


BLOCKED = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in {'torch', 'plotly', 'ipywidgets'}:
            raise ImportError('blocked for test: ' + name)
sys.meta_path.insert(0, Block())
import workbench
from workbench import Pipeline, PipelineConfig, load_run, stage_summary
from workbench.analysis import budget, stats
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'plotly', 'ipywidgets'})
assert not heavy, heavy
print('ok')
"""


def test_import_works_with_torch_plotly_ipywidgets_blocked():
    proc = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_plain_import_pulls_no_heavy_module():
    code = "import sys, workbench; print(sorted(m for m in sys.modules if m.split('.')[0] in {'torch','plotly','ipywidgets','pandas'}))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "[]"
