"""Failures are never silent: exit 1 when every request failed, a failures section, --fail-on-error."""

import json

import pytest

from tests.support.cli import fails_only_with_fail_on_error
from workbench.cli import main
from workbench.record import load_run

FAILING = """
import itertools
from workbench import Pipeline

def build(config):
    p = Pipeline("failing", items=lambda: itertools.count())
    p.add("parse", lambda b: b)

    def forward(b):
        mode = config.options.get("mode", "all")
        if mode == "all" or (mode == "some" and b[0] % 2 == 1) or (mode == "warmup" and b[0] == 0):
            explode(b)
        return b

    p.add("forward", forward)
    return p

def explode(b):
    raise MemoryError(f"out of memory at batch {len(b)}")
"""


@pytest.fixture
def failing_file(tmp_path):
    f = tmp_path / "failing_pipe.py"
    f.write_text(FAILING)
    return f


def test_every_request_failing_writes_the_run_then_exits_1_naming_type_message_and_where(
    tmp_path, failing_file, capsys
):
    out = tmp_path / "run"
    code = main(
        [
            "profile",
            "--closed-loop",
            "--pipeline",
            f"{failing_file}:build",
            "--requests",
            "4",
            "--warmup",
            "2",
            "--traced",
            "0",
            "--out",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert load_run(out).requests["ok"].sum() == 0  # the folder is written first
    assert "every measured request failed (4)" in captured.err
    assert "forward: 4 failed (100.0 %)" in captured.err
    assert (
        f"4 x MemoryError: out of memory at batch 1  at {failing_file}:19 in explode"
        in captured.err
    )
    assert "warm-up: 2 requests, 2 failed (failures, not latencies)" in captured.out
    assert "first " not in captured.out.split("warm-up:")[1].splitlines()[0]


def test_partial_failures_print_a_section_and_show_json_has_failures(
    tmp_path, failing_file, capsys
):
    out = tmp_path / "run"
    code = main(
        [
            "profile",
            "--closed-loop",
            "--pipeline",
            f"{failing_file}:build",
            "--option",
            'mode="some"',
            "--requests",
            "6",
            "--warmup",
            "0",
            "--traced",
            "0",
            "--out",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "failures (measured requests):" in text
    assert "  forward: 3 failed (50.0 %)" in text
    assert main(["show", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["errors"] == {"parse": 0, "forward": 3}
    assert report["failures"] == {
        "forward": {
            "count": 3,
            "share": 0.5,
            "messages": [
                {
                    "type": "MemoryError",
                    "message": "out of memory at batch 1",
                    "where": f"{failing_file}:19 in explode",
                    "count": 3,
                }
            ],
        }
    }
    assert report["throughput_items_per_s"] is not None


def test_fail_on_error_counts_a_warmup_failure(tmp_path, failing_file):
    argv = [
        "profile",
        "--closed-loop",
        "--pipeline",
        f"{failing_file}:build",
        "--option",
        'mode="warmup"',
        "--requests",
        "3",
        "--warmup",
        "1",
        "--traced",
        "0",
    ]
    err = fails_only_with_fail_on_error(argv, tmp_path)
    assert (
        "requests failed (--fail-on-error)" in err
        and "warm-up:" in err
        and "1 x MemoryError" in err
    )


def test_fail_on_error_counts_a_traced_run_failure(tmp_path, capsys):
    f = tmp_path / "traced_fail.py"
    f.write_text("""
import itertools
from workbench import Pipeline
def build(config):
    p = Pipeline("tf", items=lambda: itertools.count())
    def forward(b):
        if b[0] >= 4:   # the traced run draws items after the timing run's 4
            raise KeyError("missing feature")
        return b
    p.add("forward", forward)
    return p
""")
    out = tmp_path / "run"
    assert (
        main(
            [
                "profile",
                "--closed-loop",
                "--pipeline",
                str(f),
                "--requests",
                "3",
                "--warmup",
                "1",
                "--traced",
                "1",
                "--out",
                str(out),
                "--fail-on-error",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "traced run:" in err and "2 x KeyError: 'missing feature'" in err
    trace = load_run(out).meta.trace.to_dict()
    assert trace["failed_requests"] == 2
    assert trace["failures"] == [
        {
            "stage": "forward",
            "type": "KeyError",
            "message": "'missing feature'",
            "where": f"{f}:8 in forward",
            "count": 2,
        }
    ]
