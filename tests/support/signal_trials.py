"""SIGINT and SIGTERM at random moments of a short ``profile`` and an in-process ``load`` (issue 35).

A trial starts ``python -m workbench COMMAND ... --out FOLDER/run`` as a shell starts a foreground
command, sends the signal after a seeded delay, and judges what is left (:func:`judge_trial`):

* the process ends within :data:`HANG_S` of the signal (else ``hang``);
* its exit is 130 (SIGINT), 143 (SIGTERM), or 0/1 when it had finished first, and no internal error
  on stderr (else ``bad_exit``); 130/143 may be the signal's own end, as a shell reports it: before
  the handler was installed, or after the command returned (Python restores the default handlers as
  it finalizes, 0.3-0.7 s after a profile of the example has saved its run);
* when the run folder exists, ``show --json`` reads it: exit 0 with strict JSON (else ``unreadable``);
* when it does not, the command said nothing was measured or was stopped before it printed anything
  (else ``lost``: it said it wrote a run, or it exited 0/1 without one);
* nothing else is left in FOLDER: no half-written run beside it (else ``leftover``).

Delays are drawn over the command's whole length as measured by an unsignalled run
(:func:`calibrate`), a third of them in its last 15 %: the save.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import sigint_as_from_a_terminal
from tests.support.fuzz_runner import REPO, run_in_process

COMMANDS = {
    "profile": ["profile", "--closed-loop", "--example", "tabular", "--requests", "2000"]
    + ["--warmup", "5", "--traced", "3", "--threads", "1"],
    "load": [
        "load",
        "--example",
        "tabular",
        "--rate",
        "200",
        "--duration",
        "1.5",
        "--threads",
        "1",
    ],
}
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}
OUTCOMES = ("ok", "nothing_measured", "hang", "bad_exit", "unreadable", "lost", "leftover")
FAILURES = ("hang", "bad_exit", "unreadable", "lost", "leftover")
HANG_S = 120.0


def _start(command: str, folder: Path, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    base = COMMANDS[command]
    if "--pipeline" in extra:  # a pipeline instead of the example
        i = base.index("--example")
        base = base[:i] + base[i + 2 :]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-m", "workbench", *base, *extra, "--out", str(folder / "run")],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_from_a_terminal,
    )


def calibrate(command: str, folder: Path) -> float:
    """Seconds an unsignalled run of ``command`` takes here, start to exit."""
    t0 = time.perf_counter()
    proc = _start(command, folder)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return time.perf_counter() - t0


def delay(rnd: random.Random, length_s: float) -> float:
    """A moment of a run of ``length_s``: uniform over it, or (a third of the time) in its last 15 %."""
    if rnd.random() < 1 / 3:
        return length_s * rnd.uniform(0.85, 1.02)
    return length_s * rnd.uniform(0.0, 1.0)


def trial(
    command: str,
    signame: str,
    delay_s: float,
    folder: Path,
    extra: tuple[str, ...] = (),
    ready: Path | None = None,
) -> tuple[str, str]:
    """One trial in ``folder`` (empty): ``(outcome, why)``, an outcome of :data:`OUTCOMES`; ``extra``
    arguments after the command's own (a later one wins); with ``ready``, the delay starts once that
    file exists (a stage of the command's pipeline makes it)."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = _start(command, folder, extra)
    if ready is not None:  # the moment counts from when the command says it is measuring
        deadline = time.monotonic() + HANG_S
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    time.sleep(delay_s)
    if proc.poll() is None:
        proc.send_signal(SIGNALS[signame])
    try:
        _, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return "hang", f"still running {HANG_S:g} s after {signame}"
    return judge_trial(proc.returncode, err, folder, signame)


def judge_trial(rc: int, err: str, folder: Path, sent: str = "SIGTERM") -> tuple[str, str]:
    """What a trial that sent signal ``sent`` left in ``folder`` (see the module docstring)."""
    last = (err.strip().splitlines() or ["(nothing on stderr)"])[-1][:300]
    others = sorted(p.name for p in folder.iterdir() if p.name != "run")
    if others:
        return "leftover", f"exit {rc}, left beside the run folder: {others}"
    if rc == -SIGNALS[sent]:  # the signal's own end, before its handler or after main returned
        rc = 128 + SIGNALS[sent]  # what a shell reports
    if rc not in (0, 1, 130, 143) or "internal error" in err:
        return "bad_exit", f"exit {rc}: {last}"
    run = folder / "run"
    if run.exists():
        code, out, show_err = run_in_process(["show", "--json", str(run)])
        try:
            json.loads(out, parse_constant=_refuse)
        except ValueError:
            code = code or -1
        if code != 0:
            return (
                "unreadable",
                f"exit {rc}, then show --json: exit {code}: {show_err.strip()[:300]}",
            )
        return "ok", ""
    if "run written to" in err or rc in (0, 1):
        return "lost", f"exit {rc}, no run folder: {last}"
    return "nothing_measured", last


def _refuse(name: str):
    raise ValueError(name)
