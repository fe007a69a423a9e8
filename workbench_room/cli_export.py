"""``workbench export-dashboard --out DIR [--runs DIR]``: a static dashboard of recorded runs (no kernel, no server)."""

from __future__ import annotations

import sys
from pathlib import Path

from workbench.cli.output import check_out
from workbench.errors import ConfigError

from .static import export_dashboard

DEFAULT_RUNS = Path("data") / "runs"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export-dashboard",
        help="write a static, offline dashboard of recorded runs",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--out", type=Path, required=True, help="folder to write index.html into")
    p.add_argument(
        "--runs",
        type=Path,
        default=DEFAULT_RUNS,
        help="folder of recorded run folders (default data/runs)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    if not args.runs.is_dir():
        raise ConfigError(f"--runs {str(args.runs)!r}: not a folder of run folders")
    check_out(args.out / "index.html", folder=False)  # --out a file: refused before the figures

    def progress(i, n, name):
        print(f"\r{i}/{n} {name:<40}", end="", file=sys.stderr, flush=True)

    path = export_dashboard(args.out, args.runs, progress=progress if sys.stderr.isatty() else None)
    size_mb = path.stat().st_size / 1e6
    print(
        f"static dashboard written to {path} ({size_mb:.1f} MB); open it in a browser, no server needed"
    )
    return 0
