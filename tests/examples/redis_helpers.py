"""A real redis-server on a free port for the tests (skipped, with one line, where it is not installed)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest


def start_redis(tmp_path):
    """Start ``redis-server`` (no persistence) on a free port; returns (process, url)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server not installed (make test installs Debian's redis-server as root)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("redis-server did not start within 20 s")
