"""Ctrl-C during start-up: how often ``python -m workbench`` exits 130 quietly (issue 27).

Starts ``python -m workbench show RUN`` N times and sends SIGINT (as a terminal's Ctrl-C does)
after a delay spread evenly over ``--max-delay-ms``; prints, per delay, the exit code and whether
Python printed a traceback. A signal that lands while the interpreter itself starts or finalizes
(before or after any line of ``workbench`` runs) ends it by SIGINT (-2; a shell shows 130).

    python benchmarks/bench_startup_sigint.py [--runs 24] [--max-delay-ms 600]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "data" / "runs" / "tabular-cpu-bs4-fp32"


def one(delay_s: float) -> dict:
    """One start, SIGINT after ``delay_s``; the exit code and whether a traceback was printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "show", str(RUN)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return {
        "delay_ms": round(delay_s * 1000),
        "exit": proc.returncode,
        "traceback": "Traceback" in err,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=24)
    p.add_argument("--max-delay-ms", type=float, default=600.0)
    args = p.parse_args(argv)
    rows = [one(i * args.max_delay_ms / 1000 / max(args.runs - 1, 1)) for i in range(args.runs)]
    # 0: the command had finished before the signal came; -2: killed by SIGINT (a shell shows 130) while the
    # interpreter itself was starting or finalizing, before or after any code of ours
    quiet = [r for r in rows if r["exit"] in (0, 130, -signal.SIGINT) and not r["traceback"]]
    for r in rows:
        print(
            f"{r['delay_ms']:>5} ms  exit {r['exit']:>4}  {'traceback' if r['traceback'] else 'quiet'}"
        )
    print(
        f"{len(quiet)} of {len(rows)} quiet (no traceback; exit 130, -2 or 0 when it had finished)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
