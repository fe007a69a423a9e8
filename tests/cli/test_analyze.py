import argparse
import json

import pytest

from workbench.cli import analyze as analyze_cmd
from workbench.errors import RunRecordError, TraceError
from tests.support.synthetic import TraceBuilder, example_trace


def run_cli(argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    analyze_cmd.register(sub)
    args = parser.parse_args(["analyze", *argv])
    return args.func(args)


def test_json_output(tmp_path, capsys):
    path = example_trace().write(tmp_path / "t.json.gz")
    assert run_cli([str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kernels"]["count"] == 6 and report["launch_pairs"]["delay_over_100us"] == 1


def test_readable_summary(tmp_path, capsys):
    assert run_cli([str(example_trace().write(tmp_path / "t.json"))]) == 0
    out = capsys.readouterr().out
    for text in (
        "kernels 6",
        "HtoD Pageable",
        "cudaStreamSynchronize",
        "ProfilerStep#1",
        "stage   forward",
        "transfer_bound",
        "idle",
    ):
        assert text in out


def test_cpu_only_summary(tmp_path, capsys):
    assert run_cli([str(TraceBuilder().op("aten::add", 0, 5).write(tmp_path / "t.json"))]) == 0
    assert "no GPU activity" in capsys.readouterr().out


def _saved_run(tmp_path, trace=None):
    import pandas as pd

    from workbench.record import REQUEST_COLUMNS, STAGE_COLUMNS, Run

    empty = lambda cols: pd.DataFrame({c: pd.Series([], dtype=t) for c, t in cols.items()})  # noqa: E731
    run = Run(
        meta={"stages": []},
        requests=empty(REQUEST_COLUMNS),
        stages=empty(STAGE_COLUMNS),
        trace_path=trace,
    )
    return run.save(tmp_path / "run")


def test_run_folder(tmp_path, capsys):
    example_trace().write(tmp_path / "w.123.pt.trace.json.gz")
    folder = _saved_run(tmp_path, tmp_path / "w.123.pt.trace.json.gz")
    assert run_cli([str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kernels"]["count"] == 6


def test_folder_errors(tmp_path):
    with pytest.raises(RunRecordError, match="no run.json"):
        run_cli([str(tmp_path)])
    with pytest.raises(RunRecordError, match="no trace"):
        run_cli([str(_saved_run(tmp_path))])


def test_broken_trace_is_a_trace_error(tmp_path):
    (tmp_path / "t.json").write_text("{")
    with pytest.raises(TraceError):
        run_cli([str(tmp_path / "t.json")])


def test_main_prints_one_line_error(tmp_path, capsys):
    cli = pytest.importorskip("workbench.cli")
    if "analyze" not in getattr(cli, "SUBCOMMAND_MODULES", ()):
        pytest.skip("analyze is not registered in workbench.cli yet")
    try:
        cli.build_parser()
    except ImportError:
        pytest.skip("other subcommands are not in place yet")
    (tmp_path / "t.json").write_text("{")
    assert cli.main(["analyze", str(tmp_path / "t.json")]) == 2
    assert "invalid JSON" in capsys.readouterr().err


def test_a_cpu_only_trace_gets_a_top_operators_table(capsys):
    from pathlib import Path

    from workbench.cli import main

    run = Path(__file__).resolve().parents[2] / "data" / "runs" / "text-cpu-bs8-fp32"
    assert main(["analyze", str(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    ops = report["top_ops"]
    assert ops[0]["name"] == "aten::addmm" and ops[0]["calls"] > 0
    assert ops[0]["self_us"] <= ops[0]["total_us"]
    assert [o["self_us"] for o in ops] == sorted((o["self_us"] for o in ops), reverse=True)
    assert main(["analyze", str(run)]) == 0
    assert "top ops" in capsys.readouterr().out
