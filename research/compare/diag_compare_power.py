"""Where does ``workbench compare`` lose power? Collect long interleaved comparisons once, judge prefixes offline.

    python research/compare/diag_compare_power.py collect --example text --reps 40 --requests 2400 --out DIR
    python research/compare/diag_compare_power.py judge DIR [--requests 600 1200 2400]

``collect`` runs ``--reps`` seeded interleaved comparisons per arm (A against A,
and B's ``--stage`` made 10 % slower, exactly as ``bench_compare.py`` does) and
keeps every comparison's per-request samples (``DIR/ARM-SEED.parquet``).

``judge`` re-judges each comparison from its first ``N`` requests per
configuration (the rounds a run of ``--requests N`` would have made), for each
``N``: the false-alarm rate of the A-against-A arm and the power of the 10 % arm,
with 95 % Wilson intervals. Same samples, so the differences between lengths are
not run-to-run noise. A diagnostic for choosing the default length, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_compare import DECISIVE, calibrate, slow_factory, wilson  # noqa: E402
from workbench.analysis.verdicts import BLOCK, paired_comparison  # noqa: E402
from workbench.config import PipelineConfig  # noqa: E402

ARMS = {"aa": 1.0, "slow": 1.1}


def collect(args) -> None:
    import torch

    from workbench.interleave import compare

    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    build, base = slow_factory(args.example, args.stage), PipelineConfig(threads=1)
    calibrate(build, args.stage, 600, base)
    (args.out / "info.json").write_text(
        json.dumps(
            {
                "example": args.example,
                "stage": args.stage,
                "requests": args.requests,
                "scale": build.scale,
            }
        )
    )
    for seed in range(args.reps):
        for arm, factor in ARMS.items():
            c = compare(
                build,
                [{"slow": 1.0}, {"slow": factor}],
                base=base,
                requests=args.requests,
                warmup=10,
                seed=seed,
                noise_probe=False,
            )
            c.samples.to_parquet(args.out / f"{arm}-{seed:03d}.parquet")
        print(f"seed {seed} done", flush=True)


def judge(args) -> None:
    info = json.loads((args.dir / "info.json").read_text())
    stage = info["stage"]
    for n in args.requests:
        counts = {arm: [0, 0] for arm in ARMS}
        for path in sorted(args.dir.glob("*.parquet")):
            arm = path.stem.split("-")[0]
            samples = pd.read_parquet(path)
            samples = samples[samples["request"] < n]
            names = [
                c
                for c in samples.columns
                if c not in ("config", "round", "request", "ok", "error_type", "end_to_end")
            ]
            r = paired_comparison(samples, names, seed=int(path.stem.split("-")[1]))
            entries = [*r["stages"], r["end_to_end"]]
            if arm == "aa":
                counts[arm][0] += any(e["verdict"] in DECISIVE for e in entries)
            else:
                counts[arm][0] += (
                    next(e for e in entries if e["name"] == stage)["verdict"] == "slower"
                )
            counts[arm][1] += 1
        for arm, (k, reps) in counts.items():
            lo, hi = wilson(k, reps)
            what = "false alarms" if arm == "aa" else f"{stage} found slower"
            print(
                f"{info['example']} requests {n:>5} ({n // BLOCK} rounds): {what:<22} {k}/{reps} "
                f"[{100 * lo:.1f}, {100 * hi:.1f}] %",
                flush=True,
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--example", default="text")
    c.add_argument("--stage", default="forward")
    c.add_argument("--reps", type=int, default=40)
    c.add_argument("--requests", type=int, default=2400)
    c.add_argument("--out", type=Path, required=True)
    j = sub.add_parser("judge")
    j.add_argument("dir", type=Path)
    j.add_argument("--requests", type=int, nargs="+", default=[600, 1200, 2400])
    args = ap.parse_args()
    (collect if args.cmd == "collect" else judge)(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
