"""Start ``python -m workbench_room`` on a free port for a test; find its kernels.

Shared by the room tests and the room benchmark. Kernels are the server's child
processes running ``ipykernel_launcher`` (psutil, which comes with ipykernel).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
# headless Chromium as the browser tests and benchmarks/bench_room.py launch it
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-gpu",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
URL_LINE = re.compile(r"^\s+(?:open|hand out): (?P<url>http://\S+)\s*$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def room_server(*args: str, log_name: str = "room.log", timeout_s: float = 90.0):
    """Yield ``(server process, port, printed URL, log path)`` of a launcher started with ``args``."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = free_port()
    log = ARTIFACTS / log_name
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workbench_room", "--port", str(port), *args],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )
    try:
        yield proc, port, wait_for_url(proc, log, timeout_s), log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for_url(proc: subprocess.Popen, log: Path, timeout_s: float) -> str:
    """The URL the launcher printed once it listens."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the room server exited with code {proc.returncode}; see {log}")
        for line in log.read_text(errors="replace").splitlines():
            m = URL_LINE.match(line)
            if m:
                return m.group("url")
        time.sleep(0.1)
    raise TimeoutError(f"the room server printed no URL within {timeout_s} s; see {log}")


def kernel_processes(proc: subprocess.Popen) -> list:
    """The server's kernels: child processes running ``ipykernel_launcher``."""
    import psutil

    found = []
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if any("ipykernel_launcher" in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            pass
    return found


def kernel_id_of(process) -> str:
    """A kernel's id, from its connection file argument ``kernel-<id>.json``."""
    for part in process.cmdline():
        m = re.search(r"kernel-([0-9a-f-]{36})\.json$", part)
        if m:
            return m.group(1)
    raise ValueError(f"no kernel connection file in {process.cmdline()}")


def tree_rss_bytes(proc: subprocess.Popen) -> int:
    """Resident memory of the server and all its children, in bytes."""
    import psutil

    root = psutil.Process(proc.pid)
    total = 0
    for p in [root, *root.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def wait_for_pools(log: Path, timeout_s: float, pools: int) -> float | None:
    """Seconds until Voila logged ``pools`` dashboards' pools as filled (their kernels started; None: not
    within ``timeout_s``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if log.read_text(errors="replace").count("is filled with") >= pools:
            return round(time.monotonic() - started, 1)
        time.sleep(0.5)
    return None


def wait_until_quiet(proc: subprocess.Popen, timeout_s: float, cores: float = 0.1) -> float | None:
    """Seconds until the server and its kernels use under ``cores`` of a core over 2 s (None: not within
    ``timeout_s``): the pool "filled" line comes when its kernels started, before their notebooks ran."""
    import psutil

    def cpu_s() -> float:
        total = 0.0
        root = psutil.Process(proc.pid)
        for p in [root, *root.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        before = cpu_s()
        time.sleep(2.0)
        if (cpu_s() - before) / 2.0 < cores:
            return round(time.monotonic() - started, 1)
    return None


def cpu_busy_pct(seconds: float = 2.0) -> float | None:
    """How busy all CPUs were over ``seconds`` before a measurement (%, psutil; None without psutil): other
    work, as nothing of the measurement runs yet. The load average decays over minutes, so right after
    another run it still counts that run; this does not."""
    try:
        import psutil
    except ImportError:
        return None
    return round(psutil.cpu_percent(interval=seconds), 1)
