"""What the served run's own record costs the server's tail: full GC collections over the kept requests.

    python benchmarks/bench_serve_records.py [--sizes 5000 20000 60000] [--batch 1 8] [--repeats 5]
        [--served --against REV --rate 450 --duration 40 --rounds 2] [--md benchmarks/results/serve_records.md]

Part 1, in one process, interleaved: the server's record of ``n`` finished
requests kept two ways, as it was kept up to ``9b26ce6`` (per batch a
``BatchRecord`` with its ``RequestTiming``, stage lists and the batch's output,
per request an ``HttpTimes``; *objects*) and as it is kept now (plain tuples,
``PipelineService.done`` and ``batch_log``; *tuples*). Per form: tracked
objects added (``gc.get_objects()``) and the median of ``--repeats`` full
collections (``gc.collect()``, ms) with that record alive. The output of a
batch is a fresh list of ``batch`` small bytes objects, as the examples'
``serialize`` stages return.

Part 2 (``--served``): the real server, tabular example at batch size 1, driven
by ``workbench load --url`` at ``--rate`` for ``--duration`` seconds; per run,
the collections the server saw while serving (``serving.gc``: count, longest,
total) and the batcher's p99. With ``--against REV`` each round also runs the
server of git revision REV (a temporary worktree), in alternating order. Torch on
one thread. Not a test: part 2 takes a few minutes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from workbench.batching.policy import BatchRecord  # noqa: E402
from workbench_serve.service import BatchDone, HttpTimes  # noqa: E402
from workbench.timing import RequestTiming  # noqa: E402

STAGES = 6


def objects_record(n: int, batch: int) -> tuple[list, dict]:
    """``n`` requests as the server kept them up to 9b26ce6: BatchRecords (with outputs) and HttpTimes."""
    batches, http = [], {}
    for b in range(0, n, batch):
        rids = list(range(b, min(n, b + batch)))
        t0 = 1_000 * b
        timing = RequestTiming(
            t0,
            t0 + 900,
            [t0 + 100 * k for k in range(STAGES)],
            [t0 + 100 * k + 90 for k in range(STAGES)],
            None,
            None,
            output=[b"%d" % r for r in rids],
        )
        batches.append(BatchRecord(b, rids, [t0 - 50] * len(rids), t0 - 10, t0, t0 + 900, timing))
        for r in rids:
            http[r] = HttpTimes(t0 - 60, t0 - 50, f"c-{r}", t0 + 950, t0 + 990, False)
    return batches, http


def tuples_record(n: int, batch: int) -> tuple[list, dict]:
    """The same requests as the server keeps them now (``PipelineService.batch_log`` and ``done``)."""
    objects, http = objects_record(n, batch)
    batches = [tuple(BatchDone.of(rec)) for rec in objects]
    done = {
        rid: (t.received_ns, t.submitted_ns, t.request_id, t.resumed_ns, t.sent_ns, t.disconnected)
        for rid, t in http.items()
    }
    return batches, done


def collect_ms(repeats: int) -> float:
    """Median wall time of ``repeats`` full collections, ms."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        gc.collect()
        times.append((time.perf_counter_ns() - t) / 1e6)
    return statistics.median(times)


def part1(args) -> list[dict]:
    rows = []
    for n in args.sizes:
        for batch in args.batch:
            got = {}
            forms = (("objects", objects_record), ("tuples", tuples_record))
            for rep in range(2):  # interleaved, each form measured twice, the order swapped
                for name, build in forms if rep == 0 else forms[::-1]:
                    gc.collect()
                    before = len(gc.get_objects())
                    record = build(n, batch)
                    gc.collect()  # one collection lets the GC untrack tuples of atoms, as a server's first does
                    tracked = len(gc.get_objects()) - before
                    ms = collect_ms(args.repeats)
                    got.setdefault(name, []).append((tracked, ms))
                    del record
            row = {"requests": n, "batch": batch}
            for name, vals in got.items():
                row[f"{name}_tracked"] = vals[0][0]
                row[f"{name}_collect_ms"] = statistics.median(ms for _, ms in vals)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def served_run(label: str, cwd: Path, args, root: Path, k: int) -> dict:
    from payloads import payloads_file
    from tests.support.cli import served_load
    from workbench.record import load_run

    client, out = served_load(
        ["--example", "tabular", "--threads", 1, "--max-batch-size", 1, "--max-wait-ms", 0],
        payloads_file("tabular", root),
        root / f"{label}-{k}",
        *["--rate", args.rate, "--duration", args.duration, "--seed", k],
        timeout=900,
        serve_cwd=cwd,
        cwd=ROOT,
    )
    run = load_run(out)
    ok = run.requests[run.requests["ok"]]
    batcher = (ok["batch_wait_ns"] + ok["queue_wait_ns"] + ok["service_ns"]).to_numpy()
    g = run.meta.serving.gc
    return {
        "server": label,
        "round": k,
        "requests": int(len(run.requests)),
        "collections": g["collections"],
        "pause_ms_max": g["pause_ms_max"],
        "pause_ms_total": g["pause_ms_total"],
        "batcher_p50_ms": float(np.percentile(batcher, 50)) / 1e6,
        "batcher_p99_ms": float(np.percentile(batcher, 99)) / 1e6,
        "client_p99_ms": client["end_to_end"]["p99_ms"],
        "lag_p99_ms": client["generator_lag"]["p99_ms"],
        "noisy": client["noise"]["noisy"],
    }


def part2(args, root: Path) -> list[dict]:
    servers = [("this tree", ROOT)]
    if args.against:
        tree = root / "against"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.against],
            check=True,
            capture_output=True,
        )
        servers.append((args.against, tree))
    rows = []
    try:
        for k in range(args.rounds):
            for label, cwd in servers if k % 2 == 0 else servers[::-1]:
                rows.append(served_run(label, cwd, args, root, k))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        if args.against:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(root / "against")],
                capture_output=True,
            )
    return rows


def markdown(rows1: list[dict], rows2: list[dict], args, load: tuple[float, float]) -> str:
    cmd = (
        f"python benchmarks/bench_serve_records.py --sizes {' '.join(map(str, args.sizes))} --batch "
        f"{' '.join(map(str, args.batch))} --repeats {args.repeats}"
    )
    if args.served:
        cmd += f" --served --rate {args.rate:g} --duration {args.duration:g} --rounds {args.rounds}"
        cmd += f" --against {args.against}" if args.against else ""
    lines = [
        "# The served run's record and the GC",
        "",
        f"`{cmd}` (2-core VM, load average {load[0]:.2f} before, {load[1]:.2f} after).",
        "",
        "## Full collections over the kept record (one process, interleaved)",
        "",
        "*objects*: as the server kept finished requests up to `9b26ce6` (BatchRecord with its timing and "
        "output, HttpTimes); *tuples*: as it keeps them now. Tracked objects the record adds after one "
        "collection; a full collection's median time with the record alive.",
        "",
        "| requests | batch | objects: tracked | tuples: tracked | objects: full collection ms | "
        "tuples: full collection ms | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows1:
        lines.append(
            f"| {r['requests']} | {r['batch']} | {r['objects_tracked']} | {r['tuples_tracked']} | "
            f"{r['objects_collect_ms']:.2f} | {r['tuples_collect_ms']:.2f} | "
            f"{r['objects_collect_ms'] / max(r['tuples_collect_ms'], 1e-9):.1f}x |"
        )
    if rows2:
        lines += [
            "",
            "## The real server (tabular, batch size 1)",
            "",
            f"`workbench serve` driven by `workbench load --url` at {args.rate:g} req/s for {args.duration:g} s "
            "per run; collections while serving from the server's `serving.gc`.",
            "",
            "| server | round | requests | collections | longest ms | total ms | batcher p50 ms | "
            "batcher p99 ms | client p99 ms | lag p99 ms | noisy |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows2:
            lines.append(
                f"| {r['server']} | {r['round']} | {r['requests']} | {r['collections']} | "
                f"{r['pause_ms_max']:.1f} | {r['pause_ms_total']:.1f} | {r['batcher_p50_ms']:.2f} | "
                f"{r['batcher_p99_ms']:.2f} | {r['client_p99_ms']:.2f} | {r['lag_p99_ms']:.2f} | "
                f"{'yes' if r['noisy'] else 'no'} |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5_000, 20_000, 60_000])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--served", action="store_true")
    ap.add_argument(
        "--against", default=None, help="git revision whose server runs beside this tree's"
    )
    ap.add_argument("--rate", type=float, default=450.0)
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--md", type=Path, default=HERE / "results" / "serve_records.md")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    rows1 = part1(args)
    rows2 = []
    if args.served:
        with tempfile.TemporaryDirectory(prefix="wb-serve-records-") as tmp:
            rows2 = part2(args, Path(tmp))
    text = markdown(rows1, rows2, args, (load_before, os.getloadavg()[0]))
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
