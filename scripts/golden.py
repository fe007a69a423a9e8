"""Freeze (or check) the golden ``show --json`` and ``analyze --json`` outputs.

``python scripts/golden.py`` writes, from the repository root:

* ``tests/golden/show/<run>.json`` for every run folder in ``data/runs``
* ``tests/golden/analyze/<trace>.json`` for every trace in ``data/traces`` and
  ``../shared/traces`` (when that folder is there)

Each file is what the command line prints, parsed and re-dumped sorted. The
outputs come from the real command line entry point in-process
(``workbench.cli.main``), run with the repository root as the working folder
so trace paths in the reports are the same relative paths every time.
``tests/golden/test_golden.py`` compares today's outputs with these files.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden"
TRACE_GLOBS = ("*.json.gz", "*.json")


def run_dirs() -> list[Path]:
    """Run folders in data/runs, relative to the repository root."""
    return sorted(
        p.relative_to(REPO)
        for p in (REPO / "data" / "runs").iterdir()
        if (p / "run.json").is_file()
    )


def traces() -> list[Path]:
    """Traces in data/traces and ../shared/traces, as paths relative to the repository root."""
    found = []
    for folder, rel in (
        (REPO / "data" / "traces", Path("data/traces")),
        (REPO.parent / "shared" / "traces", Path("../shared/traces")),
    ):
        if folder.is_dir():
            found += [
                rel / p.name
                for glob in TRACE_GLOBS
                for p in sorted(folder.glob(glob))
                if p.name != "REFERENCE.json"
            ]
    return found


def cli_json(argv: list[str]) -> dict:
    """The parsed stdout of ``python -m workbench *argv`` (run in-process from the repository root)."""
    from workbench.cli import main

    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        with contextlib.redirect_stdout(out):
            rc = main(argv)
    finally:
        os.chdir(cwd)
    if rc != 0:
        raise RuntimeError(f"workbench {' '.join(argv)} exited {rc}")
    return json.loads(out.getvalue())


def golden_name(path: Path) -> str:
    """The golden file name for a run folder or trace: its name with .json.gz/.json dropped, plus .json."""
    name = path.name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    prefix = "shared-" if path.parts[0] == ".." else ""
    return f"{prefix}{name}.json"


def cases() -> list[tuple[str, list[str], Path]]:
    """(id, argv, golden file) for every output frozen."""
    out = [
        (f"show/{r.name}", ["show", str(r), "--json"], GOLDEN / "show" / golden_name(r))
        for r in run_dirs()
    ]
    out += [
        (
            f"analyze/{golden_name(t)}",
            ["analyze", str(t), "--json"],
            GOLDEN / "analyze" / golden_name(t),
        )
        for t in traces()
    ]
    return out


def main() -> int:
    for case_id, argv, dest in cases():
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(cli_json(argv), indent=1, sort_keys=True) + "\n")
        print(f"wrote {dest.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
