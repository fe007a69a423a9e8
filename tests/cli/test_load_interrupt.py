"""Ctrl-C during ``workbench load`` (in-process and ``--url``) keeps what was measured: the run folder is
written with status ``interrupted``, one line says so, and the exit code is 130."""

import os
import sys
from pathlib import Path

from tests.conftest import TICKING_LOAD, lines, sigint_as_from_a_terminal, ticking_pipeline
from tests.support.cli import load_url, signal_when, started
from workbench.record import load_run

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "serving"))

from served_helpers import Served, payload_file, served_requests  # noqa: E402


def test_ctrl_c_during_an_in_process_load_writes_the_run(tmp_path):
    pipeline, ticks = ticking_pipeline(tmp_path)
    out = tmp_path / "run"
    proc = started(
        *["load", "--pipeline", pipeline, *TICKING_LOAD, "--out", out],
        env={"WB_TICKS": str(ticks)},
        preexec_fn=sigint_as_from_a_terminal,
    )
    err = signal_when(proc, lambda: lines(ticks) >= 30)  # 10 warm-up calls, then measured requests
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
        proc = started(
            *load_url(server.url, payloads, out, "--rate", "50", "--duration", "60"),
            preexec_fn=sigint_as_from_a_terminal,
        )
        err = signal_when(proc, lambda: served_requests(server) >= 20)
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
