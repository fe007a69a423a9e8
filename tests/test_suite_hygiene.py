"""The suite collects as a whole and file by file: no basename clash, no import that works only one way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def collect(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_two_test_files_of_one_basename_collect_together():
    # tests/test_noise.py (workbench.noise) and tests/serving/test_noise.py (served runs' noise)
    proc = collect("tests/test_noise.py", "tests/serving/test_noise.py")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "import file mismatch" not in proc.stdout


def test_a_top_level_test_file_collects_alone():
    proc = collect("tests/test_runner.py")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "tests/test_runner.py::test_" in proc.stdout
