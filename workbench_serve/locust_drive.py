"""``load --url --engine locust``: the workbench's schedule sent by Locust's master and workers.

The ``load`` process draws the arrival schedule and the request bodies as
``load --url`` does, writes them to a plan file and starts Locust's master
(``python -m workbench_serve.locust_engine master``, headless, no web UI)
and ``workers`` local workers (``python -m workbench locust-worker``); with
``expect_workers`` more than ``workers``, the rest connect from other
machines (``python -m workbench locust-worker --master HOST``). The rows the
workers return become the same :class:`~workbench_serve.client.Drive` the
workbench's own generator returns, so :func:`~workbench_serve.loadrun.run_http_load`
joins them into a run folder identical in shape to a ``load --url`` run.

Differences that stay visible: ``serving.client`` names Locust; a request's
send time is when its greenlet handed it to geventhttpclient (a wait for a
free connection is inside the end to end, not the lag); gevent's timers
(whole milliseconds in its loop) show as generator lag.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.errors import ConfigError
from workbench.units import ns_to_s
from .client import Drive, Result, decoded_health, response_result
from .locust_wire import SECRET_ENV, new_secret, secret_from_env
import importlib.util
import dataclasses
from .client import Target, _unreachable

READY_TIMEOUT_S = 120.0
MAX_HEALTH_BYTES = 1 << 20
WORKER_STAGE = "locust_worker"  # the error stage of the requests a failed worker took with it
READY_LINE = "locust master listening on port"  # the master's first line on stdout


@dataclass(frozen=True)
class LocustEngine:
    """Where the master listens and how many workers it waits for.

    workers: local worker processes to start (0: all on other machines).
    expect_workers: workers the master waits for (default ``workers``).
    master_host: the address the master binds (127.0.0.1; 0.0.0.0 for workers on other machines).
    """

    workers: int = 1
    expect_workers: int | None = None
    master_host: str = "127.0.0.1"
    master_port: int = 0
    connect_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.workers < 0:
            raise ConfigError(f"--workers must be >= 0, got {self.workers}")
        if self.expected < 1:
            raise ConfigError(
                "--engine locust needs at least one worker (--workers N or --expect-workers N)"
            )
        if self.expected < self.workers:
            raise ConfigError(
                f"--expect-workers {self.expect_workers} is fewer than the --workers {self.workers} "
                "started here"
            )

    @property
    def expected(self) -> int:
        return self.expect_workers if self.expect_workers is not None else self.workers

    def client_name(self) -> str:
        import importlib.metadata

        return f"locust {importlib.metadata.version('locust')} ({self.expected} workers, geventhttpclient)"

    def drive(
        self,
        url: str,
        payloads: list[bytes],
        schedule_ns: np.ndarray,
        *,
        tag: str = "wb",
        warmup: int = 5,
        timeout_s: float = 30.0,
        watch=None,
    ) -> Drive:
        """:func:`workbench_serve.client.drive`'s contract, sent by Locust's workers.

        watch: a sweep point's :class:`~workbench.analysis.windows.StabilityWatch`; its rule goes to
        the master, which stops the workers once the point is stable, and its ``windows_run`` and
        ``stable_after`` come back from there.
        """
        if not payloads:
            raise ConfigError("no request bodies to send")
        _check_reachable(url)
        before = server_health(url)
        rule = None  # the watch's stop rule, for the master's own watch
        if watch is not None:
            rule = {k: getattr(watch, k) for k in ("window_ns", "stability_pct", "max_windows")}
        with tempfile.TemporaryDirectory(prefix="wb-locust-") as tmp:
            plan, results = Path(tmp) / "plan.pickle", Path(tmp) / "results.pickle"
            with open(plan, "wb") as f:
                pickle.dump(
                    {
                        "url": url,
                        "tag": tag,
                        "payloads": payloads,
                        "timeout_s": timeout_s,
                        "warmup": warmup,
                        "offsets_ns": [int(x) for x in schedule_ns],
                        "watch": rule,
                    },
                    f,
                )
            span_s = ns_to_s(float(schedule_ns[-1])) if len(schedule_ns) else 0.0
            self._run(plan, results, Path(tmp), span_s, timeout_s)
            with open(results, "rb") as f:  # the master's file: decoded there
                returned = pickle.load(f)
            if watch is not None and returned.get("watch"):
                watch.windows_run = returned["watch"]["windows_run"]
                watch.stable_after = returned["watch"]["stable_after"]
        rows = [
            (k, response_result(f"{tag}-{k}", due, sent, done, status, headers, body, error, units))
            for k, due, sent, done, status, headers, body, error, units in returned["rows"]
        ]
        rows += [  # a failed worker's requests: never sent as far as the run knows
            (k, Result(f"{tag}-{k}", due, due, due, None, (WORKER_STAGE, "WorkerLost", why)))
            for k, due, why in returned["lost"]
        ]
        out = [result for _, result in sorted(rows, key=lambda row: row[0])]
        lags = np.array([r.sent_ns - r.due_ns for r in out], dtype=np.int64).clip(min=0)
        return Drive(out, lags, 0, before, server_health(url), notes=returned["notes"])

    def _run(self, plan: Path, results: Path, tmp: Path, span_s: float, timeout_s: float) -> None:
        # here, not at the top: it needs msgpack, which comes with Locust (locust_available said so)

        port = self.master_port or _free_port(self.master_host)
        secret = new_secret()  # this run's, for the workers started here
        if self.expected > self.workers:  # workers elsewhere hold the user's
            secret = secret_from_env("--expect-workers beyond --workers").decode()
        env = dict(os.environ, PYTHONUNBUFFERED="1") | {SECRET_ENV: secret}
        options = {
            "--bind": self.master_host,
            "--port": port,
            "--expect-workers": self.expected,
            "--connect-timeout": self.connect_timeout_s,
        }
        command = [sys.executable, "-m", "workbench_serve.locust_engine", "master"]
        command += [str(plan), str(results), *(str(x) for pair in options.items() for x in pair)]
        master = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        workers = []
        try:
            _wait_listening(master)
            worker = [sys.executable, "-m", "workbench", "locust-worker", "--master"]
            worker += [_local(self.master_host), "--master-port", str(port)]
            # their logs go to files: a pipe nobody reads could fill and block them
            for i in range(self.workers):
                with open(tmp / f"worker{i}.log", "w") as log:
                    workers.append(subprocess.Popen(worker, stdout=log, stderr=log, env=env))
            limit = self.connect_timeout_s + span_s + timeout_s * 8 + 120
            _, err = master.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            raise ConfigError(f"the Locust master did not finish within {limit:g} s") from None
        finally:
            for proc in [master, *workers]:
                _stop(proc)
        if master.returncode != 0:
            lines = [ln for ln in err.strip().splitlines() if ln.startswith("workbench load")]
            why = f"the Locust master exited {master.returncode}: {err.strip()[-500:]}"
            raise ConfigError(lines[-1].split(": ", 1)[1] if lines else why)


def _wait_listening(master: subprocess.Popen) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        line = master.stdout.readline()
        if line.startswith(READY_LINE):
            return
        if not line and master.poll() is not None:
            raise ConfigError(
                f"the Locust master exited {master.returncode} before listening: "
                f"{master.stderr.read().strip()[-500:]}"
            )
    raise ConfigError(f"the Locust master did not start listening within {READY_TIMEOUT_S:g} s")


def _stop(proc: subprocess.Popen) -> None:
    """Let a finished process go; end one still running (started here, by its own handle)."""
    if proc.poll() is None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _local(host: str) -> str:
    """The address this machine reaches a server bound to ``host`` at (a wildcard: loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "*", "") else host


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((_local(host), 0))
        return s.getsockname()[1]


def server_health(url: str) -> dict | None:
    """``GET /healthz`` of a workbench server (its CPU time, stages, policy), or None for another server."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/healthz", timeout=5) as resp:
            return decoded_health(resp.read(MAX_HEALTH_BYTES))
    except (OSError, ValueError):
        return None


def locust_available() -> None:
    """A ConfigError with the install hint when Locust is not installed (found without importing it)."""
    if importlib.util.find_spec("locust") is None:
        raise ConfigError(
            "--engine locust needs Locust: pip install 'locust>=2.47,<3' (or the workbench's "
            "[locust] extra)"
        )


def with_client(run, name: str):
    """The run with ``serving.client`` and ``env.client`` naming the load generator that sent it."""

    def renamed(section):
        if dataclasses.is_dataclass(section):
            return dataclasses.replace(section, client=name)
        return {**section, "client": name}

    run.meta = dataclasses.replace(
        run.meta, serving=renamed(run.meta.serving), env=renamed(run.meta.env)
    )
    return run


def _check_reachable(url: str) -> None:
    """A ConfigError before any process starts when nothing listens at ``url`` (as ``load --url`` says)."""
    target = Target.from_url(url)
    try:
        socket.create_connection((target.host, target.port), timeout=5).close()
    except OSError as exc:
        raise _unreachable(url, exc) from None
