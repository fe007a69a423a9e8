"""Argument sets for every subcommand, made from argparse's own definitions (issue 35).

Each subcommand has a short base command that succeeds in a second or two (:data:`BASES`, with
``{placeholders}`` for the fuzz bases and the case's own folder). A case takes one base and changes
one to three of the subcommand's arguments, any the parser defines (:func:`arguments`, read from
``workbench.cli.build_parser``): a value replaced by an odd one of its kind (numbers: NaN, inf,
1e400, 5e-324, negatives, huge integers; strings: empty, 300 characters, a NUL, a lone surrogate;
paths: missing, 300-character, NUL-containing, an existing file where a folder is expected and the
reverse), an option added that the base lacks, or one dropped. Every path is inside the case's
folder: the fuzzer never names a file outside it, as a reader or as an output.
"""

from __future__ import annotations

import argparse
import random
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.support.fuzz_bases import SERVICE_PATHS, Bases

# base commands: quick, valid, one or more per subcommand (placeholders filled by :func:`fill`)
BASES: list[list[str]] = [
    ["profile", "--closed-loop", "--example", "tabular", "--requests", "8", "--warmup", "1"]
    + ["--traced", "0", "--no-sample-stacks", "--out", "{case}/out", "--json"],
    ["show", "{run}", "--json"],
    ["analyze", "{trace}", "--json"],
    ["load", "--example", "tabular", "--rate", "400", "--requests", "20", "--out", "{case}/out"]
    + ["--json"],
    ["load", "--url", "http://127.0.0.1:1", "--payloads", "{payloads}", "--rate", "50"]
    + ["--requests", "5", "--json"],
    ["simulate", "--service", *SERVICE_PATHS, "--rate", "200", "--requests", "200", "--json"],
    ["audit", "{run}", "--json"],
    ["serve", "--example", "tabular", "--port", "0", "--out", "{case}/out"],
    ["ingest-otel", "{otlp}", "--out", "{case}/out", "--json"],
    ["compare", "{run}", "{run2}", "--json"],
    ["compare", "--example", "tabular", "--threads", "1", "--config", "precision=fp32"]
    + ["--config", "batch_size=2", "--requests", "20", "--warmup", "2", "--json"],
    ["gate", "{compare_file}"],
    ["export-dashboard", "--out", "{case}/out", "--runs", "{runs}"],
    ["locust-worker", "--master", "127.0.0.1", "--master-port", "1"],
]
RUNS_UNTIL_STOPPED = ("serve", "locust-worker")  # their normal end is a signal

ODD_NUMBERS = [
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400", "-1e400", "5e-324", "-5e-324", "0",
    "-0", "-1", "-7", "1e-9", "2147483648", "18446744073709551616", "9" * 400, "-" + "9" * 40,
    "0x10", "1_000", " 7", "+3", "1e3", "", "²", "٣", "3.5", "4.0",
]  # fmt: skip
ODD_STRINGS = [
    "", " ", "x" * 300, "a\x00b", "é", "-", "--", "-x", "%s%d%%", "{}", "[", "\n", "☃" * 50,
    "\ud800", "k=", "=v", "precision=nan", "batch_size=1e400", "threads=-1", "a=1,,b", "http://",
    "http://[::1", "ftp://127.0.0.1:1", "127.0.0.1:99999",
]  # fmt: skip
# relative to the case's folder, which holds file.txt, dir/, run/ (a copy of a run folder)
ODD_PATHS = [
    "missing/x", "p" * 300, "a\x00b", "file.txt", "dir", "run", "file.txt/sub", "", ".", "dir/../run",
    "\ud800", "file.txt:build", "run/run.json", "run/requests.parquet",
]  # fmt: skip
PATH_DESTS = {"out", "run_dir", "trace", "inputs", "runs", "service", "payloads", "figure", "file"}


@dataclass(frozen=True)
class Argument:
    """One argparse argument of a subcommand, as the fuzzer sees it."""

    command: str
    flag: str | None  # "--rate"; None for a positional
    dest: str
    kind: str  # "flag" (takes no value), "number", "path", "choice", "string"
    nargs: object


def arguments(parser: argparse.ArgumentParser | None = None) -> dict[str, list[Argument]]:
    """Every subcommand's arguments (help left out), from the parser ``python -m workbench`` builds."""
    from workbench.cli import build_parser

    parser = parser or build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for command, p in sub.choices.items():
        out[command] = [
            Argument(command, _flag(a), a.dest, _kind(a), a.nargs)
            for a in p._actions
            if not isinstance(a, argparse._HelpAction)
        ]
    return out


def _flag(action: argparse.Action) -> str | None:
    longs = [s for s in action.option_strings if s.startswith("--")]
    return longs[0] if longs else (action.option_strings[0] if action.option_strings else None)


def _kind(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"
    if action.choices:
        return "choice"
    name = getattr(
        getattr(action.type, "func", action.type), "__qualname__", ""
    )  # a partial: its function
    ranged = hasattr(action.type, "range_text")  # workbench.cli.output.ranged's types
    if action.type in (int, float) or ranged or "number" in name or "threshold" in name:
        return "number"
    if action.type is Path or action.dest in PATH_DESTS:
        return "path"
    return "string"


def odd_value(arg: Argument, rnd: random.Random, case: Path) -> str:
    """An odd value for ``arg``: any kind's now and then, mostly its own kind's."""
    kind = arg.kind if rnd.random() < 0.8 else rnd.choice(("number", "string", "path"))
    if kind == "number":
        return rnd.choice(ODD_NUMBERS)
    if kind == "path":
        return str(case / rnd.choice(ODD_PATHS))
    return rnd.choice(ODD_STRINGS)


def fuzzed_argv(base: list[str], args: list[Argument], rnd: random.Random, case: Path) -> list[str]:
    """``base`` with one to three of ``args`` changed (see the module docstring)."""
    argv = list(base)
    for _ in range(rnd.randint(1, 3)):
        arg = rnd.choice(args)
        positions = [i for i, a in enumerate(argv) if a == arg.flag]
        op = rnd.random()
        if arg.flag is None:  # a positional: replace the first token that is not an option
            slots = [i for i, a in enumerate(argv[1:], 1) if not a.startswith("-")]
            slots = [i for i in slots if not argv[i - 1].startswith("--")]
            if slots:
                argv[rnd.choice(slots)] = odd_value(arg, rnd, case)
        elif positions and op < 0.15:  # dropped, with its value
            i = positions[0]
            del argv[i : i + (1 if arg.kind == "flag" else 2)]
        elif positions and arg.kind != "flag" and positions[0] + 1 < len(argv):
            argv[positions[0] + 1] = odd_value(arg, rnd, case)
        elif arg.kind == "flag":
            argv.append(arg.flag)
        else:
            argv += [arg.flag, odd_value(arg, rnd, case)]
    return argv


def prepare_case(case: Path, bases: Bases) -> None:
    """The case folder's odd files: a text file, an empty folder, a copy of a run (paths of ODD_PATHS)."""
    case.mkdir(parents=True)
    (case / "file.txt").write_text("not python (\n")
    (case / "dir").mkdir()
    shutil.copytree(bases.runs["profile"], case / "run")


def fill(argv: list[str], bases: Bases, case: Path, trace: str) -> list[str]:
    """The placeholders of a base command filled in."""
    values = {
        "{case}": str(case),
        "{run}": str(bases.runs["profile"]),
        "{run2}": str(bases.runs["load"]),
        "{trace}": trace,
        "{payloads}": str(bases.payloads),
        "{otlp}": str(bases.otlp),
        "{compare_file}": str(bases.compare_file),
        "{runs}": str(bases.folder),  # a folder of run folders (and other files)
    }
    return [_fill(a, values) for a in argv]


def _fill(arg: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        arg = arg.replace(key, value)
    return arg


def repro(argv: list[str]) -> str:
    """A shell line for ``argv`` (a NUL or a lone surrogate cannot be in one: said instead)."""
    text = " ".join(shlex.quote(a) for a in argv)
    if any("\x00" in a or "\ud800" in a for a in argv):
        return f"python -c 'from workbench.cli import main; main({argv!r})'"
    return f"python -m workbench {text}"
