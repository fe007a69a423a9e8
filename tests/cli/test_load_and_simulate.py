"""``workbench load`` and ``workbench simulate`` through the real command-line entry point."""

import json

import pytest

import workbench.cli as cli
from workbench.record import load_run

KEYS = {"end_to_end", "queue_wait", "batch_wait", "service", "throughput_rps", "mean_batch_size"}
FIGURES = {"count", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"}

TOY = """
import itertools, time
from workbench import Pipeline
def build(config):
    p = Pipeline("toy", items=lambda: itertools.count(), description=f"layers={config.options.get('layers')}")
    p.add("parse", list)
    p.add("forward", lambda b: time.sleep(0.0005 + 0.0001 * len(b)) or b)
    return p
"""


def main(argv):
    """``workbench.cli.main`` with the batching subcommands registered (until the lead lists them)."""
    saved = cli.SUBCOMMAND_MODULES
    cli.SUBCOMMAND_MODULES = saved if "batching" in saved else (*saved, "batching")
    try:
        return cli.main(argv)
    finally:
        cli.SUBCOMMAND_MODULES = saved


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    f = tmp_path_factory.mktemp("toy") / "toy_pipe.py"
    f.write_text(TOY)
    return f


@pytest.fixture(scope="module")
def service_runs(toy, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for bs in (1, 4):
        assert (
            main(
                [
                    "profile",
                    "--closed-loop",
                    "--pipeline",
                    f"{toy}:build",
                    "--batch-size",
                    str(bs),
                    "--requests",
                    "40",
                    "--warmup",
                    "2",
                    "--traced",
                    "0",
                    "--out",
                    str(root / f"bs{bs}"),
                ]
            )
            == 0
        )
    return [str(root / "bs1"), str(root / "bs4")]


def test_load_json_keys_and_show(toy, tmp_path, capsys):
    out = tmp_path / "load"
    assert (
        main(
            [
                "load",
                "--pipeline",
                f"{toy}:build",
                "--rate",
                "300",
                "--duration",
                "0.4",
                "--max-batch-size",
                "4",
                "--max-wait-ms",
                "2",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert KEYS | {"generator_lag_ms"} <= set(printed) and "stable" not in printed
    assert all(
        set(printed[k]) == FIGURES for k in ("end_to_end", "queue_wait", "batch_wait", "service")
    )
    assert printed["end_to_end"]["count"] > 50 and printed["throughput_rps"] > 0
    assert main(["show", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["kind"] == "load" and shown["stages"][0]["name"] == "batch_wait"


def test_load_text_output(toy, tmp_path, capsys):
    assert (
        main(
            [
                "load",
                "--pipeline",
                f"{toy}:build",
                "--rate",
                "200",
                "--requests",
                "20",
                "--max-batch-size",
                "2",
                "--max-wait-ms",
                "1",
                "--arrivals",
                "bursty",
                "--out",
                str(tmp_path / "l"),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "end to end" in text and "generator lag" in text and "run written to" in text


def test_simulate_json_stable_and_unstable(service_runs, capsys):
    assert (
        main(
            [
                "simulate",
                "--service",
                *service_runs,
                "--rate",
                "100",
                "--max-batch-size",
                "4",
                "--max-wait-ms",
                "2",
                "--requests",
                "2000",
                "--json",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert KEYS | {"stable"} <= set(printed) and "generator_lag_ms" not in printed
    assert printed["stable"] is True and printed["end_to_end"]["count"] == 2000
    assert (
        main(
            [
                "simulate",
                "--service",
                *service_runs,
                "--rate",
                "1000000",
                "--max-batch-size",
                "4",
                "--requests",
                "2000",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["stable"] is False
    assert (
        main(["simulate", "--service", *service_runs, "--rate", "100", "--max-batch-size", "3"])
        == 0
    )
    assert "capacity" in capsys.readouterr().out


def test_simulate_replayed_file(service_runs, tmp_path, capsys):
    f = tmp_path / "arr.csv"
    f.write_text("arrival_ms\n0\n1\n1.5\n10\n")
    assert (
        main(
            [
                "simulate",
                "--service",
                *service_runs,
                "--arrivals",
                str(f),
                "--max-batch-size",
                "2",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["end_to_end"]["count"] == 4


def test_a_long_simulated_run_is_read_back(service_runs, tmp_path, capsys):
    """Issue 35: 100,000 requests at 1 req/s start up to 1e14 ns; show refused start_ns as a sum."""
    out = tmp_path / "long"
    argv = ["--rate", "1", "--requests", "100000", "--max-batch-size", "4", "--out", str(out)]
    assert main(["simulate", "--service", *service_runs, *argv]) == 0
    capsys.readouterr()
    assert main(["show", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["end_to_end"]["count"] == 100_000


@pytest.mark.parametrize(
    "args, message",
    [
        (["--rate", "0"], "--rate must be a number in [0.001, 1e+07] requests/s, got 0"),
        (["--rate", "-5"], "--rate must be a number in [0.001, 1e+07] requests/s, got -5"),
        (
            ["--rate", "10", "--max-batch-size", "0"],
            "--max-batch-size must be an integer in [1, 65_536] items, got 0",
        ),
        (
            ["--rate", "10", "--max-wait-ms", "-1"],
            "--max-wait-ms must be a number in [0, 3.6e+06] ms, got -1",
        ),
        (["--rate", "1e-9"], "--rate must be a number in [0.001, 1e+07] requests/s, got 1e-9"),
        (
            ["--rate", "10", "--seed", "-1"],
            "--seed must be an integer in [0, 9_223_372_036_854_775_807], got -1",
        ),
        (["--rate", "nan"], "--rate must be a number"),
        (["--rate", "10", "--max-batch-size", "8"], "profile the pipeline at --batch-size 8"),
        (["--max-batch-size", "2"], "--rate is required"),
        (["--rate", "10", "--concurrency", "0"], "concurrency"),
    ],
)
def test_simulate_bad_input_exits_2_with_one_line(service_runs, capsys, args, message):
    assert main(["simulate", "--service", *service_runs, "--requests", "10", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "text, message", [("", "no arrival timestamps"), ("arrival_s\n2\n1\n", "must be sorted")]
)
def test_bad_arrival_files(service_runs, tmp_path, capsys, text, message):
    f = tmp_path / "arr.csv"
    f.write_text(text)
    assert (
        main(
            ["simulate", "--service", *service_runs, "--arrivals", str(f), "--max-batch-size", "4"]
        )
        == 2
    )
    assert message in capsys.readouterr().err


def test_service_model_without_measurements(tmp_path, capsys):
    assert main(["simulate", "--service", str(tmp_path / "missing"), "--rate", "10"]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_load_bad_input(toy, tmp_path, capsys):
    base = ["load", "--pipeline", f"{toy}:build", "--out", str(tmp_path / "x")]
    assert main([*base, "--rate", "0", "--duration", "1"]) == 2
    assert "--rate must be a number in [0.001, 1e+07] requests/s, got 0" in capsys.readouterr().err
    assert main([*base, "--rate", "10", "--duration", "0"]) == 2
    assert "--duration must be a number in (0, 604800] s, got 0" in capsys.readouterr().err
    assert (
        main([*base, "--rate", "1e7", "--duration", "600000"]) == 2
    )  # 6.6e12 arrivals: refused before drawing
    err = capsys.readouterr().err
    assert "--rate 1e+07 for --duration: 6.6e+12 would need about 2.3 PiB (400 B each)" in err
    assert not (tmp_path / "x").exists()
    assert main([*base, "--rate", "10", "--batch-size", "3", "--max-batch-size", "4"]) == 2
    assert "--batch-size" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert main([*base, "--rate", "10", "--ttft-ms", "50"]) == 2  # goodput is load --url's
    assert "--ttft-ms and --tpot-ms are goodput's bounds for --url" in capsys.readouterr().err
    assert main([*base, "--rate", "10", "--url", "http://h", "--tpot-ms", "0"]) == 2
    assert "--tpot-ms must be a number in (0, 8.64e+07] ms, got 0" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_simulate_refuses_mixed_runs_unless_allowed(service_runs, toy, tmp_path, capsys):
    other = tmp_path / "bs4-threads1"
    assert (
        main(
            [
                "profile",
                "--closed-loop",
                "--pipeline",
                f"{toy}:build",
                "--batch-size",
                "4",
                "--requests",
                "10",
                "--warmup",
                "0",
                "--traced",
                "0",
                "--threads",
                "1",
                "--option",
                "layers=2",
                "--out",
                str(other),
            ]
        )
        == 0
    )
    capsys.readouterr()
    argv = [
        "simulate",
        "--service",
        service_runs[0],
        str(other),
        "--rate",
        "100",
        "--requests",
        "200",
        "--max-batch-size",
        "4",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "--service runs differ in options: {} (" in err
        and "vs {'layers': 2}" in err
        and "--allow-mixed" in err
    )
    assert main(argv + ["--allow-mixed"]) == 0
    out = capsys.readouterr().out
    assert "MIXED service runs pooled (--allow-mixed): options {} vs {'layers': 2}" in out


# (what the line names, the function made to raise): the summaries of an in-process load run
LOAD_SUMMARIES = [
    ("the noise reading", "workbench.noise.NoiseProbe.finish"),
    ("the load summary", "workbench.batching.live.load_summary"),  # the run's load figures
    ("the load report", "workbench.cli.batching.load_summary"),  # what the command prints
    ("the load report", "workbench.cli.batching.failure_summary"),
]


@pytest.mark.parametrize("what, target", LOAD_SUMMARIES, ids=[t for _, t in LOAD_SUMMARIES])
def test_a_load_summary_that_raises_is_one_line_and_the_run_is_kept(
    what, target, toy, tmp_path, monkeypatch, capsys
):
    # issue 35: measure, save, then explain
    def planted(*args, **kwargs):
        raise RuntimeError("planted")

    monkeypatch.setattr(target, planted)
    out = tmp_path / "l"
    argv = ["load", "--pipeline", f"{toy}:build", "--rate", "200", "--requests", "10"]
    assert main([*argv, "--max-batch-size", "2", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert [line for line in captured.err.splitlines() if "planted" in line] == [
        f"workbench load: {what} failed (RuntimeError: planted); the run is saved at {out} "
        "without it (a bug in the workbench: please report it)"
    ]
    assert captured.out.rstrip().endswith(f"run written to {out}")
    assert len(load_run(out).requests) == 10
