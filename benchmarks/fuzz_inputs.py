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
its first case as a command) and the times; exits 1 when anything failed.

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
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a plain script from a checkout
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

from tests.support import signal_trials  # noqa: E402
from tests.support.arg_fuzz import repro  # noqa: E402
from tests.support.fuzz_bases import bases  # noqa: E402
from tests.support.fuzz_cases import KINDS, Tally, families, run_kind  # noqa: E402
from tests.support.fuzz_runner import OUTCOMES, CliWorker  # noqa: E402

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


def _chunk(task: tuple) -> tuple[str, dict, list, tuple, float]:
    """Worker: cases ``start .. start + n`` of kind ``name``, in its own CliWorker and folder."""
    name, start, n, seed = task
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fuzz-inputs-") as tmp, CliWorker() as worker:
        tally = run_kind(name, n, seed, bases(), worker, Path(tmp), start)
    return name, dict(tally.rows), tally.failures, tally.slowest, time.perf_counter() - t0


def fuzz_readers(
    kinds: list[str], cases: int, args: int, seed: int, jobs: int
) -> tuple[Tally, dict]:
    """Every kind's cases, cut into chunks of 500 run by ``jobs`` processes; seconds are summed per kind."""
    total, seconds = Tally(), collections.defaultdict(lambda: [0.0, 0])
    tasks = [
        (name, start, min(CHUNK, n - start), seed)
        for name in kinds
        for n in [args if name == "args" else cases]
        for start in range(0, n, CHUNK)
    ]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for name, rows, failures, slowest, spent in pool.map(_chunk, tasks):
            for row, counts in rows.items():
                total.rows[row].update(counts)
            total.failures += failures
            total.slowest = max(total.slowest, slowest)
            seconds[name][0] += spent
            print(f"{name}: a chunk in {spent:.0f} s", file=sys.stderr, flush=True)
    for name in kinds:
        seconds[name][1] = args if name == "args" else cases
    total.failures.sort(key=lambda f: (f[0], f[1]))
    return total, {name: tuple(v) for name, v in seconds.items()}


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
    t0 = time.perf_counter()
    tally, seconds = fuzz_readers(args.kinds, args.cases, args.args, args.seed, args.jobs)
    t1 = time.perf_counter()
    signals, signal_failures, lengths = fuzz_signals(args.signals, args.seed)
    t2 = time.perf_counter()
    failed = sum(c[o] for c in tally.rows.values() for o in ("exit_3", "nan", "crash", "hang"))
    command = " ".join(["python benchmarks/fuzz_inputs.py", *sys.argv[1:]])
    text = "\n".join(
        [
            "# Fuzzed inputs and arguments, signalled runs (issues 27 and 35)",
            "",
            f"`{command}`: see the script's docstring for what each kind reads and the invariant.",
            "",
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
            *signal_table(signals),
            "",
            "Signal failures: " + ("none" if not signal_failures else ""),
            *[
                f"- trial {k}: {cmd} {sig} at {d:.2f} s: {o}: {why}"
                for k, cmd, sig, d, o, why in signal_failures
            ],
            "",
            f"Time ({args.jobs} processes; per kind, the seconds of its chunks added up): "
            + ", ".join(
                f"{n} {s:.0f} s ({1000 * s / max(c, 1):.0f} ms a case)"
                for n, (s, c) in seconds.items()
            )
            + f"; signals {t2 - t1:.0f} s; in all {t2 - t0:.0f} s of wall time on {platform.machine()} "
            f"({os.cpu_count()} cores), a machine shared with other jobs: the times are not benchmarks.",
            f"Slowest case: {tally.slowest[0]:.1f} s ({tally.slowest[1]} {tally.slowest[2]}).",
            *(["", args.note] if args.note else []),
            "",
        ]
    )
    args.results.write_text(text)
    print(text)
    return 1 if failed or signal_failures else 0


if __name__ == "__main__":
    sys.exit(main())
