import json

import pytest

from tests.support.cli import workbench
from workbench.cli import main

TOY = """
import itertools, time
from workbench import Pipeline
def build(config):
    p = Pipeline("toy", items=lambda: itertools.count())
    p.add("parse", lambda b: b)
    def forward(b):
        if b[0] == 3:
            raise ValueError("item 3 is poison")
        return b
    p.add("forward", forward)
    return p
"""


@pytest.fixture
def factory_file(tmp_path):
    f = tmp_path / "toy_pipe.py"
    f.write_text(TOY)
    return f


def test_profile_json_then_show_json(tmp_path, factory_file, capsys):
    out = tmp_path / "run"
    assert (
        main(
            [
                "profile",
                "--closed-loop",
                "--pipeline",
                f"{factory_file}:build",
                "--requests",
                "6",
                "--warmup",
                "1",
                "--traced",
                "0",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in printed["stages"]] == ["parse", "forward"]
    assert printed["errors"] == {"parse": 0, "forward": 1}
    assert printed["end_to_end"]["count"] == 5
    assert set(printed["unattributed"]) >= {
        "count",
        "mean_ms",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "max_ms",
    }
    assert main(["show", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["stages"] == printed["stages"] and shown["config"]["batch_size"] == 1


def test_show_prints_a_table(tmp_path, factory_file, capsys):
    out = tmp_path / "run"
    main(
        [
            "profile",
            "--closed-loop",
            "--pipeline",
            str(factory_file),
            "--requests",
            "4",
            "--traced",
            "0",
            "--out",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert "forward" in text and "end to end" in text and "(unattributed)" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["profile", "--example", "nope", "--requests", "2"], "unknown example"),
        (["profile", "--pipeline", "no_such_mod_abc:build"], "no module named"),
        (
            ["profile", "--example", "text", "--batch-size", "0"],
            "--batch-size must be an integer in [1, 65_536] items, got 0",
        ),
        (
            ["profile", "--example", "text", "--device", "cuda", "--precision", "int8"],
            "int8 on device cuda",
        ),
        (["profile", "--example", "text", "--option", "novalue"], "expected KEY=VALUE"),
        (["show", "/definitely/not/here"], "not a folder"),
        (
            ["profile", "--example", "text", "--threads", "0"],
            "--threads must be an integer in [1, 4_096] threads, got 0",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err.lower() or message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_module_entry_point_exits_nonzero_without_traceback(tmp_path):
    proc = workbench("show", tmp_path)
    assert proc.returncode == 2
    assert "no run.json" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("example", ["tabular", "text", "image"])
def test_each_example_profiles_from_the_command_line(tmp_path, example, capsys):
    out = tmp_path / example
    assert (
        main(
            [
                "profile",
                "--closed-loop",
                "--example",
                example,
                "--batch-size",
                "2",
                "--requests",
                "5",
                "--warmup",
                "1",
                "--traced",
                "1",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["end_to_end"]["count"] == 5 and sum(report["errors"].values()) == 0
    assert list(out.glob("*.pt.trace.json.gz"))


def test_threads_option_is_applied_and_recorded(tmp_path, capsys):
    import torch

    before = torch.get_num_threads()
    try:
        assert (
            main(
                [
                    "profile",
                    "--closed-loop",
                    "--example",
                    "tabular",
                    "--requests",
                    "3",
                    "--traced",
                    "0",
                    "--threads",
                    "1",
                    "--out",
                    str(tmp_path / "r"),
                ]
            )
            == 0
        )
        from workbench import load_run

        assert load_run(tmp_path / "r").meta.env.threads == 1
    finally:
        torch.set_num_threads(before)
