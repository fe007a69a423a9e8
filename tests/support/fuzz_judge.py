"""Judging a fuzzed trace variant: what the workbench made of it, and whether the numbers are sound.

Outcomes (see :mod:`tests.support.fuzz`): ``loaded``, ``clean_error``, ``crash``,
``wrong_result``. A clean error must be one line naming the file; a loaded trace's
``analyze`` report must be valid JSON (no NaN/Infinity) with durations, spans and
busy times >= 0, busy <= span, an idle fraction in [0, 1], and parts that sum to
their totals (stream idle, step breakdown).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from workbench.analysis.trace_report import analyze as analyze_trace
from workbench.errors import WorkbenchError
from workbench.trace import load_trace
from workbench.widgets.traces import trace_figures

from .fuzz import Variant

OUTCOMES = ("loaded", "clean_error", "crash", "wrong_result")


@dataclass(frozen=True)
class Verdict:
    family: str
    outcome: str  # one of OUTCOMES
    detail: str = ""


def judge(
    variant: Variant, folder: Path, *, analyze: bool = True, figures: bool = False
) -> Verdict:
    """Load (and analyze, and draw the dashboard figures of) one variant; classify the outcome."""
    path = variant.write(folder)
    try:
        trace = load_trace(path)
        problems = table_problems(trace.events)
        if analyze:
            problems += report_problems(analyze_trace(trace))
        if figures:
            trace_figures(trace)
    except WorkbenchError as exc:
        message = str(exc)
        if str(path) not in message or "\n" in message:
            return Verdict(
                variant.family,
                "wrong_result",
                f"error not one line naming the file: {message[:200]}",
            )
        return Verdict(variant.family, "clean_error", message.replace(str(path), "TRACE")[:200])
    except Exception as exc:  # noqa: BLE001 - finding these is the point
        return Verdict(
            variant.family, "crash", f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        )
    finally:
        path.unlink(missing_ok=True)
    return (
        Verdict(variant.family, "wrong_result", problems[0])
        if problems
        else Verdict(variant.family, "loaded")
    )


def judge_cli(variant: Variant, folder: Path, timeout_s: float = 120.0) -> Verdict:
    """The same through ``python -m workbench analyze PATH --json`` in a fresh process: exit 0 with a sound
    report is loaded, exit 2 with one line is a clean error, anything else a crash."""
    path = variant.write(folder)
    root = str(Path(__file__).resolve().parents[2])
    env = dict(
        os.environ,
        PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
        OMP_NUM_THREADS="1",
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "workbench", "analyze", str(path), "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
        )
    finally:
        path.unlink(missing_ok=True)
    last = (done.stderr.strip().splitlines() or [""])[-1][:300]
    if done.returncode == 2:
        one_line = done.stderr.count("\n") == 1
        return Verdict(variant.family, "clean_error" if one_line else "crash", last)
    if done.returncode != 0:
        return Verdict(variant.family, "crash", f"exit {done.returncode}: {last}")
    try:
        problems = report_problems(json.loads(done.stdout))
    except ValueError as exc:  # NaN is not even valid JSON
        problems = [f"unreadable JSON report: {exc}"]
    return (
        Verdict(variant.family, "wrong_result", problems[0])
        if problems
        else Verdict(variant.family, "loaded")
    )


def table_problems(events) -> list[str]:
    """Invariants of the events table: durations >= 0 and ends that did not wrap around int64."""
    dur, ts = events["dur_ns"].to_numpy(), events["ts_ns"].to_numpy()
    problems = ["negative dur_ns"] if (dur < 0).any() else []
    return problems + (["ts_ns + dur_ns wrapped around"] if (ts + dur < ts).any() else [])


def report_problems(report: dict) -> list[str]:
    """Invariants of an ``analyze`` report (see the module docstring); [] when it is sound."""
    try:
        json.dumps(report, allow_nan=False)
    except ValueError:
        return ["NaN or Infinity in the JSON report"]
    problems = []
    gpu = report["gpu"]
    if gpu["span_us"] is not None:
        problems += _negative(gpu, ("span_us", "busy_us", "idle_us"), "gpu")
        if gpu["busy_us"] > gpu["span_us"] + _eps(gpu["span_us"]):
            problems.append(f"gpu busy {gpu['busy_us']} us > span {gpu['span_us']} us")
        if not 0.0 <= gpu["idle_fraction"] <= 1.0:
            problems.append(f"gpu idle fraction {gpu['idle_fraction']} outside [0, 1]")
    for s in gpu["streams"]:
        parts = ("host_wait_us", "kernel_wait_us", "other_us")
        problems += _negative(s, ("idle_us", *parts), "stream") + _sums(
            s, parts, "idle_us", "stream idle"
        )
    kernels = report["kernels"]
    problems += _negative(kernels, ("count", "total_us", "busy_us"), "kernels")
    if kernels["busy_us"] is not None and kernels["busy_us"] > kernels["total_us"] + _eps(
        kernels["total_us"]
    ):
        problems.append("kernel busy time > summed kernel time")
    for key in ("memcpy", "memset", "launches"):
        problems += _negative(report[key], ("count", "total_us"), key)
    for step in report["steps"]:
        problems += _negative(
            step, ("dur_us", "kernel_count", "kernel_us", "memcpy_us", "memset_us"), "step"
        )
    parts = (
        "kernel_us",
        "memcpy_us",
        "memset_us",
        "communication_us",
        "runtime_us",
        "dataloader_us",
        "cpu_exec_us",
        "other_us",
    )
    for row in report["step_breakdown"]:
        problems += _negative(row, (*parts, "total_us"), "step breakdown") + _sums(
            row, parts, "total_us", "step"
        )
    for stage in report["stages"]:
        problems += _negative(
            stage, ("count", "host_us", "gpu_us", "launch_us", "transfer_us", "sync_us"), "stage"
        )
    return problems


def _negative(row: dict, keys, where: str) -> list[str]:
    return [f"{where} {k} = {row[k]} < 0" for k in keys if row.get(k) is not None and row[k] < 0]


def _eps(total) -> float:
    return 1e-9 * abs(total or 0.0) + 1e-6


def _sums(row: dict, parts, total_key: str, where: str) -> list[str]:
    total = row.get(total_key)
    summed = sum(row[p] or 0.0 for p in parts)
    if total is None or abs(summed - total) <= _eps(total) * len(parts):
        return []
    return [f"{where} parts sum to {summed} us, not {total_key} {total} us"]
