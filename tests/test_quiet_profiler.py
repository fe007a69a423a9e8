"""The traced run and the explorers leave no kineto lines on a student's stderr."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("torch")

SCRIPT = """
import threading
from workbench import PipelineConfig, profile
from workbench.device import prime_profiler
prime_profiler()  # what LatencyExplorer does on the notebook's thread
def work():
    profile("tabular", PipelineConfig(threads=1), requests=3, warmup=1, traced=1)
t = threading.Thread(target=work)
t.start()
t.join()
profile("tabular", PipelineConfig(threads=1), requests=3, warmup=1, traced=1)
"""


def test_traced_runs_on_a_worker_thread_print_nothing_on_stderr():
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in __import__("os").environ.items() if k != "KINETO_LOG_LEVEL"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "USDT" not in proc.stderr and "External init callback" not in proc.stderr
