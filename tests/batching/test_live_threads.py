"""`load` builds one pipeline per executor thread, in that thread, and applies config.threads there."""

import sqlite3
import threading

import pytest

from workbench import PipelineConfig
from workbench.batching.arrivals import Arrivals
from workbench.batching.live import run_load
from workbench.batching.policy import BatchPolicy
from tests.support.cli import fails_only_with_fail_on_error
from workbench.cli import main
from workbench.pipeline import Pipeline

SQLITE_FACTORY = """
import itertools, sqlite3
from workbench import Pipeline

DB = {db!r}

def build(config):
    conn = sqlite3.connect(DB)          # plain: usable only in the thread that made it
    pipe = Pipeline("sqlite-ranker", items=lambda: itertools.count())

    @pipe.stage
    def hydrate(batch):
        return [conn.execute("SELECT v FROM f WHERE k = ?", (k % 3,)).fetchone()[0] for k in batch]

    return pipe
"""


@pytest.fixture
def sqlite_factory(tmp_path):
    db = tmp_path / "features.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE f (k INTEGER, v REAL)")
        conn.executemany("INSERT INTO f VALUES (?, ?)", [(0, 0.5), (1, 1.5), (2, 2.5)])
    f = tmp_path / "sqlite_pipe.py"
    f.write_text(SQLITE_FACTORY.format(db=str(db)))
    return f


def test_load_with_a_plain_sqlite_factory_succeeds_and_exits_0(tmp_path, sqlite_factory, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "load",
            "--pipeline",
            f"{sqlite_factory}:build",
            "--rate",
            "300",
            "--requests",
            "60",
            "--max-batch-size",
            "4",
            "--max-wait-ms",
            "1",
            "--concurrency",
            "2",
            "--out",
            str(out),
            "--json",
        ]
    )
    report = capsys.readouterr().out
    assert code == 0, report
    assert '"failed": 0' in report and '"failures": {}' in report


def test_each_executor_thread_builds_its_pipeline_and_sets_threads():
    import torch

    built, seen_threads = [], []

    def build(config):
        built.append(threading.current_thread().name)
        pipe = Pipeline("t", items=lambda: iter(range(10**6)))

        @pipe.stage
        def forward(batch):
            seen_threads.append((threading.current_thread().name, torch.get_num_threads()))
            return batch

        return pipe

    run = run_load(
        build,
        PipelineConfig(threads=1),
        arrivals=Arrivals("poisson", rate_rps=500, count=20, seed=0),
        policy=BatchPolicy(2, 1.0, 2),
        warmup=1,
    )
    assert built[0] == threading.current_thread().name
    assert sorted(built[1:]) == ["workbench-executor-0", "workbench-executor-1"]
    assert {t for _, t in seen_threads} == {1}
    assert {name for name, _ in seen_threads} <= {"workbench-executor-0", "workbench-executor-1"}
    assert run.meta.fingerprint.threads == 1 and run.meta.config.threads == 1
    assert run.requests["ok"].all()


def test_load_where_every_request_fails_exits_1(tmp_path, capsys):
    f = tmp_path / "bad.py"
    f.write_text("""
import itertools
from workbench import Pipeline
def build(config):
    p = Pipeline("bad", items=lambda: itertools.count())
    def forward(b):
        raise RuntimeError("CUDA out of memory")
    p.add("forward", forward)
    return p
""")
    code = main(
        [
            "load",
            "--pipeline",
            str(f),
            "--rate",
            "200",
            "--requests",
            "10",
            "--max-batch-size",
            "2",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert "every measured request failed (10)" in captured.err
    assert f"10 x RuntimeError: CUDA out of memory  at {f}:7 in forward" in captured.err
    assert (tmp_path / "run" / "run.json").is_file()


def test_load_executor_warmup_failures_are_failures(tmp_path, capsys):
    f = tmp_path / "warm.py"
    f.write_text("""
import itertools
from workbench import Pipeline
def build(config):
    p = Pipeline("warm", items=lambda: itertools.count())
    def forward(b):
        if len(b) > 1:          # only the warm-up's full-size batch
            raise ValueError("batch too large")
        return b
    p.add("forward", forward)
    return p
""")
    argv = [
        "load",
        "--pipeline",
        str(f),
        "--rate",
        "50",
        "--requests",
        "5",
        "--max-batch-size",
        "2",
    ]
    err = fails_only_with_fail_on_error([*argv, "--max-wait-ms", "0"], tmp_path)
    assert "executor warm-up:" in err and "5 x ValueError: batch too large" in err
    assert main(["show", str(tmp_path / "b"), "--json"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["warmup_failures"]["forward"]["messages"][0]["where"] == f"{f}:8 in forward"
