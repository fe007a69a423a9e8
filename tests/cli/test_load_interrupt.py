"""Ctrl-C during ``workbench load`` (in-process and ``--url``) keeps what was measured: the run folder is
written with status ``interrupted``, one line says so, and the exit code is 130."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.conftest import sigint_as_from_a_terminal
from workbench.record import load_run

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "serving"))

from served_helpers import ENV, Served, payload_file  # noqa: E402

TICKING = """
import itertools, os, time
from workbench import Pipeline


def build(config):
    pipe = Pipeline("ticking", items=lambda: itertools.count())

    @pipe.stage
    def forward(batch):
        with open(os.environ["WB_TICKS"], "a") as f:  # one line per call: the test waits on it
            f.write("x\\n")
        time.sleep(0.002)
        return batch

    return pipe
"""


def _wait(predicate, timeout_s=120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def _interrupt_when(proc: subprocess.Popen, ready) -> str:
    """Send SIGINT to ``proc`` once ``ready()`` holds; its stderr after it exits (killed if a check fails)."""
    try:
        _wait(ready)
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=120)[1]
    finally:
        proc.kill()


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_ctrl_c_during_an_in_process_load_writes_the_run(tmp_path):
    (tmp_path / "ticking.py").write_text(TICKING)
    ticks, out = tmp_path / "ticks.txt", tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench",
            "load",
            "--pipeline",
            f"{tmp_path / 'ticking.py'}:build",
            "--rate",
            "50",
            "--duration",
            "60",
            "--max-batch-size",
            "1",
            "--threads",
            "1",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(ENV, WB_TICKS=str(ticks)),
        preexec_fn=sigint_as_from_a_terminal,
    )
    err = _interrupt_when(
        proc, lambda: _lines(ticks) >= 30
    )  # 10 warm-up calls, then measured requests
    assert proc.returncode == 130, err
    run = load_run(out)
    assert run.meta.status == "interrupted"
    n = len(run.requests)
    assert (
        10 <= n < 3000 and run.requests["ok"].all()
    )  # the submitted requests finished; none dropped
    assert (
        f"workbench load: interrupted after {n} requests; run written to {out} (status: interrupted)"
        in err
    )


def test_ctrl_c_during_a_served_load_writes_the_client_run(tmp_path):
    server = Served(tmp_path / "server")
    try:
        payloads = payload_file(tmp_path / "payloads.txt", 200)
        out = tmp_path / "client"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "workbench",
                "load",
                "--url",
                server.url,
                "--payloads",
                str(payloads),
                "--rate",
                "50",
                "--duration",
                "60",
                "--out",
                str(out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            preexec_fn=sigint_as_from_a_terminal,
        )

        def served_enough():
            with urllib.request.urlopen(f"{server.url}/healthz", timeout=30) as r:
                return json.loads(r.read())["requests"] >= 20

        err = _interrupt_when(proc, served_enough)
        assert proc.returncode == 130, err
        run = load_run(out)
        assert run.meta.status == "interrupted" and run.kind == "served"
        n = len(run.requests)
        assert 15 <= n < 3000 and run.requests["ok"].all()  # sent before Ctrl-C, answered after it
        assert (
            f"workbench load: interrupted after {n} requests; run written to {out} (status: interrupted)"
            in err
        )
    finally:
        code, _, _ = server.stop()
    assert code == 0
    assert os.path.isdir(tmp_path / "server")
