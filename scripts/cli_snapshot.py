"""Capture the command line's observable output, to show a refactor changed none of it.

    python scripts/cli_snapshot.py DIR      # from the repository root; then `diff -r OLD_DIR DIR`

One file per command: its exit code, stdout and stderr. Captured: ``--help`` of the top level and every
subcommand; ``analyze`` (text and ``--json``) of every trace in ``data/traces`` and ``../shared/traces``
(when that folder is there); ``show`` (text and ``--json``) of every run folder in ``data/runs``. The
commands run in-process through ``workbench.cli.main`` with relative paths, so two captures of the same
code are byte-identical.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from golden import run_dirs, traces  # noqa: E402  (the golden files' list of runs and traces)


def run(out: Path, name: str, argv: list[str]) -> None:
    """``workbench argv`` in this process, its exit code and output written to ``out / name``."""
    from workbench.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's --help and usage errors
            code = exc.code
    text = f"exit {code}\n--- stdout\n{stdout.getvalue()}\n--- stderr\n{stderr.getvalue()}"
    (out / name).write_text(text)


def capture(out: Path) -> int:
    """Write every capture into ``out``; the number of files written."""
    import argparse

    from workbench.cli import build_parser

    out.mkdir(parents=True, exist_ok=True)
    (subparsers,) = (
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    commands = [["--help"]] + [[name, "--help"] for name in subparsers.choices]
    for argv in commands:
        run(out, "help" if argv == ["--help"] else f"help_{argv[0]}", argv)
    found, runs = traces(), run_dirs()  # paths relative to the repository root
    for trace in found:
        name = f"analyze_{trace.parent.parent.name}_{trace.name}"  # data/ or shared/
        run(out, name + ".txt", ["analyze", str(trace)])
        run(out, name + ".json", ["analyze", str(trace), "--json"])
    for folder in runs:
        run(out, f"show_{folder.name}.txt", ["show", str(folder)])
        run(out, f"show_{folder.name}.json", ["show", str(folder), "--json"])
    return len(commands) + 2 * len(found) + 2 * len(runs)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/cli_snapshot.py DIR")
    os.chdir(REPO)
    print(f"{capture(Path(sys.argv[1]).resolve())} files written")
