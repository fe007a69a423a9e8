"""Fuzz cases through the command line, each with a bounded time: a worker process and the judge (issue 35).

:class:`CliWorker` keeps one Python process that runs ``workbench.cli.main(argv)`` in process for case
after case (no interpreter start per case; arguments may hold a NUL, which no real command line can).
Each case has a deadline: past it the worker gets SIGTERM, as ``timeout`` would send, and a command
that then stops (exit 143, or what it would have exited) was merely long; one that does not stop
within the grace period is a **hang**: the worker is killed and started again.

:func:`judge` states the invariant every fuzz case of ``tests/fuzz`` and ``benchmarks/fuzz_inputs.py``
is held to: exit 0, 1 or 4 (and 130/143 when stopped), strict JSON on stdout when ``--json`` was
asked for and no NaN or infinity in a text output; exit 2 with one line naming the problem (after
argparse's usage block, for a usage error); never exit 3, never a traceback, never a hang.
"""

from __future__ import annotations

import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.input_fuzz import run_cli as run_in_process  # main() in process: (rc, out, err)

REPO = Path(__file__).resolve().parents[2]
# what a case can come to; the table of benchmarks/fuzz_inputs.py has one column each
OUTCOMES = ("ok", "clean_error", "stopped", "exit_3", "nan", "crash", "hang")
FAILURES = ("exit_3", "nan", "crash", "hang")
GRACE_S = 30.0  # after the deadline's SIGTERM: a command still running then is a hang
START_S = 600.0  # a worker's start (importing the command line) at load 25 took minutes
_NAN_WORD = re.compile(r"(?<![\w.-])(nan|NaN|NAN|-?inf|-?Infinity|-?INF)(?![\w-])")


@dataclass(frozen=True)
class Result:
    """What one case did: exit code, output, seconds, and whether the deadline's SIGTERM stopped it."""

    rc: int
    out: str
    err: str
    seconds: float
    stopped: bool = False  # the deadline passed and SIGTERM was sent
    hung: bool = False  # ... and it did not stop within GRACE_S


def serve_cases(fd: int) -> None:
    """The worker's loop: a JSON line ``{"argv", "cwd"}`` on stdin, a JSON result line on ``fd`` (with
    ``cpu``: the CPU seconds this process and the children it waited for have used, from its start)."""
    import workbench.cli  # noqa: F401 - imported before the first case's deadline starts

    results = os.fdopen(fd, "w")
    results.write("ready\n")
    results.flush()
    for line in sys.stdin:
        case = json.loads(line)
        os.chdir(case["cwd"])
        t0 = time.perf_counter()
        rc, out, err = run_in_process(case["argv"])
        seconds = time.perf_counter() - t0
        children = resource.getrusage(resource.RUSAGE_CHILDREN)  # compare --example's workers
        cpu = time.process_time() + children.ru_utime + children.ru_stime
        results.write(
            json.dumps({"rc": rc, "out": out, "err": err, "s": seconds, "cpu": cpu}) + "\n"
        )
        results.flush()


_WORKER = (
    "import sys; from tests.support.fuzz_runner import serve_cases; serve_cases(int(sys.argv[1]))"
)


class CliWorker:
    """One worker process running cases in turn (see the module docstring); a context manager."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.cpu_s = 0.0  # CPU seconds its processes reported (a killed one's last case is not in)
        self._cpu_reported = 0.0

    def __enter__(self) -> "CliWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        r, w = os.pipe()
        env = dict(
            os.environ,
            PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            OMP_NUM_THREADS="1",
        )
        env.pop("WORKBENCH_DEBUG", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(w)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(w,),
            cwd=REPO,
            env=env,
            text=True,
        )
        os.close(w)
        self._results, self._cpu_reported = os.fdopen(r), 0.0
        if self._read(START_S) != "ready\n":
            raise RuntimeError(f"the fuzz worker did not start in {START_S:g} s")

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._results.close()
            self.proc = None

    def run(self, argv: list[str], cwd: Path, deadline_s: float) -> Result:
        """Run one case; past ``deadline_s`` SIGTERM, past :data:`GRACE_S` more a hang (worker restarted)."""
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            self._start()
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd)}) + "\n")
        self.proc.stdin.flush()
        line = self._read(deadline_s)
        stopped = line is None and self.proc.poll() is None
        if stopped:
            self.proc.send_signal(signal.SIGTERM)
            line = self._read(GRACE_S)
        if line:
            done = json.loads(line)
            self.cpu_s += done["cpu"] - self._cpu_reported
            self._cpu_reported = done["cpu"]
            return Result(done["rc"], done["out"], done["err"], done["s"], stopped)
        code = self.proc.poll()
        self.close()
        self.restarts += 1
        seconds = time.perf_counter() - t0
        if code is None:
            return Result(-1, "", "", seconds, stopped=True, hung=True)
        return Result(code, "", f"the worker process died: exit {code}\n", seconds, stopped)

    def _read(self, timeout_s: float) -> str | None:
        ready, _, _ = select.select([self._results], [], [], timeout_s)
        return self._results.readline() or None if ready else None


def judge(result: Result, argv: list[str], *, stop_ok: bool = False) -> tuple[str, str]:
    """``(outcome, why)`` for one case, an outcome of :data:`OUTCOMES` (see the module docstring).

    stop_ok: the command runs until stopped (``serve``, ``locust-worker``), so exit 143 at the deadline
    is its normal end; otherwise a case the deadline stopped is ``stopped`` (long, not wrong).
    """
    rc, out, err = result.rc, result.out, result.err
    if result.hung:
        return "hang", f"still running {GRACE_S:g} s after SIGTERM at the deadline"
    if "Traceback (most recent call last)" in err:
        return "crash", f"exit {rc} with a traceback: {_last(err)}"
    if rc == 3:
        return "exit_3", _last(err)
    if result.stopped and rc in (130, 143):
        return ("ok" if stop_ok else "stopped"), ""
    if rc == 2:
        lines = error_lines(err)
        if len(lines) != 1:
            return "crash", f"exit 2 with {len(lines)} error lines: {err[:300]!r}"
        return "clean_error", ""
    if rc not in (0, 1, 4):
        return "crash", f"exit {rc}: {_last(err)}"
    if "--json" in argv:
        try:
            json.loads(out, parse_constant=_refuse)
        except _NonFinite as exc:
            return "nan", f"exit {rc}, {exc} in the JSON"
        except ValueError as exc:
            return "crash", f"exit {rc} but stdout is not JSON: {exc}"
        return "ok", ""
    found = _NAN_WORD.search(_without(out, argv))
    if found:
        return "nan", f"exit {rc}, {found.group(0)!r} in the output: {_around(out, found)!r}"
    return "ok", ""


def error_lines(err: str) -> list[str]:
    """The lines of stderr past argparse's usage block (``usage: ...`` and its indented continuation),
    each as a terminal shows it: its text after its last carriage return (a progress bar redraws)."""
    lines = [shown for ln in err.split("\n") if (shown := ln.rsplit("\r", 1)[-1]).strip()]
    while lines and (lines[0].startswith("usage:") or lines[0][:1].isspace()):
        lines.pop(0)
    return lines


def family(why: str) -> str:
    """A crash reason with its paths, quoted values and numbers blanked: one key per family of failures."""
    text = re.sub(r"(/[^\s'\":,]+)+", "PATH", why)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'X'", text)
    return re.sub(r"-?\d+(\.\d+)?(e[+-]?\d+)?", "N", text)[:160]


class _NonFinite(ValueError):
    pass


def _refuse(name: str):
    raise _NonFinite(name)


def _last(err: str) -> str:
    lines = err.strip().splitlines()
    return lines[-1][:300] if lines else "(no message)"


def _without(out: str, argv: list[str]) -> str:
    for arg in sorted(argv, key=len, reverse=True):
        if len(arg) > 2:
            out = out.replace(arg, "")
    return out


def _around(text: str, found: re.Match) -> str:
    return text[max(0, found.start() - 60) : found.end() + 60]
