"""scripts/code_stats.py: the package-size figures issue 24 is judged on."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import load_script

REPO = Path(__file__).resolve().parents[1]
code_stats = load_script(REPO / "scripts" / "code_stats.py", "code_stats_script")

MODULE = '''"""A module."""
from __future__ import annotations
import os


def f():
    import json

    return json, os, "%s"
'''


def test_counts_lines_long_lines_and_imports_inside_functions(tmp_path, capsys):
    (tmp_path / "a.py").write_text(MODULE)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("x = 1  # " + "y" * 100 + "\n")

    assert code_stats.main([str(tmp_path)]) == 0

    assert capsys.readouterr().out.splitlines() == [
        "lines: 10",
        "lines over 100 characters: 1 (10.0 %)",
        "imports inside functions: 1 of 2 (50.0 %)",
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_at_a_commit_formats_that_commit_before_counting(tmp_path):
    """A long call at the commit is counted as ruff splits it, not as it was written."""
    repo = tmp_path / "repo"
    (repo / "workbench").mkdir(parents=True)
    call = "value = function(" + ", ".join(f"argument_{i}" for i in range(12)) + ")\n"
    (repo / "workbench" / "m.py").write_text(call)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "m"], check=True)

    folder = tmp_path / "out"
    folder.mkdir()
    package = code_stats.formatted_at("HEAD", folder, repo=repo)

    assert (package / "m.py").read_text().splitlines()[0] == "value = function("
    assert len((package / "m.py").read_text().splitlines()) == 14
