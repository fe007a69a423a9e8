"""Fuzz cases of every reader and every argument, run through the command line and tallied (issue 35).

A *kind* makes case ``k`` of a seed: one mutated input (or argument set) in its own folder and the
commands that read it. :func:`run_kind` runs them in a :class:`~tests.support.fuzz_runner.CliWorker`
(bounded time), judges each (:func:`~tests.support.fuzz_runner.judge`) and counts outcomes per
command; :func:`families` groups the failures. ``tests/fuzz`` runs a few seeds of each kind,
``benchmarks/fuzz_inputs.py`` thousands.
"""

from __future__ import annotations

import collections
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import arg_fuzz
from tests.support.fuzz_bases import SERVICE_PATHS, Bases, copy_run, mutated_arrivals
from tests.support.fuzz_bases import mutated_json_file, mutated_payloads
from tests.support.fuzz_runner import FAILURES, REPO, CliWorker, family, judge
from tests.support.input_fuzz import mutate_run_folder, mutate_sweep_folder, mutated_otlp
from tests.support.input_fuzz import sweep_folder

TRACE = str(REPO / "data" / "traces" / "hta_critical_path_simple_add.json.gz")
DEADLINE_S = 60.0  # a case past it gets SIGTERM (run_until_stopped ones: STOP_AFTER_S)
STOP_AFTER_S = 3.0


@dataclass(frozen=True)
class Case:
    argv: list[str]
    stop_ok: bool = False  # runs until stopped (serve, locust-worker)


@dataclass
class Tally:
    """Outcomes per row (a kind and the command that read it) and every failure, with its case."""

    rows: dict[str, collections.Counter] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter)
    )
    failures: list[tuple[str, int, list[str], str, str]] = field(default_factory=list)
    slowest: tuple[float, str, int] = (0.0, "", -1)


def run_kind(
    name: str, n: int, seed: int, bases: Bases, worker: CliWorker, work: Path, start: int = 0
) -> Tally:
    """Cases ``start .. start + n`` of kind ``name`` (a key of :data:`KINDS`), each judged and counted."""
    tally, make = Tally(), KINDS[name]
    for k in range(start, start + n):
        folder = work / f"{name}-{k}"
        folder.mkdir(parents=True)
        for case in make(k, random.Random(seed * 1_000_003 + k), bases, folder):
            deadline = STOP_AFTER_S if case.stop_ok else DEADLINE_S
            result = worker.run(case.argv, folder, deadline)
            outcome, why = judge(result, case.argv, stop_ok=case.stop_ok)
            tally.rows[f"{name}: {_command(case.argv)}"][outcome] += 1
            if outcome in FAILURES:
                tally.failures.append((name, k, case.argv, outcome, why))
            tally.slowest = max(tally.slowest, (result.seconds, name, k))
        shutil.rmtree(folder, ignore_errors=True)
    return tally


def _command(argv: list[str]) -> str:
    return " ".join([argv[0], *(a for a in argv[1:] if a in ("--json", "--stages", "--url"))])


def families(failures) -> dict[tuple[str, str], list]:
    """Failures grouped by kind, outcome and :func:`~tests.support.fuzz_runner.family`; each group's cases."""
    out = collections.defaultdict(list)
    for name, k, argv, outcome, why in failures:
        out[(name, f"{outcome}: {family(why)}")].append((k, argv, why))
    return out


# -- the kinds ------------------------------------------------------------------------------------------------


def _file(folder: Path, name: str, data: bytes) -> str:
    (folder / name).write_bytes(data)
    return str(folder / name)


def run_folder_cases(kind: str, every: int = 10) -> Callable:
    """A run folder of ``kind`` (:data:`~tests.support.fuzz_bases.RUN_KINDS`) mutated; read by ``show
    --json``, and every ``every``-th case also by ``audit --json``, ``compare BASE RUN --json`` and
    ``gate BASE RUN``."""

    def make(k, rnd, bases, folder):
        base = bases.runs[kind]
        root = copy_run(base, folder / "run")
        mutate_run_folder(root, rnd)
        cases = [Case(["show", "--json", str(root)])]
        if k % every == 0:
            cases += [
                Case(["audit", "--json", str(root)]),
                Case(["compare", str(base), str(root), "--json"]),
                Case(["gate", str(base), str(root)]),
            ]
        return cases

    return make


def compare_file_cases(k, rnd, bases, folder):
    path = _file(folder, "compare.json", mutated_json_file(bases.compare_file.read_bytes(), rnd))
    return [Case(["gate", path]), Case(["gate", path, "--stages"])]


def arrivals_cases(k, rnd, bases, folder):
    path = _file(folder, "arrivals.csv", mutated_arrivals(bases.arrivals.read_bytes(), rnd))
    cases = [Case(["simulate", "--service", *SERVICE_PATHS, "--arrivals", path, "--json"])]
    if k % 10 == 0:
        cases.append(
            Case(
                ["load", "--example", "tabular", "--arrivals", path, "--requests", "20"]
                + ["--out", str(folder / "out"), "--json"]
            )  # fmt: skip
        )
    return cases


def payload_cases(k, rnd, bases, folder):
    path = _file(folder, "payloads.txt", mutated_payloads(bases.payloads.read_bytes(), rnd))
    return [
        Case(
            ["load", "--url", "http://127.0.0.1:1", "--payloads", path, "--rate", "50"]
            + ["--requests", "5", "--json"]
        )  # fmt: skip
    ]


def otlp_cases(k, rnd, bases, folder):
    path = _file(folder, "spans.jsonl", mutated_otlp(bases.otlp.read_text(), rnd))
    return [
        Case(
            ["ingest-otel", path, "--out", str(folder / "out"), "--json"]
            + ["--stage-map", "db.query=db", "auth=auth"]
        )  # fmt: skip
    ]


def sweep_cases(k, rnd, bases, folder):
    root = sweep_folder(folder / "sweep", with_runs=k % 10 == 0)
    base = sweep_folder(folder / "base")
    mutate_sweep_folder(root, rnd)
    cases = [Case(["show", "--json", str(root)]), Case(["compare", str(base), str(root), "--json"])]
    return cases + ([Case(["audit", "--json", str(root)])] if k % 10 == 0 else [])


def trace_cases(k, rnd, bases, folder):
    from tests.support.fuzz import default_bases, variant

    global _TRACE_BASES
    _TRACE_BASES = _TRACE_BASES or default_bases()
    path = variant(_TRACE_BASES, k, rnd.randrange(2**31)).write(folder)
    return [Case(["analyze", str(path), "--json"])]


_TRACE_BASES = None
_ARGUMENTS: dict = {}


def argument_cases(k, rnd, bases, folder):
    if not _ARGUMENTS:
        _ARGUMENTS.update(arg_fuzz.arguments())
    base = arg_fuzz.BASES[k % len(arg_fuzz.BASES)]
    arg_fuzz.prepare_case(folder / "case", bases)
    filled = arg_fuzz.fill(base, bases, folder / "case", TRACE)
    argv = arg_fuzz.fuzzed_argv(filled, _ARGUMENTS[base[0]], rnd, folder / "case")
    return [Case(argv, stop_ok=base[0] in arg_fuzz.RUNS_UNTIL_STOPPED)]


KINDS: dict[str, Callable] = {
    **{
        f"run.{kind}": run_folder_cases(kind)
        for kind in ("profile", "load", "simulation", "served", "served_server", "ingested")
    },  # fmt: skip
    "compare_file": compare_file_cases,
    "arrivals": arrivals_cases,
    "payloads": payload_cases,
    "otlp": otlp_cases,
    "sweep": sweep_cases,
    "trace": trace_cases,
    "args": argument_cases,
}
