"""Fuzz the boundary decoders (issue 27): mutated OTLP/JSON exports, run folders and sweep folders.

The mutators are :mod:`tests.support.input_fuzz` (the same the property tests use,
here driven by seeded ``random.Random`` so a count is reproducible). Each OTLP
document goes through ``ingest-otel --json``; each run folder through
``show --json`` and every ``--audit-every``-th also through ``audit --json``; each
sweep folder (``sweep.json`` of ``tests/support/sweeps``) through ``show --json`` and
``compare BASE SWEEP --json``, every ``--audit-every``-th (with its point runs) through
``audit --json``; all in process through ``workbench.cli.main``. The invariant: exit 0 (or 1, a measured
failure) with strict JSON, or exit 2 with one line; never 3, never a traceback.

Prints and writes ``benchmarks/results/fuzz_inputs.md`` (tried, ok, clean errors,
crashes per kind, the first crashes' seeds and reasons); exits 1 if anything crashed.

    python benchmarks/fuzz_inputs.py [--otlp 10000] [--runs 10000] [--sweeps 10000] [--audit-every 10] [--seed 0]
        [--results FILE]
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a plain script from a checkout
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

from tests.otel.test_ingest import go_export  # noqa: E402
from tests.support.input_fuzz import (  # noqa: E402
    OUTCOMES,
    judge,
    mutate_run_folder,
    mutate_sweep_folder,
    mutated_otlp,
    run_cli,
    sweep_folder,
)
from tests.support.input_fuzz import BASE_RUN  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "fuzz_inputs.md"


def fuzz_otlp(n: int, seed: int, work: Path) -> tuple[collections.Counter, list]:
    base, counts, crashes = go_export(), collections.Counter(), []
    for k in range(n):
        rnd = random.Random(seed * 1_000_003 + k)
        path = work / "spans.jsonl"
        try:
            path.write_bytes(mutated_otlp(base, rnd))
        except Exception as exc:  # noqa: BLE001 - a bug of the mutator, not of the workbench: counted apart
            counts["mutator_error"] += 1
            crashes.append((k, f"mutator: {type(exc).__name__}: {exc}"))
            continue
        out_dir = work / f"run-{k}"
        outcome, why = judge(
            *run_cli(
                [
                    "ingest-otel",
                    str(path),
                    "--out",
                    str(out_dir),
                    "--json",
                    "--stage-map",
                    "db.query=db",
                    "auth=auth",
                ]
            )
        )
        shutil.rmtree(out_dir, ignore_errors=True)
        counts[outcome] += 1
        if outcome == "crash":
            crashes.append((k, why))
    return counts, crashes


def fuzz_runs(n: int, seed: int, work: Path, audit_every: int) -> tuple[dict, list]:
    counts = {"show": collections.Counter(), "audit": collections.Counter()}
    crashes = []
    for k in range(n):
        rnd = random.Random(seed * 1_000_003 + k)
        folder = work / f"case-{k}"
        root = Path(shutil.copytree(BASE_RUN, folder / "run"))
        try:
            mutate_run_folder(root, rnd)
        except Exception as exc:  # noqa: BLE001 - a bug of the mutator, not of the workbench: counted apart
            counts["show"]["mutator_error"] += 1
            crashes.append((k, f"mutator: {type(exc).__name__}: {exc}"))
            shutil.rmtree(folder, ignore_errors=True)
            continue
        commands = [("show", ["show", "--json"])] + (
            [("audit", ["audit", "--json"])] if k % audit_every == 0 else []
        )
        for name, argv in commands:
            outcome, why = judge(*run_cli([*argv, str(root)]))
            counts[name][outcome] += 1
            if outcome == "crash":
                crashes.append((k, f"{name}: {why}"))
        shutil.rmtree(folder, ignore_errors=True)
    return counts, crashes


def fuzz_sweeps(n: int, seed: int, work: Path, audit_every: int) -> tuple[dict, list]:
    counts = {
        "show": collections.Counter(),
        "compare": collections.Counter(),
        "audit": collections.Counter(),
    }
    crashes = []
    base = sweep_folder(work / "base-sweep") if n else None
    for k in range(n):
        rnd = random.Random(seed * 1_000_003 + k)
        folder = work / f"sweep-case-{k}"
        root = sweep_folder(folder / "sweep", with_runs=k % audit_every == 0)
        try:
            mutate_sweep_folder(root, rnd)
        except Exception as exc:  # noqa: BLE001 - a bug of the mutator, not of the workbench: counted apart
            counts["show"]["mutator_error"] += 1
            crashes.append((k, f"mutator: {type(exc).__name__}: {exc}"))
            shutil.rmtree(folder, ignore_errors=True)
            continue
        commands = [
            ("show", ["show", "--json", str(root)]),
            ("compare", ["compare", str(base), str(root), "--json"]),
        ]
        if k % audit_every == 0:
            commands.append(("audit", ["audit", "--json", str(root)]))
        for name, argv in commands:
            outcome, why = judge(*run_cli(argv))
            counts[name][outcome] += 1
            if outcome == "crash":
                crashes.append((k, f"sweep {name}: {why}"))
        shutil.rmtree(folder, ignore_errors=True)
    return counts, crashes


def table(rows: list[tuple[str, collections.Counter]]) -> str:
    lines = [
        "| kind | tried | ok (exit 0/1, strict JSON) | clean errors (exit 2, one line) | crashes | mutator errors |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, c in rows:
        lines.append(
            f"| {name} | {sum(c.values())} | {c['ok']} | {c['clean_error']} | {c['crash']} "
            f"| {c['mutator_error']} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--otlp", type=int, default=10_000, help="mutated OTLP/JSON documents (default 10000)"
    )
    ap.add_argument("--runs", type=int, default=10_000, help="mutated run folders (default 10000)")
    ap.add_argument(
        "--sweeps", type=int, default=10_000, help="mutated sweep folders (default 10000)"
    )
    ap.add_argument(
        "--audit-every",
        type=int,
        default=10,
        help="every N-th run or sweep folder also through audit --json",
    )
    ap.add_argument(
        "--results", type=Path, default=RESULTS, help=f"where the table goes (default {RESULTS})"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--note", default="", help="a line for the results file (e.g. why fewer than 10,000 ran)"
    )
    args = ap.parse_args()
    assert set(OUTCOMES) == {"ok", "clean_error", "crash"}
    with tempfile.TemporaryDirectory(prefix="fuzz-inputs-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        otlp, otlp_crashes = fuzz_otlp(args.otlp, args.seed, work)
        t1 = time.perf_counter()
        runs, run_crashes = fuzz_runs(args.runs, args.seed, work, args.audit_every)
        t2 = time.perf_counter()
        sweeps, sweep_crashes = fuzz_sweeps(args.sweeps, args.seed, work, args.audit_every)
        t3 = time.perf_counter()
    rows = [
        ("OTLP/JSON -> ingest-otel --json", otlp),
        ("run folder -> show --json", runs["show"]),
        (f"run folder -> audit --json (every {args.audit_every}th)", runs["audit"]),
        ("sweep folder -> show --json", sweeps["show"]),
        ("sweep folder -> compare BASE SWEEP --json", sweeps["compare"]),
        (
            f"sweep folder -> audit --json (every {args.audit_every}th, with point runs)",
            sweeps["audit"],
        ),
    ]
    rows = [(name, c) for name, c in rows if sum(c.values())]
    crashes = otlp_crashes + run_crashes + sweep_crashes
    text = "\n".join(
        [
            "# Fuzzed inputs: OTLP/JSON exports, run folders and sweep folders (issue 27)",
            "",
            f"`python benchmarks/fuzz_inputs.py --otlp {args.otlp} --runs {args.runs} --sweeps {args.sweeps} "
            f"--audit-every {args.audit_every} --seed {args.seed}`: the mutators of `tests/support/input_fuzz.py` "
            "(the property tests' own) on the Go checkout export of `tests/otel/test_ingest.py`, on "
            "`data/runs/tabular-cpu-bs4-fp32` and on the served sweep `tests/support/sweeps/sweep.json`, each through "
            "the command line in process. Invariant: exit 0/1 with strict JSON, or exit 2 with one line; never 3, "
            "never a traceback.",
            "",
            table(rows),
            "",
            f"Time: OTLP {t1 - t0:.0f} s ({1000 * (t1 - t0) / max(args.otlp, 1):.1f} ms each), run folders "
            f"{t2 - t1:.0f} s ({1000 * (t2 - t1) / max(args.runs, 1):.1f} ms each), sweep folders {t3 - t2:.0f} s "
            f"({1000 * (t3 - t2) / max(args.sweeps, 1):.1f} ms each), on {platform.machine()} "
            f"({os.cpu_count()} cores), a BUSY machine shared with other jobs: the times are not benchmarks.",
            *(["", args.note] if args.note else []),
            "",
            "Crashes (first 20): " + ("none" if not crashes else ""),
            *[f"- case {k}: {why}" for k, why in crashes[:20]],
            "",
        ]
    )
    args.results.write_text(text)
    print(text)
    return 1 if any(c["crash"] for _, c in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
