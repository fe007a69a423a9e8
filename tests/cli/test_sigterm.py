"""SIGTERM (``timeout``, CI cancellation, ``docker stop``) is handled like Ctrl-C: what was measured is kept,
the run folder says ``interrupted``, and the exit code is 143."""

import signal
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TICKING_LOAD, lines, ticking_pipeline
from tests.support.cli import load_url, signal_when, started, workbench
from workbench.errors import EXIT_TERMINATED, sigterm_as_interrupt, terminated
from workbench.record import load_run


def _terminate_after(tmp_path: Path, argv: list[str], ticks_needed: int = 30) -> tuple[int, str]:
    """``python -m workbench ARGV`` (on ``tmp_path/ticking.py``, the ticking pipeline) SIGTERMed once
    the pipeline has run ``ticks_needed`` times: its exit code and stderr."""
    _, ticks = ticking_pipeline(tmp_path)
    proc = started(*argv, env={"WB_TICKS": str(ticks)})
    err = signal_when(proc, lambda: lines(ticks) >= ticks_needed, signal.SIGTERM)
    return proc.returncode, err


SIGTERM_IN_EXEC = """
import itertools
from workbench import Pipeline


def build(config):  # the handler's KeyboardInterrupt is raised inside code that exec() runs
    exec("import os, signal, time; os.kill(os.getpid(), signal.SIGTERM); time.sleep(60)")
    return Pipeline("exec", items=lambda: itertools.count())
"""


def test_sigterm_inside_exec_still_exits_143(tmp_path):
    # the fuzz run's signal trials: SIGTERM while the example's build imported torch ended the process
    # by SIGINT (exit -2) after it printed 'terminated (SIGTERM)': CPython marks a KeyboardInterrupt
    # that left an exec() as unhandled, caught or not
    (tmp_path / "exec_term.py").write_text(SIGTERM_IN_EXEC)
    proc = workbench(
        *["profile", "--pipeline", f"{tmp_path / 'exec_term.py'}:build", "--requests", "5"],
        *["--warmup", "0", "--traced", "0", "--no-sample-stacks", "--out", tmp_path / "run"],
        timeout=120,
    )
    assert proc.returncode == EXIT_TERMINATED, proc.stderr
    assert proc.stderr.rstrip().endswith("workbench profile: terminated (SIGTERM)")


@pytest.mark.slow
def test_sigterm_during_profile_keeps_the_run_as_interrupted_and_exits_143(tmp_path):
    out = tmp_path / "run"
    rc, err = _terminate_after(
        tmp_path,
        [
            "profile",
            "--closed-loop",
            "--pipeline",
            f"{tmp_path / 'ticking.py'}:build",
            "--requests",
            "100000",
            "--traced",
            "0",
            "--out",
            str(out),
        ],
    )
    assert rc == EXIT_TERMINATED == 143, err
    run = load_run(out)
    n = len(run.requests)
    assert run.meta.status == "interrupted" and n >= 10
    assert (
        f"workbench profile: interrupted after {n} requests; run written to {out} (status: interrupted)"
        in err
    )
    assert err.rstrip().endswith("workbench profile: terminated (SIGTERM)")


@pytest.mark.slow
def test_sigterm_during_an_in_process_load_keeps_the_run(tmp_path):
    out = tmp_path / "run"
    rc, err = _terminate_after(
        tmp_path,
        [
            "load",
            "--pipeline",
            f"{tmp_path / 'ticking.py'}:build",
            *TICKING_LOAD,
            "--out",
            str(out),
        ],
    )
    assert rc == 143, err
    assert load_run(out).meta.status == "interrupted"


@pytest.mark.slow
def test_sigterm_during_compare_exits_143(tmp_path):
    rc, err = _terminate_after(
        tmp_path,
        [
            "compare",
            "--pipeline",
            f"{tmp_path / 'ticking.py'}:build",
            "--config",
            "batch_size=1",
            "--config",
            "batch_size=2",
        ],
    )
    assert rc == 143 and "workbench compare: terminated (SIGTERM)" in err, err
    # the configurations' worker processes (stopped between their blocks, or running) ended with it
    deadline = time.monotonic() + 10
    while _with_env(f"WB_TICKS={tmp_path / 'ticks.txt'}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _with_env(f"WB_TICKS={tmp_path / 'ticks.txt'}") == []


def _with_env(entry: str) -> list[int]:
    """Processes whose environment holds ``entry`` (Linux /proc; readable for our own processes)."""
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if entry.encode() in env.read_bytes().split(b"\0"):
                found.append(int(env.parent.name))
        except OSError:  # exited, or not ours
            pass
    return found


def test_the_handler_is_restored_and_does_nothing_off_the_main_thread():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
        signal.raise_signal(signal.SIGTERM)
    assert terminated() and signal.getsignal(signal.SIGTERM) is before
    with sigterm_as_interrupt():
        assert not terminated()


@pytest.mark.slow
def test_sigterm_during_a_served_load_drains_like_ctrl_c_and_exits_143(tmp_path):
    import os

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
    from served_helpers import Served, payload_file, served_requests

    server = Served(tmp_path / "server")
    try:
        out = tmp_path / "client"
        payloads = payload_file(tmp_path / "payloads.txt", 200)
        proc = started(*load_url(server.url, payloads, out, "--rate", "50", "--duration", "60"))
        err = signal_when(proc, lambda: served_requests(server) >= 20, signal.SIGTERM)
        assert proc.returncode == 143, err
        run = load_run(out)
        assert (
            run.meta.status == "interrupted" and run.requests["ok"].all()
        )  # in flight at SIGTERM: answered
        assert "workbench load: terminated (SIGTERM)" in err
    finally:
        server.stop()
    assert os.path.isdir(tmp_path / "server")
