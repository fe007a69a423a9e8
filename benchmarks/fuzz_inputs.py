"""Fuzz every reader and every command-line argument, and signal short runs (issues 27 and 35).

Readers: a run folder of every kind (profile, load, simulation, served client and server,
ingested; ``show --json``, and every 10th also ``audit --json``, ``compare BASE RUN --json`` and
``gate BASE RUN``), ``compare --json`` files (``gate``), arrivals CSVs (``simulate``, every 10th
``load``), payload files (``load --url``), OTLP/JSON exports (``ingest-otel``), sweep folders
(``show``, ``compare``, every 10th ``audit``) and traces (``analyze``): the mutators of
``tests/support`` (:mod:`tests.support.fuzz_cases`). Arguments: every subcommand's arguments from
argparse's own definitions, odd values of their kind (:mod:`tests.support.arg_fuzz`). All of them in
process, through ``workbench.cli.main``, in a worker process with a deadline per case
(:mod:`tests.support.fuzz_runner`). Signals: SIGINT and SIGTERM at seeded moments of a short
``profile`` and an in-process ``load``, a third of them in the save (:mod:`tests.support.signal_trials`).

The invariant: exit 0/1/4 with strict JSON (with ``--json``) and no NaN or infinity in a text
output, or exit 2 with one line; never exit 3, never a traceback, never a hang; a signalled run exits
130/143 (or 0/1 when it had finished), its run folder readable by ``show`` or never started.

Prints and writes ``benchmarks/results/fuzz_inputs.md``: the table, the failure families (each with
its first case as a command) and the wall and CPU times; exits 1 when anything failed. The signal
trials run first; the file is rewritten as each kind finishes, marked partial until all have. One CLI
worker per process runs every chunk (a case-index of the 12 readers: about 0.26 CPU-seconds, so
10,000 of each, 2,000 argument sets and 50 signal trials take about 50 CPU-minutes).

    python benchmarks/fuzz_inputs.py [--cases 10000] [--args 2000] [--signals 50] [--seed 0]
        [--kinds KIND ...] [--jobs N] [--results FILE] [--note TEXT]
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a plain script from a checkout
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

from tests.support import signal_trials  # noqa: E402
from tests.support.arg_fuzz import repro  # noqa: E402
from tests.support.fuzz_bases import bases  # noqa: E402
from tests.support.fuzz_cases import KINDS, Tally, families, run_kind  # noqa: E402
from tests.support.fuzz_runner import FAILURES, OUTCOMES, CliWorker  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "fuzz_inputs.md"
CHUNK = 500  # cases a process runs in one worker before the next chunk
COLUMNS = {
    "ok": "ok (0/1/4)",
    "clean_error": "clean errors (2, one line)",
    "stopped": "stopped at the deadline",
    "exit_3": "exit 3",
    "nan": "NaN",
    "crash": "other crash",
    "hang": "hangs",
}


_WORKER: list[CliWorker] = []  # this pool process's one CliWorker, kept from chunk to chunk


def _chunk(task: tuple) -> tuple[str, int, dict, list, tuple, float, float]:
    """Pool process: cases ``start .. start + n`` of kind ``name`` in a folder of their own, run by
    this process's CliWorker (started once: it imports the command line, pandas and torch once, not
    once a chunk; it ends when the pool process does, its stdin closed). Returns the tally, wall
    seconds and CPU seconds (this process's and its worker's)."""
    name, start, n, seed = task
    if not _WORKER:
        _WORKER.append(CliWorker())
    worker = _WORKER[0]
    t0, cpu0, worker_cpu0 = time.perf_counter(), time.process_time(), worker.cpu_s
    with tempfile.TemporaryDirectory(prefix="fuzz-inputs-") as tmp:
        tally = run_kind(name, n, seed, bases(), worker, Path(tmp), start)
    cpu = time.process_time() - cpu0 + worker.cpu_s - worker_cpu0
    wall = time.perf_counter() - t0
    return name, n, dict(tally.rows), tally.failures, tally.slowest, wall, cpu


@dataclass
class Progress:
    """What has run so far: the tally, per kind ``[wall s, CPU s, cases]``, the kinds finished."""

    tally: Tally = field(default_factory=Tally)
    seconds: dict = field(default_factory=lambda: collections.defaultdict(lambda: [0.0, 0.0, 0]))
    done: list[str] = field(default_factory=list)


def fuzz_readers(
    kinds: list[str], cases: int, args: int, seed: int, jobs: int, report: Callable
) -> Progress:
    """Every kind's cases, cut into chunks of 500 run by ``jobs`` processes; ``report(progress)`` each
    time a kind has finished (its chunks' seconds added up)."""
    progress = Progress()
    tasks = [
        (name, start, min(CHUNK, n - start), seed)
        for name in kinds
        for n in [args if name == "args" else cases]
        for start in range(0, n, CHUNK)
    ]
    left = collections.Counter(task[0] for task in tasks)
    total = progress.tally
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for name, n, rows, failures, slowest, wall, cpu in pool.map(_chunk, tasks):
            for row, counts in rows.items():
                total.rows[row].update(counts)
            total.failures += failures
            total.failures.sort(key=lambda f: (f[0], f[1]))
            total.slowest = max(total.slowest, slowest)
            spent = progress.seconds[name]
            spent[0], spent[1], spent[2] = spent[0] + wall, spent[1] + cpu, spent[2] + n
            print(f"{name}: a chunk in {wall:.0f} s, {cpu:.0f} s CPU", file=sys.stderr, flush=True)
            left[name] -= 1
            if not left[name]:
                progress.done.append(name)
                report(progress)
    return progress


def fuzz_signals(trials: int, seed: int) -> tuple[collections.Counter, list, dict]:
    counts, failures, lengths = collections.Counter(), [], {}
    if not trials:
        return counts, failures, lengths
    with tempfile.TemporaryDirectory(prefix="fuzz-signals-") as tmp:
        for command in signal_trials.COMMANDS:
            lengths[command] = signal_trials.calibrate(command, Path(tmp) / f"calibrate-{command}")
        for k in range(trials):
            rnd = random.Random(seed * 1_000_003 + k)
            command = list(signal_trials.COMMANDS)[k % 2]
            signame = ("SIGINT", "SIGTERM")[(k // 2) % 2]
            delay = signal_trials.delay(rnd, lengths[command])
            outcome, why = signal_trials.trial(command, signame, delay, Path(tmp) / f"trial-{k}")
            counts[(command, signame, outcome)] += 1
            if outcome in signal_trials.FAILURES:
                failures.append((k, command, signame, delay, outcome, why))
    return counts, failures, lengths


def _cpu_s(children: bool) -> float:
    """CPU seconds of this process, or of its children waited for (the signal trials' commands)."""
    t = os.times()
    return t.children_user + t.children_system if children else t.user + t.system


def reader_table(tally: Tally) -> list[str]:
    lines = [
        "| kind: command | tried | " + " | ".join(COLUMNS.values()) + " |",
        "|---|---:|" + "---:|" * len(COLUMNS),
    ]
    for row in sorted(tally.rows):
        c = tally.rows[row]
        lines.append(
            f"| {row} | {sum(c.values())} | " + " | ".join(str(c[o]) for o in COLUMNS) + " |"
        )
    return lines


def signal_table(counts: collections.Counter) -> list[str]:
    lines = [
        "| command | signal | trials | " + " | ".join(signal_trials.OUTCOMES) + " |",
        "|---|---|---:|" + "---:|" * len(signal_trials.OUTCOMES),
    ]
    for command in signal_trials.COMMANDS:
        for signame in signal_trials.SIGNALS:
            row = [counts[(command, signame, o)] for o in signal_trials.OUTCOMES]
            lines.append(
                f"| {command} | {signame} | {sum(row)} | " + " | ".join(map(str, row)) + " |"
            )
    return lines


def family_lines(tally: Tally) -> list[str]:
    groups = families(tally.failures)
    lines = []
    for (kind, fam), found in sorted(groups.items(), key=lambda g: -len(g[1])):
        k, argv, why = found[0]
        cases = ", ".join(str(c[0]) for c in found[:30]) + (", ..." if len(found) > 30 else "")
        lines += [
            f"- **{kind}**, {len(found)} cases ({cases}): {why[:240]}",
            f"  first: case {k}: `{repro(argv)}`",
        ]
    return lines or ["none"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--cases", type=int, default=10_000, help="cases per reader kind (default 10000)"
    )
    ap.add_argument("--args", type=int, default=2_000, help="argument sets (default 2000)")
    ap.add_argument("--signals", type=int, default=50, help="signal trials (default 50)")
    ap.add_argument("--kinds", nargs="+", choices=list(KINDS), default=list(KINDS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--jobs", type=int, default=1, help="processes running chunks of cases (default 1)"
    )
    ap.add_argument("--results", type=Path, default=RESULTS, help=f"default {RESULTS}")
    ap.add_argument("--note", default="", help="a line for the results file")
    args = ap.parse_args()
    assert set(COLUMNS) == set(OUTCOMES)
    run = {"t0": time.perf_counter(), "load": os.getloadavg(), "args": args}
    # the signal trials first: short, and what a run stopped early would otherwise lack
    run["signals"] = fuzz_signals(args.signals, args.seed)
    run["signal_s"] = (time.perf_counter() - run["t0"], _cpu_s(children=True))
    write_results(run, Progress())
    progress = fuzz_readers(
        args.kinds, args.cases, args.args, args.seed, args.jobs, lambda p: write_results(run, p)
    )
    text = write_results(run, progress)
    print(text)
    failed = sum(progress.tally.rows[r][o] for r in progress.tally.rows for o in FAILURES)
    return 1 if failed or run["signals"][1] else 0


def write_results(run: dict, progress: Progress) -> str:
    """The results file as the run stands: complete once every kind has finished, else marked partial."""
    args, tally = run["args"], progress.tally
    counts, signal_failures, lengths = run["signals"]
    failed = sum(tally.rows[r][o] for r in tally.rows for o in FAILURES)
    wall = time.perf_counter() - run["t0"]
    # this process, the signal trials' commands, and the chunks (the pool processes and their workers)
    cpu = _cpu_s(children=False) + run["signal_s"][1] + sum(s[1] for s in progress.seconds.values())
    command = " ".join(["python benchmarks/fuzz_inputs.py", *sys.argv[1:]])
    state = (
        []
        if len(progress.done) == len(args.kinds)
        else [
            f"**Partial**: written while the run went on; {len(progress.done)} of {len(args.kinds)} "
            f"kinds finished ({', '.join(progress.done) or 'none'}); only they are counted below.",
            "",
        ]
    )
    text = "\n".join(
        [
            "# Fuzzed inputs and arguments, signalled runs (issues 27 and 35)",
            "",
            f"`{command}`: see the script's docstring for what each kind reads and the invariant.",
            "",
            *state,
            "## Readers and arguments",
            "",
            *reader_table(tally),
            "",
            f"Failures: {failed}. Families (first case of each):",
            "",
            *family_lines(tally),
            "",
            f"## Signals ({args.signals} trials; unsignalled length: "
            + ", ".join(f"{c} {s:.1f} s" for c, s in lengths.items())
            + ")",
            "",
            *signal_table(counts),
            "",
            "Signal failures: " + ("none" if not signal_failures else ""),
            *[
                f"- trial {k}: {cmd} {sig} at {d:.2f} s: {o}: {why}"
                for k, cmd, sig, d, o, why in signal_failures
            ],
            "",
            f"Time ({args.jobs} processes; per kind, its chunks' wall and CPU seconds added up, the "
            "CPU of the process that mutates the inputs, of the worker that runs them and of its children): "
            + ", ".join(
                f"{n} {w:.0f} s wall, {c:.0f} s CPU ({1000 * c / max(k, 1):.0f} ms CPU a case)"
                for n, (w, c, k) in progress.seconds.items()
            )
            + f"; signals {run['signal_s'][0]:.0f} s wall, {run['signal_s'][1]:.0f} s CPU; in all "
            f"{wall:.0f} s of wall time and {cpu:.0f} s of CPU on {platform.machine()} "
            f"({os.cpu_count()} cores), a machine shared with other jobs (load average "
            + "/".join(f"{x:.1f}" for x in run["load"])
            + " at the start, "
            + "/".join(f"{x:.1f}" for x in os.getloadavg())
            + " at this writing): the times are not benchmarks.",
            f"Slowest case: {tally.slowest[0]:.1f} s ({tally.slowest[1]} {tally.slowest[2]}).",
            *(["", args.note] if args.note else []),
            "",
        ]
    )
    tmp = args.results.with_name(args.results.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(args.results)
    return text


if __name__ == "__main__":
    sys.exit(main())
