import json

import pytest
from tests.cli.compare_helpers import saved_run

from workbench import PipelineConfig
from workbench.analysis.verdicts import VERDICTS
from workbench.cli import main
from workbench.cli.compare import parse_config, split_config

TOY = """
import itertools, time
from workbench import Pipeline
def build(config):
    p = Pipeline("toy", items=lambda: itertools.count())
    p.description = str(config.options.get("extra", ""))
    p.add("parse", lambda b: b)
    def forward(b):
        if config.options.get("fail"):
            raise MemoryError("out of memory at this batch")
        return [x * config.options.get("scale", 1) for x in b]
    p.add("forward", forward)
    return p
"""


def test_config_values_are_json_and_commas_inside_brackets_or_quotes_do_not_split():
    assert split_config('hidden=[64,32],name="a,b",x=1') == ["hidden=[64,32]", 'name="a,b"', "x=1"]
    assert parse_config(
        "hidden=[64,32],name=\"a,b\",slow=1.1,precision=bf16,flag=true,q='x,y'"
    ) == {
        "hidden": [64, 32],
        "name": "a,b",
        "slow": 1.1,
        "precision": "bf16",
        "flag": True,
        "q": "x,y",
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ("novalue", "expected K=V"),
        ("a=[1,2", "unbalanced bracket"),
        ('a="x', "unbalanced quote"),
        ("a=1,a=2", "given twice"),
    ],
)
def test_bad_config_is_named(text, message, capsys):
    assert main(["compare", "--example", "tabular", "--config", text, "--config", "a=1"]) == 2
    assert message in capsys.readouterr().err


def test_interleaved_json_has_the_documented_keys(tmp_path, capsys):
    f = tmp_path / "toy_pipe.py"
    f.write_text(TOY)
    rc = main(
        [
            "compare",
            "--pipeline",
            f"{f}:build",
            "--config",
            "scale=1",
            "--config",
            "scale=2,extra=[1,2]",
            "--requests",
            "20",
            "--warmup",
            "1",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["label"] for c in out["configs"]] == ["scale=1", "scale=2,extra=[1,2]"]
    assert out["configs"][1]["config"]["options"] == {"scale": 2, "extra": [1, 2]}
    assert [s["name"] for s in out["stages"]] == ["parse", "forward"]
    for entry in [*out["stages"], out["end_to_end"]]:
        assert {"name", "p50_ratio", "p50_ci", "p99_ratio", "p99_ci", "verdict"} <= set(entry)
        assert entry["verdict"] in VERDICTS and len(entry["p50_ci"]) == 2
    assert out["end_to_end"]["name"] == "end_to_end" and out["metric"] == "p50"
    saved = tmp_path / "cmp.json"
    saved.write_text(json.dumps(out))
    assert main(["gate", str(saved), "--stages"]) in (
        0,
        1,
        4,
    )  # what compare writes fits gate's schema
    assert "error" not in capsys.readouterr().err


def test_interleaved_needs_two_configs(tmp_path, capsys):
    assert main(["compare", "--example", "tabular", "--config", "precision=fp32"]) == 2
    assert "at least two --config" in capsys.readouterr().err


def test_saved_runs_compare_as_separate_runs(tmp_path, capsys):
    a = saved_run(tmp_path / "a", 10_000, noisy=False)
    b = saved_run(tmp_path / "b", 20_000, noisy=None)
    assert main(["compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "separate runs" and [c["noisy"] for c in out["configs"]] == [False, None]
    forward = out["stages"][1]
    assert (
        forward["p50_ratio"] == 2.0
        and forward["p50_ci"] == [2.0, 2.0]
        and forward["verdict"] == "slower"
    )
    assert out["end_to_end"]["p50_ratio"] == round(21_000 / 11_000, 4)
    assert out["resolution"]["min_difference"] == 0.0 and out["min_effect"] == 0.02
    assert main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "separate runs" in text and "noise: A quiet, B unknown" in text
    assert "smallest difference these runs can resolve: 0.0 %" in text
    saved = tmp_path / "cmp.json"
    saved.write_text(json.dumps(out))
    assert main(["gate", str(saved)]) == 1 and capsys.readouterr().out.startswith(
        f"gate: FAIL {b} against {a}"
    )


def test_saved_runs_print_differences_and_noisy_sides(tmp_path, capsys):
    a = saved_run(tmp_path / "a", 10_000, noisy=True)
    b = saved_run(
        tmp_path / "b", 10_000, requests=30, config=PipelineConfig(batch_size=2, options={"k": 1})
    )
    assert main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    # the noise flag widens the evidence needed; identical runs with no drift are still no difference
    assert "noise: A NOISY, B quiet" in text and "no detectable difference" in text
    assert "differs: batch_size: 1 vs 2" in text and "differs: options: {} vs {'k': 1}" in text


@pytest.mark.parametrize(
    "kw, message",
    [({"name": "other"}, "not comparable"), ({"extra_stage": True}, "not comparable")],
)
def test_saved_runs_of_another_pipeline_or_stage_list_are_refused(tmp_path, capsys, kw, message):
    a = saved_run(tmp_path / "a", 10_000)
    b = saved_run(tmp_path / "b", 10_000, **kw)
    assert main(["compare", str(a), str(b)]) == 2
    assert message in capsys.readouterr().err


def test_saved_runs_refuse_a_third_argument(tmp_path, capsys):
    a = saved_run(tmp_path / "a", 10_000)
    assert main(["compare", str(a), str(a), "--config", "x=1"]) == 2
    assert "exactly two run folders" in capsys.readouterr().err


def test_every_request_of_a_config_failing_exits_1(tmp_path, capsys):
    f = tmp_path / "toy_pipe.py"
    f.write_text(TOY)
    assert (
        main(
            [
                "compare",
                "--pipeline",
                str(f),
                "--config",
                "scale=1",
                "--config",
                "fail=true",
                "--requests",
                "10",
                "--warmup",
                "0",
            ]
        )
        == 1
    )
    captured = capsys.readouterr()
    assert "B: fail=true (10 requests, 10 failed: 10 MemoryError)" in captured.out
    assert "not compared: every measured request of one side failed" in captured.out
    assert "every measured request failed for fail=true" in captured.err


def test_an_option_the_factory_never_reads_is_named_before_measuring(tmp_path, capsys):
    # issue 26: a misspelled --option slowdwn=0.3 was accepted silently
    f = tmp_path / "toy_pipe.py"
    f.write_text(TOY)
    assert (
        main(
            [
                "compare",
                "--pipeline",
                f"{f}:build",
                "--config",
                "scale=1",
                "--config",
                "scael=2",
                "--requests",
                "20",
                "--warmup",
                "1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err == (
        "workbench compare: error: pipeline 'toy': option 'scael' (did you mean 'scale'?) is never read "
        "by its factory or stages; it reads: extra, fail, scale"
    )


def test_saved_columns_stream_the_same_matrix_as_the_run(tmp_path):
    from pathlib import Path

    import numpy as np

    from workbench.analysis.budget import stage_matrix
    from workbench.cli.compare import saved_columns
    from workbench.record import load_run

    for name in ("text-cpu-bs8-fp32", "tabular-cpu-bs1-fp32"):
        path = Path(__file__).resolve().parents[2] / "data" / "runs" / name
        if not path.exists():
            continue
        run = load_run(path)
        want = stage_matrix(run.requests, run.stages, run.stage_names)
        meta, cols = saved_columns(path)
        assert list(cols) == [*run.stage_names, "end_to_end"]
        for col, values in cols.items():
            np.testing.assert_array_equal(values, want[col].to_numpy("float64"))


def test_a_saved_run_with_a_broken_table_is_one_line(tmp_path, capsys):
    a = saved_run(tmp_path / "a", 10_000)
    (a / "stages.parquet").write_bytes(b"not parquet")
    assert main(["compare", str(a), str(a)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "stages.parquet: unreadable Parquet" in err


def test_compare_gives_each_side_its_far_tail(tmp_path, capsys):
    a = saved_run(tmp_path / "a", 10_000, noisy=None)  # 40 requests, end to end 11 us
    b = saved_run(tmp_path / "b", 20_000, noisy=None)  # end to end 21 us
    assert main(["compare", str(a), str(b), "--json"]) == 0
    e2e = json.loads(capsys.readouterr().out)["end_to_end"]
    assert e2e["tail_a"] == {
        "count": 40,
        "p999_ms": None,
        "p999_ci_low_ms": None,
        "p999_ci_high_ms": None,
        "p999_needs_count": 5661,
        "max_ms": 0.011,
        "max_above_percentile": 92.7842,
    }
    assert e2e["tail_b"]["max_ms"] == 0.021
    assert main(["compare", str(a), str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == [
        "  A end to end p99.9: 40 successful requests; 5661 bound it; "
        "max 0.011 ms (at or above p92.78 with 95% confidence)",
        "  B end to end p99.9: 40 successful requests; 5661 bound it; "
        "max 0.021 ms (at or above p92.78 with 95% confidence)",
    ]
