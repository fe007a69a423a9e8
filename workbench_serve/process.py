"""``workbench serve`` in a child process: start it, wait for its ready line, stop it.

For scripts, benchmarks and tests that drive a real server from another
process (``scripts/validate_batching.py --served``, ``benchmarks/bench_loadgen.py``,
``benchmarks/bench_serve_gc.py``, ``tests/serving``). The server prints
``serving NAME on URL (...)`` once its socket listens and its executors are
warm; that line is the only handshake (``--port 0`` picks a free port).
"""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from workbench.errors import WorkbenchError

READY_PREFIX = "serving "


class ServeFailed(WorkbenchError):
    """The server exited before its ready line, or did not print it in time (message: its stderr's tail)."""


class ServeProcess:
    """``python -m workbench serve ARGS`` in a child process; ``url`` once it is ready.

    stdout and stderr are pipes (text); :meth:`stop` returns what they held.
    """

    def __init__(
        self,
        args: Sequence[str | Path | int | float],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        timeout_s: float = 300.0,
    ):
        self.args = [str(a) for a in args]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workbench", "serve", *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
        self.url = self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if select.select([self.proc.stdout], [], [], 0.5)[0]:
                line = self.proc.stdout.readline()
                if line.startswith(READY_PREFIX):
                    return line.split(" on ")[1].split()[0]
            if self.proc.poll() is not None:
                raise ServeFailed(
                    f"workbench serve exited {self.proc.returncode} before it was ready: "
                    f"{self.proc.stderr.read().strip()[-2000:]}"
                )
        self.proc.kill()
        self.proc.wait(30)
        raise ServeFailed(f"workbench serve did not print its ready line within {timeout_s:g} s")

    def stop(
        self, sig: int | None = signal.SIGTERM, timeout_s: float = 300.0
    ) -> tuple[int, str, str]:
        """Send ``sig`` (None: none, e.g. after ``POST /shutdown``), wait; ``(exit code, stdout, stderr)``."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        """Kill the server if it still runs (a test's clean-up)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
