"""How many stack samples land in the tail of a planted waits profile, run after run.

    python scripts/planted_samples.py SPINNING 300 --closed-loop [--runs 6]
    python scripts/planted_samples.py LOCKED 400 --closed-loop

NAME is one of the planted pipelines of ``tests/cli/test_profile_waits.py`` (LOCKED, SPINNING,
CYCLIC, QUADRATIC); REQUESTS and the options after it are ``profile``'s. Each run profiles the
pipeline in its own process, as the test does, and prints its wall time, the measured requests'
span (and LOCKED's holder cycles), the waits' sample counts (slowest 1 % / 5 % / median), the
slowest 5 %'s classes (mean ms per request) and the audit's findings: the figures that size a
test's request count, so that whether the tail was sampled at all is not luck.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cli import test_profile_waits as planted  # noqa: E402
from workbench.cli import main  # noqa: E402


def one_run(source: str, requests: int, options: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        try:
            shown, out = planted.profile_planted(Path(tmp), source, requests, tuple(options))
        except AssertionError as exc:  # the profile's exit status and stderr
            return f"profile failed: {str(exc)[-500:]}"
        wall_s = time.perf_counter() - t0
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            main(["audit", str(out), "--json"])
        runs = json.loads(said.getvalue())["runs"]
        span = planted._held(Path(tmp))  # the requests' span (and LOCKED's holder cycles)
    findings = [(f["kind"], f["stage"]) for f in runs[0]["findings"]]
    waits = shown["waits"]
    classes = {k: round(v, 2) for k, v in waits["classes"]["slowest_5pct"].items()}
    return (
        f"{wall_s:.1f} s  {span}  samples {waits['samples']}  slowest 5 %: {classes}  "
        f"findings {findings}"
    )


def main_(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=("LOCKED", "SPINNING", "CYCLIC", "QUADRATIC"))
    parser.add_argument("requests", type=int)
    parser.add_argument("--runs", type=int, default=6)
    args, options = parser.parse_known_args(argv)
    for _ in range(args.runs):
        print(one_run(getattr(planted, args.name), args.requests, options), flush=True)


if __name__ == "__main__":
    main_()
