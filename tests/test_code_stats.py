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
        "  code 6, docstring 1, comment 0, blank 3",
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


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_by_issue_sums_net_lines_per_issue_named_in_the_subject(tmp_path):
    repo = tmp_path / "repo"
    (repo / "workbench").mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)

    def commit(text: str, subject: str) -> None:
        (repo / "workbench" / "m.py").write_text(text)
        (repo / "other.txt").write_text(subject)  # outside the package: not counted
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", subject], check=True)

    commit("a = 1\n", "start")
    commit("a = 1\nb = 2\nc = 3\n", "two lines (issue 7)")
    commit("a = 1\n", "one copy out, issue 8")
    commit("a = 1\nb = (\n    2\n)\n", "ruff format over the tree (issue 8)")
    commit("a = 1\nb = (\n    2\n)\nd = 4\n", "untagged")

    net = code_stats.by_issue("HEAD~4..HEAD", repo=repo)

    assert net == {"issue 7": 2, "issue 8": -2, "ruff format": 3, "other": 1}


def test_functions_lists_the_long_ones_and_those_with_many_parameters(tmp_path, capsys):
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    (tmp_path / "m.py").write_text(
        f"def long():\n{body}\n\n"
        "def many(a, b, c, d, e, f, g, h, i):\n    pass\n\n\n"
        "class C:\n    def fine(self, a, b, c, d, e, f, g, h):\n        pass\n"
    )

    assert code_stats.main(["--functions", str(tmp_path)]) == 0

    name = tmp_path.name
    assert capsys.readouterr().out.splitlines() == [
        "functions over 60 lines: 1",
        f"  {name}/m.py:1 long (61 lines)",
        "functions over 8 parameters: 1",
        f"  {name}/m.py:64 many (9 parameters)",
    ]
