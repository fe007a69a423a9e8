import json
import os

import pytest
from tests.cli.compare_helpers import saved_run
from tests.support.late_load import late_load_run

from workbench.analysis.verdicts import TOO_NOISY, verdict
from workbench.cli import main
from workbench.cli.gate import threshold


def compare_json(tmp_path, e2e: dict, stages=()) -> str:
    data = {
        "configs": [{"label": "precision=fp32"}, {"label": "precision=bf16"}],
        "stages": [{"name": n, **v} for n, v in stages],
        "end_to_end": {"name": "end_to_end", **e2e},
    }
    f = tmp_path / "cmp.json"
    f.write_text(json.dumps(data))
    return str(f)


def entry(p50, p50_ci, p99=1.0, p99_ci=(0.9, 1.1), p50_verdict=None, p99_verdict=None):
    """An entry whose verdicts are what compare's rule gives a quiet interval (min effect 2 %)."""
    return {
        "p50_ratio": p50,
        "p50_ci": list(p50_ci),
        "p99_ratio": p99,
        "p99_ci": list(p99_ci),
        "p50_verdict": p50_verdict or verdict(p50_ci),
        "p99_verdict": p99_verdict or verdict(p99_ci),
        "verdict": p50_verdict or verdict(p50_ci),
    }


def test_real_regression_exits_1_with_one_line_per_failing_metric(tmp_path, capsys):
    f = compare_json(
        tmp_path, entry(1.2, (1.1, 1.3), 1.3, (1.15, 1.4)), [("forward", entry(1.5, (1.4, 1.6)))]
    )
    assert main(["gate", f]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        "gate: FAIL precision=bf16 against precision=fp32: end to end p50: +20.0 % (ratio 1.200, interval [1.100, 1.300]) exceeds +5 %",
        "gate: FAIL precision=bf16 against precision=fp32: end to end p99: +30.0 % (ratio 1.300, interval [1.150, 1.400]) exceeds +10 %",
    ]
    assert main(["gate", f, "--stages", "--p99", "+45%"]) == 1  # p99 [1.15, 1.40]: within +45 %
    out = capsys.readouterr().out
    assert "stage forward p50: +50.0 %" in out and "p99" not in out


@pytest.mark.parametrize(
    "e2e, argv, expected",
    [
        (entry(1.2, (0.95, 1.4)), [], 4),  # slower, but the interval reaches below 1: cannot tell
        (entry(1.03, (1.025, 1.04)), [], 0),  # real, but its whole interval within +5 %
        (entry(1.04, (1.02, 1.06)), [], 4),  # real, but it may or may not exceed +5 %
        (entry(1.045, (1.035, 1.06)), ["--p50", "3%"], 1),  # above 1 + 3 %, interval too
        (
            entry(1.04, (1.02, 1.06)),
            ["--p50", "3%"],
            4,
        ),  # ratio above 3 %, interval not: not resolved
        (entry(0.8, (0.7, 0.9)), [], 0),  # faster
        (
            entry(1.0, (0.99, 1.01), p50_verdict=TOO_NOISY),
            [],
            4,
        ),  # compare could not tell: neither can the gate
    ],
)
def test_one_rule_exit_1_only_resolved_regressions_4_when_inconclusive(
    tmp_path, capsys, e2e, argv, expected
):
    assert main(["gate", compare_json(tmp_path, e2e), *argv]) == expected
    if expected == 4:
        assert "too noisy to tell: rerun quieter or longer" in capsys.readouterr().out


def test_a_file_whose_every_verdict_is_too_noisy_is_never_0_nor_1(tmp_path, capsys):
    # issue 26: gate exited 1 on a compare file whose every verdict was "too noisy to tell"
    noisy = entry(1.3, (1.1, 1.5), 1.3, (1.15, 1.45), p50_verdict=TOO_NOISY, p99_verdict=TOO_NOISY)
    f = compare_json(tmp_path, noisy, [("forward", noisy)])
    assert main(["gate", f, "--stages"]) == 4
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "gate: INCONCLUSIVE precision=bf16 against precision=fp32: end to end p50: +30.0 % "
        "(ratio 1.300, interval [1.100, 1.500]) against +5 %: verdict too noisy to tell; "
        "too noisy to tell: rerun quieter or longer"
    )
    assert len(out) == 5 and out[-1].startswith("gate: inconclusive")


GOOD = {"name": "end_to_end", **entry(1.0, (0.99, 1.01))}


@pytest.mark.parametrize(
    "e2e, message",
    [
        (GOOD | {"p50_ratio": float("nan")}, "end_to_end.p50_ratio = NaN: not a finite number"),
        (
            GOOD | {"p99_ratio": float("inf")},
            "end_to_end.p99_ratio = Infinity: not a finite number",
        ),
        (GOOD | {"p50_ratio": "1.2"}, 'end_to_end.p50_ratio = "1.2": expected `float`, got `str`'),
        (GOOD | {"p50_ci": None}, "end_to_end.p50_ci = null: expected `array`, got `null`"),
        ({k: v for k, v in GOOD.items() if k != "p99_ci"}, "end_to_end.p99_ci: missing"),
        (GOOD | {"p50_ci": [1.2, 1.1]}, "end_to_end.p50_ci = [1.2, 1.1]: inverted interval"),
        (GOOD | {"p50_ci": [1.0, float("nan")]}, "end_to_end.p50_ci[1] = NaN: not a finite number"),
        (GOOD | {"p50_verdict": "maybe"}, 'end_to_end.p50_verdict = "maybe": expected one of'),
        (
            GOOD | {"p50_ratio": 5.0},
            "end_to_end.p50_ratio = 5.0: outside its own interval p50_ci = [",
        ),
        (None, "end_to_end = null: no result and no error saying why"),
    ],
)
def test_a_malformed_compare_file_exits_2_with_one_line_naming_field_and_value(
    tmp_path, capsys, e2e, message
):
    # issue 26: hand-edited files made gate pass or crash
    f = tmp_path / "cmp.json"
    f.write_text(
        json.dumps({"configs": [{"label": "a"}, {"label": "b"}], "stages": [], "end_to_end": e2e})
    )
    assert main(["gate", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and str(f) in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["gate", "/no/such/file.json"], "/no/such/file.json: no such compare --json file"),
        (["gate", "a", "b", "c"], "got 3 inputs"),
        (["gate", "/no/run/a", "/no/run/b"], "not a folder"),
    ],
)
def test_bad_input_exits_2(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def _special(tmp_path, kind: str) -> str:
    f = tmp_path / "cmp.json"
    good = {"configs": [{"label": "a"}, {"label": "b"}], "stages": [], "end_to_end": GOOD}
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", f)
    elif kind == "deep":
        f.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "surrogate-verdict":
        f.write_text(json.dumps(good).replace('"p50_verdict": "', '"p50_verdict": "\\ud800', 1))
    elif kind == "surrogate-label":
        f.write_text(json.dumps(good).replace('"label": "b"', '"label": "b\\udc80"'))
    elif kind == "latin-1":
        f.write_bytes(json.dumps(good).replace('"b"', '"b\u00e9"').encode("latin-1"))
    return str(f)


@pytest.mark.parametrize(
    "kind, message",
    [
        ("fifo", "cmp.json: is a FIFO (named pipe), not a regular file"),
        ("dev-zero", "cmp.json: is a character device, not a regular file"),
        ("deep", "cmp.json: not a compare --json file (nested too deep to read)"),
        ("surrogate-verdict", "cmp.json: holds a lone surrogate \\ud800, which is not text"),
        ("surrogate-label", "cmp.json: holds a lone surrogate \\udc80, which is not text"),
        ("latin-1", "cmp.json: not UTF-8 text (byte "),
    ],
)
def test_a_compare_file_that_cannot_be_read_safely_is_one_line(tmp_path, capsys, kind, message):
    """Issue 35: a FIFO hung, a link to /dev/zero ran out of memory, deep nesting and a surrogate
    were exit 3 (a surrogate label printed invalid UTF-8); now exit 2 before parsing or printing."""
    assert main(["gate", _special(tmp_path, kind)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_not_a_compare_output_exits_2(tmp_path, capsys):
    f = tmp_path / "x.json"
    f.write_text('{"stages": []}')
    assert main(["gate", str(f)]) == 2
    assert "not a compare --json output" in capsys.readouterr().err


def test_bad_threshold_exits_2(tmp_path, capsys):
    assert main(["gate", compare_json(tmp_path, entry(1.0, (1.0, 1.0))), "--p50", "five"]) == 2
    assert capsys.readouterr().err == (
        "workbench gate: error: --p50 'five': expected a percentage such as +5%, in [0, 1000] %\n"
    )  # one line naming the option (issue 27)
    assert threshold("+5%") == 0.05 and threshold("12.5") == 0.125


def test_two_saved_runs(tmp_path, capsys):
    base = saved_run(tmp_path / "base", 10_000)
    slow = saved_run(tmp_path / "new", 15_000)
    assert main(["gate", str(base), str(slow), "--stages"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4  # end to end and forward, p50 and p99
    assert (
        "end to end p50: +45.4 % (ratio 1.454, interval [1.454, 1.454])" in lines[0]
        and "(separate runs)" in lines[0]
    )
    assert main(["gate", str(base), str(saved_run(tmp_path / "same", 10_000))]) == 0
    assert capsys.readouterr().out.startswith("gate: ok")


def test_gate_agrees_with_compare_on_saved_runs_it_cannot_resolve(tmp_path, capsys):
    # issue 26: gate failed a stage compare could not resolve. A drifted 30 % within itself: the runs resolve
    # only differences above that, so a 10 % slower forward is inconclusive (4), not a failure and not a pass.
    base = saved_run(tmp_path / "base", 10_000, drift_after=20, drift_ns=5_000)
    slow = saved_run(tmp_path / "new", 11_000)
    assert main(["compare", str(base), str(slow), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["resolution"]["min_difference"] > 0.3
    assert main(["gate", str(base), str(slow), "--stages"]) == 4
    out = capsys.readouterr().out
    assert "FAIL" not in out and "the runs resolve only" in out


def test_a_compare_output_where_every_request_failed_exits_1(tmp_path, capsys):
    f = tmp_path / "cmp.json"
    f.write_text(
        json.dumps(
            {
                "configs": [{"label": "a"}, {"label": "b"}],
                "stages": [],
                "end_to_end": None,
                "error": "every measured request of one side failed",
            }
        )
    )
    assert main(["gate", str(f)]) == 1
    assert (
        capsys.readouterr().out.strip()
        == "gate: FAIL b against a: not compared: every measured request of one side failed"
    )


def test_each_configuration_of_a_three_way_compare_is_checked(tmp_path, capsys):
    ok, bad = entry(1.0, (0.99, 1.01)), entry(1.3, (1.2, 1.4))
    data = {
        "configs": [{"label": "a"}, {"label": "b"}, {"label": "c"}],
        "stages": [],
        "end_to_end": {"name": "end_to_end", **ok},
        "comparisons": [
            {"b": 1, "stages": [], "end_to_end": {"name": "end_to_end", **ok}},
            {"b": 2, "stages": [], "end_to_end": {"name": "end_to_end", **bad}},
        ],
    }
    f = tmp_path / "cmp.json"
    f.write_text(json.dumps(data))
    assert main(["gate", str(f)]) == 1
    assert capsys.readouterr().out.startswith("gate: FAIL c against a: end to end p50: +30.0 %")


def test_a_load_run_whose_generator_fell_behind_is_not_judged(tmp_path, capsys):
    # issue 37: a run that sent its requests late sent another load than asked for: exit 4, whatever
    # its latencies say (the base may itself fall behind on a busy machine: still exit 4)
    base = late_load_run().save(tmp_path / "base")
    late = late_load_run(late_s=0.005).save(tmp_path / "late")
    assert main(["gate", str(base), str(late)]) == 4
    out = capsys.readouterr().out
    assert (
        f"gate: INCONCLUSIVE {late}: the load generator fell behind its schedule (lag p99 " in out
    )
    assert "FAIL" not in out and out.rstrip().endswith("exit 4)")


def test_a_streaming_pipelines_tpot_regression_fails_the_gate_without_stages(tmp_path, capsys):
    data = json.loads(open(compare_json(tmp_path, entry(1.0, (0.99, 1.01)))).read())
    data["tokens"] = {
        "metrics": [
            {"name": "ttft", **entry(1.0, (0.99, 1.01))},
            {"name": "tpot", **entry(1.5, (1.4, 1.6))},
        ]
    }
    (tmp_path / "cmp.json").write_text(json.dumps(data))
    assert main(["gate", str(tmp_path / "cmp.json")]) == 1
    assert capsys.readouterr().out.strip().splitlines() == [
        "gate: FAIL precision=bf16 against precision=fp32: TPOT p50: +50.0 % (ratio 1.500, interval [1.400, 1.600]) exceeds +5 %",
    ]
    data["tokens"]["metrics"][1]["p50_ratio"] = "fast"
    (tmp_path / "cmp.json").write_text(json.dumps(data))
    assert main(["gate", str(tmp_path / "cmp.json")]) == 2
