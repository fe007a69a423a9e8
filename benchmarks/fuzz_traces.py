"""Fuzz the trace reader and every trace analysis with 10,000 seeded variants; measure gzip-bomb memory.

Variants come from :mod:`tests.support.fuzz` (small real traces of the checkout
and synthetic ones, damaged or made odd in 18 families). Each is loaded and, when
it loads, analyzed (``analyze``: every analysis the CLI prints) and checked by
:mod:`tests.support.fuzz_judge`; every ``--figures-every``-th loaded one also draws
the dashboard figures. A sample goes through ``python -m workbench analyze`` in a
fresh process, where a crash is any exit code other than 0 or 2.

Then 1 GiB gzip bombs (JSON whitespace, ~1 MB compressed) go through the CLI with
the default cap (4 GiB: the text is read, then refused as a trace with no events)
and with ``--max-trace-bytes 256M`` (the dashboard's upload cap), each in a fresh
process whose peak RSS (VmHWM) is reported.

Prints a table by family (loaded / clean error / crash / wrong result) and writes
``benchmarks/results/fuzz_traces.md``; exits 1 if anything crashed or was wrong.

    python benchmarks/fuzz_traces.py [--variants 10000] [--seed 0] [--jobs 2] [--analyze-every 1]
                                     [--figures-every 20] [--cli-sample 60] [--no-bomb] [--smoke]
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a plain script from a checkout
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

from tests.support.fuzz import FAMILIES, default_bases, variant  # noqa: E402
from tests.support.fuzz_judge import OUTCOMES, judge, judge_cli  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "fuzz_traces.md"
MiB = 2**20
CLI_WITH_HWM = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("\\nVMHWM_KB " + next(l.split()[1] for l in open("/proc/self/status")
                                                           if l.startswith("VmHWM")) + "\\n"))
from workbench.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _work(task: tuple) -> list:
    """Worker: judge the variants ``start .. stop`` (by number) of ``seed``."""
    start, stop, seed, analyze_every, figures_every = task
    bases = default_bases(ROOT)
    out = []
    with tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
        for index in range(start, stop):
            v = variant(bases, index, seed)
            t0 = time.perf_counter()
            turn = index // len(FAMILIES)  # variants cycle through the families: sample whole turns
            verdict = judge(
                v,
                Path(folder),
                analyze=turn % analyze_every == 0,
                figures=figures_every > 0 and turn % figures_every == 0,
            )
            out.append(
                (index, verdict.family, verdict.outcome, verdict.detail, time.perf_counter() - t0)
            )
    return out


def fuzz_in_process(
    count: int, seed: int, jobs: int, analyze_every: int, figures_every: int
) -> list:
    step = 250
    tasks = [
        (i, min(i + step, count), seed, analyze_every, figures_every) for i in range(0, count, step)
    ]
    rows = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for done, part in enumerate(pool.map(_work, tasks), 1):
            rows += part
            print(f"  {len(rows):,} / {count:,} variants judged", file=sys.stderr, flush=True)
    return rows


def fuzz_cli(sample: int, seed: int) -> list:
    """Every (count/sample)-th variant, spread over the families, through the CLI."""
    bases = default_bases(ROOT)
    rows = []
    with tempfile.TemporaryDirectory(prefix="fuzz-cli-") as folder:
        for k in range(sample):
            index = k * (2 * len(FAMILIES) + 1)  # family k % 18, from turn 2k: every family in turn
            verdict = judge_cli(variant(bases, index, seed), Path(folder))
            rows.append((index, verdict.family, verdict.outcome, verdict.detail, 0.0))
    return rows


def write_bomb(path: Path, json_bytes: int) -> Path:
    """A trace of ``json_bytes`` of JSON, almost all whitespace, gzip level 9 (about 1,000:1)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    blank = b" " * MiB
    with open(path, "wb") as out:
        out.write(squeeze.compress(b'{"traceEvents": ['))
        for _ in range(json_bytes // MiB):
            out.write(squeeze.compress(blank))
        out.write(squeeze.compress(b"]}") + squeeze.flush())
    return path


def bomb_rows(folder: Path) -> list[dict]:
    bomb = write_bomb(folder / "bomb-1gib.json.gz", 2**30)
    rows = []
    for label, extra in (
        ("CLI, default cap (4 GiB)", []),
        ("CLI, --max-trace-bytes 256M (upload cap)", ["--max-trace-bytes", "256M"]),
    ):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CLI_WITH_HWM, "analyze", str(bomb), *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        wall = time.perf_counter() - t0
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        hwm = [int(line.split()[1]) for line in lines if line.startswith("VMHWM_KB ")]
        message = [line for line in lines if not line.startswith("VMHWM_KB ")]
        rows.append(
            {
                "run": label,
                "file_mb": bomb.stat().st_size / 1e6,
                "exit": done.returncode,
                "peak_rss_mb": hwm[-1] / 1024 if hwm else None,
                "wall_s": wall,
                "lines": len(message),
                "message": message[-1][:160] if message else "",
            }
        )
    return rows


def family_table(rows: list) -> str:
    counts = collections.Counter((family, outcome) for _, family, outcome, _, _ in rows)
    head = (
        f"| family | {' | '.join(o.replace('_', ' ') for o in OUTCOMES)} |\n|---|"
        + "---:|" * len(OUTCOMES)
    )
    lines = [head]
    for family in FAMILIES:
        lines.append(f"| {family} | " + " | ".join(str(counts[family, o]) for o in OUTCOMES) + " |")
    lines.append(
        "| **all** | "
        + " | ".join(f"**{sum(counts[f, o] for f in FAMILIES)}**" for o in OUTCOMES)
        + " |"
    )
    return "\n".join(lines)


def problems(rows: list) -> list:
    return [r for r in rows if r[2] in ("crash", "wrong_result")]


def report(args, rows, cli_rows, bombs, wall_s: float) -> str:
    slow = sorted(rows, key=lambda r: -r[4])[:3]
    parts = [
        "# Trace fuzzing (issue 11)",
        "",
        f"`python benchmarks/fuzz_traces.py --variants {args.variants} --seed {args.seed} --jobs {args.jobs} "
        f"--analyze-every {args.analyze_every} --figures-every {args.figures_every} --cli-sample {args.cli_sample}`: "
        f"{len(rows):,} variants in {wall_s:.0f} s on a busy 2-core machine (shared with other jobs: timings are "
        f"loose upper bounds). All are loaded; {_every(args.analyze_every)} through the {len(FAMILIES)} families "
        f"are also analyzed and checked when they load (`analyze`), and {_every(args.figures_every)} also draw "
        "the dashboard figures.",
        "",
        "## In process (`load_trace` + `analyze` [+ dashboard figures])",
        "",
        family_table(rows),
        "",
        f"## Through the command line (`python -m workbench analyze --json`, {len(cli_rows)} variants)",
        "",
        family_table(cli_rows),
        "",
        "## Crashes and wrong results",
        "",
    ]
    bad = problems(rows) + problems(cli_rows)
    parts += [f"- variant {i} ({f}): {o}: {d}" for i, f, o, d, _ in bad[:50]] or ["none"]
    parts += [
        "",
        "## 1 GiB gzip bomb (peak RSS of a fresh process)",
        "",
        "| run | file MB | exit | peak RSS MB | wall s | stderr lines | message |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for b in bombs:
        rss = "n/a" if b["peak_rss_mb"] is None else f"{b['peak_rss_mb']:.0f}"
        parts.append(
            f"| {b['run']} | {b['file_mb']:.2f} | {b['exit']} | {rss} | {b['wall_s']:.1f} | "
            f"{b['lines']} | {b['message']} |"
        )
    parts += [
        "",
        "Slowest variants: " + ", ".join(f"{i} ({f}, {t:.1f} s)" for i, f, _, _, t in slow),
        "",
    ]
    return "\n".join(parts)


def _every(n: int) -> str:
    """Which turns' variants a step covers, in words."""
    return (
        "the variants of every turn"
        if n == 1
        else ("none" if n <= 0 else f"the variants of every {n}th turn")
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--analyze-every",
        type=int,
        default=1,
        help="analyze the variants of every Nth turn through the families (all are loaded); "
        "1: all (about 0.2 s each)",
    )
    parser.add_argument(
        "--figures-every",
        type=int,
        default=20,
        help="draw the dashboard figures of every Nth turn (about 1 s each); 0: none",
    )
    parser.add_argument("--cli-sample", type=int, default=60)
    parser.add_argument("--no-bomb", action="store_true", help="skip the 1 GiB bomb measurement")
    parser.add_argument(
        "--smoke", action="store_true", help="200 variants, 6 through the CLI, no bomb, no file"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.variants, args.cli_sample, args.no_bomb = 200, 6, True
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fuzz-bomb-") as folder:
        bombs = [] if args.no_bomb else bomb_rows(Path(folder))
    rows = fuzz_in_process(
        args.variants, args.seed, args.jobs, args.analyze_every, args.figures_every
    )
    cli_rows = fuzz_cli(args.cli_sample, args.seed)
    text = report(args, rows, cli_rows, bombs, time.perf_counter() - t0)
    print(text)
    if not args.smoke:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 1 if problems(rows) or problems(cli_rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
