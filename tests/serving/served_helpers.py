"""Helpers of the served tests: real servers in child processes (start, wait for the ready line, stop)."""
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
PIPELINE = f"{HERE / 'served_pipeline.py'}:build"
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")


def workbench(*args, timeout=180):
    """Run ``python -m workbench ARGS`` in a child process (the load generator's own process)."""
    return subprocess.run([sys.executable, "-m", "workbench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


class Served:
    """``python -m workbench serve`` in a child process; ``url`` once it listens."""

    def __init__(self, out: Path, *extra, pipeline=PIPELINE):
        self.out = out
        source = ["--pipeline", pipeline] if pipeline else []
        self.proc = subprocess.Popen([sys.executable, "-m", "workbench", "serve", *source,
                                      "--port", "0", "--max-wait-ms", "1", "--warmup", "1", "--out", str(out), *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        self.url = self._wait_ready(300)

    def _wait_ready(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith("serving "):
                    return line.split(" on ")[1].split()[0]
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}: {self.proc.stderr.read()}")
        self.proc.kill()
        raise AssertionError("server did not start in time")

    def stop(self, sig=signal.SIGTERM, timeout_s=60):
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, out, err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def payload_file(path: Path, n: int, poison=()) -> Path:
    path.write_text("".join(json.dumps({"x": -1 if k in poison else k}) + "\n" for k in range(n)))
    return path
