"""What ``serve --gc freeze`` buys: client and server tails with the GC frozen after warm-up and without.

    python benchmarks/bench_serve_gc.py [--example tabular] [--rate 945] [--duration 8] [--rounds 2]
        [--max-batch-size 16] [--max-wait-ms 5] [--md benchmarks/results/serve_gc.md]

Per round, in alternating order (freeze, default, then default, freeze, ...):
a real ``workbench serve`` child process with ``--gc MODE``, driven by
``workbench load --url --json`` in another process at ``--rate`` (open loop,
Poisson) for ``--duration`` seconds. Reported per run: client end to end
p50/p99/max, the server's batcher p99, and the collections the server saw while
serving (count, longest, total) from its run folder (``serving.gc``). Torch on
one thread. Not a test: it takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from payloads import payloads_file  # noqa: E402
from tests.support.cli import served_load  # noqa: E402
from workbench.record import load_run  # noqa: E402


def one_run(mode: str, args, root: Path, k: int) -> dict:
    client, out = served_load(
        ["--example", args.example, "--threads", 1, "--max-batch-size", args.max_batch_size]
        + ["--max-wait-ms", args.max_wait_ms, "--gc", mode],
        payloads_file(args.example, root),
        root / f"{mode}-{k}",
        *["--rate", args.rate, "--duration", args.duration, "--seed", k],
    )
    server = load_run(out)
    ok = server.requests[server.requests["ok"]]
    batcher = (ok["batch_wait_ns"] + ok["queue_wait_ns"] + ok["service_ns"]).to_numpy()
    gc_note = server.meta.serving.gc
    return {
        "mode": mode,
        "round": k,
        "client_p50_ms": client["end_to_end"]["p50_ms"],
        "client_p99_ms": client["end_to_end"]["p99_ms"],
        "client_max_ms": client["end_to_end"]["max_ms"],
        "batcher_p99_ms": float(np.percentile(batcher, 99)) / 1e6,
        "collections": gc_note["collections"],
        "pause_ms_max": gc_note["pause_ms_max"],
        "pause_ms_total": gc_note["pause_ms_total"],
        "frozen_objects": gc_note["frozen_objects"],
        "noisy": client["noise"]["noisy"],
        "lag_p99_ms": client["generator_lag"]["p99_ms"],
    }


def markdown(rows: list[dict], args, load: tuple[float, float]) -> str:
    lines = [
        "# serve --gc freeze against --gc default",
        "",
        f"`python benchmarks/bench_serve_gc.py --example {args.example} --rate {args.rate:g} --duration "
        f"{args.duration:g} --rounds {args.rounds}` (max batch {args.max_batch_size}, {args.max_wait_ms:g} ms "
        f"wait, torch on 1 thread, 2-core VM; load average {load[0]:.2f} before, {load[1]:.2f} after). "
        "Client end to end from `load --url --json`; batcher = batch wait + queue wait + service on the "
        "server; collections while serving from the server's `serving.gc`.",
        "",
        "| gc | round | client p50 ms | client p99 ms | client max ms | batcher p99 ms | collections | "
        "longest ms | total ms | frozen objects | lag p99 ms | noisy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['round']} | {r['client_p50_ms']:.2f} | {r['client_p99_ms']:.2f} | "
            f"{r['client_max_ms']:.2f} | {r['batcher_p99_ms']:.2f} | {r['collections']} | "
            f"{r['pause_ms_max']:.1f} | {r['pause_ms_total']:.1f} | {r['frozen_objects']} | "
            f"{r['lag_p99_ms']:.2f} | {'yes' if r['noisy'] else 'no'} |"
        )
    for mode in ("freeze", "default"):
        mine = [r["client_p99_ms"] for r in rows if r["mode"] == mode]
        lines.append(f"\n{mode}: client p99 median {np.median(mine):.2f} ms over {len(mine)} runs.")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--example", default="tabular")
    ap.add_argument("--rate", type=float, default=945.0)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-batch-size", type=int, default=16)
    ap.add_argument("--max-wait-ms", type=float, default=5.0)
    ap.add_argument("--md", type=Path, default=HERE / "results" / "serve_gc.md")
    args = ap.parse_args()
    load_before, rows = os.getloadavg()[0], []
    with tempfile.TemporaryDirectory(prefix="wb-serve-gc-") as tmp:
        for k in range(args.rounds):
            for mode in ("freeze", "default") if k % 2 == 0 else ("default", "freeze"):
                rows.append(one_run(mode, args, Path(tmp), k))
                print(json.dumps(rows[-1]), flush=True)
    text = markdown(rows, args, (load_before, os.getloadavg()[0]))
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
