"""The command line as users run it, for tests and benchmarks: ``python -m workbench ARGS`` in a child
process (:func:`workbench` runs it to its end, :func:`started` leaves it running for a signal), or
``workbench.cli.main(argv)`` in this process with its output captured (:func:`main_output`)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from workbench.cli import main

REPO = Path(__file__).resolve().parents[2]
# The child imports this checkout's package (also when started from another folder) and runs one
# BLAS thread, unbuffered: a test reads its lines as they come.
ENV = dict(
    os.environ,
    OMP_NUM_THREADS="1",
    PYTHONUNBUFFERED="1",
    PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
)


def command(*args: object) -> list[str]:
    """The argv of ``python -m workbench ARGS`` (each arg made a string)."""
    return [sys.executable, "-m", "workbench", *map(str, args)]


def workbench(
    *args: object, timeout: float = 300, env: dict | None = None, **run
) -> subprocess.CompletedProcess:
    """``python -m workbench ARGS`` run to its end: ``returncode``, ``stdout``, ``stderr`` (text);
    ``env``: variables added to :data:`ENV`; ``run``: more ``subprocess.run`` arguments (``cwd``)."""
    return subprocess.run(
        command(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**ENV, **(env or {})},
        **run,
    )


def started(*args: object, env: dict | None = None, **popen) -> subprocess.Popen:
    """``python -m workbench ARGS`` left running (stdout and stderr piped, text), for a test that signals
    it; ``env``: variables added to :data:`ENV`; ``popen``: more ``Popen`` arguments (``preexec_fn``)."""
    return subprocess.Popen(
        command(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**ENV, **(env or {})},
        **popen,
    )


def signal_when(
    proc: subprocess.Popen, ready, sig: int = signal.SIGINT, timeout_s: float = 120.0
) -> str:
    """Send ``sig`` to ``proc`` (from :func:`started`) once ``ready()`` holds; its stderr after it exits.
    Fails if ``ready()`` does not hold within ``timeout_s``; the child is killed on the way out."""
    try:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert time.monotonic() < deadline, f"{proc.args}: timed out waiting"
            time.sleep(0.05)
        proc.send_signal(sig)
        return proc.communicate(timeout=120)[1]
    finally:
        proc.kill()


def load_url(url: str, payloads: object, out: object, *flags: object) -> list:
    """The arguments of ``load --url URL --payloads FILE FLAGS --out OUT``, for :func:`workbench` or
    :func:`started` (``Served`` in ``tests/serving/served_helpers.py`` starts the server)."""
    return ["load", "--url", url, "--payloads", payloads, *flags, "--out", out]


def served_load(
    serve: list, payloads: object, folder: Path, *flags: object, timeout: float = 600, **where
) -> tuple[dict, Path]:
    """``workbench serve SERVE --port 0 --out folder/server`` driven to its end by
    ``load --url URL --payloads PAYLOADS FLAGS --json --out folder/client`` in another process, the
    server stopped after: ``(the client's JSON, the server's run folder)``. ``where``: ``serve_cwd``
    (the server's folder, another checkout), ``cwd`` (the client's)."""
    from workbench_serve.process import ServeProcess  # a wing: only what serves needs it

    out = folder / "server"
    server = ServeProcess([*serve, "--port", 0, "--out", out], env=ENV, cwd=where.get("serve_cwd"))
    try:
        client = load_url(server.url, payloads, folder / "client", *flags, "--json")
        res = workbench(*client, timeout=timeout, cwd=where.get("cwd"))
        return json.loads(res.stdout), out
    finally:
        server.stop()


def main_output(argv: list[str]) -> tuple[int, str, str]:
    """``workbench.cli.main(argv)`` in this process: ``(exit code, stdout, stderr)``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def one_line(rc: int, err: str, *words: str) -> None:
    """Exit 2 (bad input) with one line naming the problem (each of ``words`` in it), no traceback."""
    assert (
        rc == 2 and err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err
    ), err
    for word in words:
        assert word in err, (word, err)


def fails_only_with_fail_on_error(argv: list[str], folder: Path) -> str:
    """``main(argv)`` exits 0 (run in ``folder/a``) and 1 with ``--fail-on-error`` (run in ``folder/b``):
    the second's stderr."""
    rc, _, err = main_output([*argv, "--out", str(folder / "a")])
    assert rc == 0, err
    rc, _, err = main_output([*argv, "--out", str(folder / "b"), "--fail-on-error"])
    assert rc == 1, err
    return err
