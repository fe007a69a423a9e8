"""``analyze`` starts lean: only its own command module, pyarrow hidden for a trace file, same output.

Why: ``python -m workbench analyze`` is measured whole-process against HTA's load and a bare
orjson parse (``benchmarks/bench_trace_load.py``); the profiler's imports and pandas' eager
pyarrow import were a third of its time. The numbers must not change with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden.test_golden import differences, golden
from workbench.cli import SUBCOMMAND_MODULES, build_parser, module_of

REPO = Path(__file__).resolve().parents[2]


def test_every_command_maps_to_the_module_that_registers_it():
    assert module_of("load") == "batching" and module_of("simulate") == "batching"
    assert module_of("export-dashboard") is None  # the room wing registers it
    assert module_of("nonsense") is None and module_of("-h") is None
    assert module_of("serve") is None  # a wing's command: its entry point registers it
    full = build_parser([]).parse_args(["analyze", "x.json"])  # every command registered
    assert full.command == "analyze"
    for command in (
        "profile",
        "show",
        "analyze",
        "load",
        "simulate",
        "audit",
        "compare",
        "gate",
    ):
        assert module_of(command) in SUBCOMMAND_MODULES, command
        choices = build_parser([command])._subparsers._group_actions[0].choices
        assert sorted(choices) == [command] or command in ("load", "simulate"), command
    wings = ("serve", "ingest-otel", "locust-worker", "export-dashboard")  # the wings', alone
    for command in wings:
        choices = build_parser([command])._subparsers._group_actions[0].choices
        assert sorted(choices) == [command], command


def test_analyze_alone_registers_only_its_command():
    choices = build_parser(["analyze", "x.json"])._subparsers._group_actions[0].choices
    assert sorted(choices) == ["analyze"]


_PROBE = """
import io, json, sys, contextlib
from workbench.cli import prepare_process, main
cases = json.loads(sys.argv[1])
out = {}
for argv in cases:
    prepare_process(argv)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        rc = main(argv)
    out[" ".join(argv)] = {"rc": rc, "report": json.loads(text.getvalue())}
import importlib.util
out["pyarrow_hidden"] = "pyarrow" in sys.modules and sys.modules["pyarrow"] is None
print(json.dumps(out))
"""


def test_a_fresh_analyze_process_hides_pyarrow_and_keeps_every_golden_value():
    cases = [
        c
        for c in golden.cases()
        if c[1][0] == "analyze" and c[2].is_file() and "shared-" not in c[0]
    ]
    assert cases, "no local golden analyze outputs"
    argvs = [argv for _, argv, _ in cases]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argvs)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result.pop("pyarrow_hidden") is True
    for _, argv, frozen_file in cases:
        got = result[" ".join(argv)]
        assert got["rc"] == 0
        assert differences(json.loads(frozen_file.read_text()), got["report"]) == [], argv


@pytest.mark.parametrize(
    "argv,hidden",
    [
        (["analyze", "{trace}", "--json"], True),
        (["analyze", "--json", "{trace}"], True),
        (["analyze", "{folder}"], False),  # a run folder: its tables are Parquet
        (["show", "{trace}"], False),
        (["analyze", "missing.json"], False),  # not a file: nothing to gain, nothing hidden
    ],
)
def test_prepare_process_hides_pyarrow_only_for_a_trace_file(tmp_path, argv, hidden):
    trace = tmp_path / "t.json"
    trace.write_text("{}")
    argv = [a.format(trace=trace, folder=tmp_path) for a in argv]
    code = (
        "import sys, json; from workbench.cli import prepare_process; prepare_process(json.loads(sys.argv[1])); "
        "print('pyarrow' in sys.modules and sys.modules['pyarrow'] is None)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(argv)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(hidden)


def test_prepare_process_leaves_a_process_that_already_imported_pandas_alone():
    code = (
        "import sys, pandas; from workbench.cli import prepare_process; "
        "prepare_process(['analyze', sys.argv[1]]); print(sys.modules.get('pyarrow', 'absent') is None)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, __file__], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_analyze_imports_neither_pandas_nor_pyarrow(tmp_path):
    """``analyze`` reads numpy columns end to end (issue 24: pandas and pyarrow took 0.42-0.60 s of
    its 1.07 s on a 33 MB trace); the import log of a fresh process shows neither."""
    trace = REPO / "data" / "traces" / "hta_critical_path_alexnet.json.gz"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "workbench", "analyze", str(trace), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-500:]
    imported = {
        line.split("|")[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "numpy" in imported and "msgspec" in imported
    assert not {m for m in imported if m.split(".")[0] in ("pandas", "pyarrow")}
    assert json.loads(done.stdout)["launches"]["cold_start"]["calls"] == 20
