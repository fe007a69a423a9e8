"""Helpers of the served tests: real servers in child processes (start, wait for the ready line, stop)."""

import json
import signal
import socket
import urllib.request
from pathlib import Path

from tests.support.cli import ENV, workbench  # noqa: F401 - the served tests' names for them
from workbench_serve.process import ServeProcess


HERE = Path(__file__).resolve().parent
PIPELINE = f"{HERE / 'served_pipeline.py'}:build"


class Served(ServeProcess):
    """``python -m workbench serve`` of the test pipeline (or ``pipeline=None``: the args say) on a free port."""

    def __init__(self, out: Path, *extra, pipeline=PIPELINE):
        self.out = out
        source = ["--pipeline", pipeline] if pipeline else []
        super().__init__(
            [
                *source,
                "--port",
                "0",
                "--max-wait-ms",
                "1",
                "--warmup",
                "1",
                "--out",
                str(out),
                *extra,
            ],
            env=ENV,
        )

    def stop(self, sig=signal.SIGTERM, timeout_s=60):
        return super().stop(sig, timeout_s)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def payload_file(path: Path, n: int, poison=()) -> Path:
    path.write_text("".join(json.dumps({"x": -1 if k in poison else k}) + "\n" for k in range(n)))
    return path


def served_requests(server: ServeProcess) -> int:
    """Requests the server has taken so far (the count of its ``/healthz``)."""
    with urllib.request.urlopen(f"{server.url}/healthz", timeout=30) as r:
        return json.loads(r.read())["requests"]
