"""Does ``workbench compare`` call differences right? False alarms and power on the shipped examples.

    python benchmarks/bench_compare.py [--examples tabular,text] [--reps 100] [--requests 2400]
        [--stage forward] [--factors 1.0,1.1] [--first-seed 0] [--json PATH] [--md PATH]
    python benchmarks/bench_compare.py --busy [--factors 1.0,1.3] [--reps 100]      # issue 26's goal
    python benchmarks/bench_compare.py --saved 1000000 [--md PATH]                 # two saved runs, memory
    python benchmarks/bench_compare.py --merge PART.json PART.json ... --json PATH --md PATH

For each example, with torch on one thread:

* **A against A**: ``--reps`` interleaved comparisons of two identical
  configurations (seeds 0, 1, ..., from ``--first-seed``, so that a long
  benchmark can run in parts whose seeds do not repeat). A false alarm is a ``slower`` or
  ``faster`` verdict on *any* stage or end to end. Goal: at most 5 %.
* **10 % slower**: the same, with ``--stage`` of B made 10 % slower: a wrapper
  times the stage's function and busy-waits ``0.1 x k`` x that time after it,
  where ``k`` (about 1.02-1.2) is the stage's p50 as the workbench times it over
  the median time inside the wrapper, measured once by an A-against-A
  comparison before the repetitions. So the part of the stage outside the
  wrapper's timer is stretched too (without ``k`` B came out 8.5-9 % slower),
  and B stays 10 % slower when the machine's speed drifts (a constant delay,
  tried too, fell to 4 % when the stage ran 2.5x slower for a while). Found
  when that stage's p50 verdict is ``slower``. Goal: at least 95 %.

A long benchmark can run in parts (``--first-seed`` so that seeds do not
repeat); ``--merge`` joins the parts' JSON files into one table, recounting
each arm from its repetitions (seeds must not overlap).

Rates come with a 95 % Wilson interval. Without ``--requests`` each repetition
uses compare's adaptive run length (rounds until every p50 interval is narrower
than 5 % or 120 s); the table gives the longest repetition and how many stopped
at the time limit. ``--noise-rule`` judges with the noise rule on (compare's
default: on a noisy machine an interval must clear 1 by more than the ratio's
drift); without it the verdicts are the statistical ones (``noise_probe=False``).
Each repetition is measured with ``workbench.noise`` either way, and the number
of noisy repetitions is reported next to the rates.

``--busy``: a child process keeps one core busy (a Python spin loop) for the
whole benchmark, and the noise rule is on. Issue 26's goal: a 30 % slower stage
found in at least 95 % of seeded repetitions, A against A at most 5 % false
verdicts, each repetition within 3 minutes. Not a test: it takes minutes.

``--saved N``: two synthetic run folders of N measured requests each (four
stages, log-normal times, B's ``forward`` 30 % slower; a real run's run.json and
table schema, its tables replaced), then ``compare A B --json`` and ``gate A B
--stages`` as separate processes: wall time and peak RSS of each. Goal: at most
500 MB and 10 s for a million requests each.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.interleave import DEFAULT_COMPARE_REQUESTS, compare  # noqa: E402
from workbench.config import PipelineConfig  # noqa: E402
from workbench.noise import NoiseProbe  # noqa: E402

HERE = Path(__file__).resolve().parent
DECISIVE = ("slower", "faster")


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95 % Wilson score interval of a rate k/n."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def stretched(fn, scale: dict, factor: float, record: list | None = None):
    """``fn`` followed by a busy-wait of ``(factor - 1) x scale["k"]`` x the time ``fn`` just took.

    ``scale["k"]`` (set by :func:`calibrate`) is the stage's p50 as the workbench times it over the
    median time measured inside this wrapper: the part of the stage outside ``fn`` (about 1 us of 46 on
    tabular's forward) is stretched too, so B's stage is ``factor`` x A's, and it stays so when the
    machine's speed drifts during the repetitions (both times scale together). ``record`` collects the
    inner times (calibration).
    """

    def run(x):
        t0 = time.perf_counter_ns()
        out = fn(x)
        inner = time.perf_counter_ns() - t0
        if record is not None:
            record.append(inner)
        if factor != 1.0:
            until = t0 + inner + int((factor - 1.0) * scale["k"] * inner)
            while time.perf_counter_ns() < until:
                pass
        return out

    return run


def slow_factory(example: str, stage: str):
    """A factory for ``example`` whose option ``slow`` (default 1.0) makes ``stage`` that much slower.

    Builds are cached per factor; :func:`calibrate` sets ``build_slowed.scale`` before the first build
    with a factor other than 1.0.
    """
    from workbench.examples import factory

    build, cache, scale, inner_ns = factory(example), {}, {}, []

    def build_slowed(config: PipelineConfig):
        factor = float(config.options.get("slow", 1.0))
        if factor not in cache:
            inner = config.replace(options={k: v for k, v in config.options.items() if k != "slow"})
            pipe = build(inner)
            target = next((s for s in pipe.stages if s.name == stage), None)
            if target is None:
                raise SystemExit(f"example {example} has no stage {stage!r}: {pipe.stage_names}")
            if factor != 1.0 and "k" not in scale:
                raise RuntimeError("calibrate() the stage before building a slowed configuration")
            fn = stretched(target.fn, scale, factor, record=inner_ns if factor == 1.0 else None)
            pipe.stages = [dataclasses.replace(s, fn=fn) if s is target else s for s in pipe.stages]
            cache[factor] = pipe
        return cache[factor]

    build_slowed.scale, build_slowed.inner_ns = scale, inner_ns
    return build_slowed


def calibrate(build, stage: str, requests: int, base: PipelineConfig) -> float:
    """``build.scale["k"]``: the stage's p50 in an A-against-A comparison (same process, interleaving and
    timing as the repetitions) over the median time inside the wrapper during it."""
    build.inner_ns.clear()
    c = compare(
        build,
        [{"slow": 1.0}, {"slow": 1.0}],
        base=base,
        requests=requests,
        warmup=10,
        seed=10_000,
        noise_probe=False,
    )
    p50_ns = next(e for e in c.result["stages"] if e["name"] == stage)["p50_a_ms"] * 1e6
    build.scale["k"] = p50_ns / float(np.median(build.inner_ns))
    build.scale["stage_p50_ns"] = p50_ns
    build.inner_ns.clear()
    return build.scale["k"]


def repetitions(
    example: str,
    stage: str,
    factor: float,
    reps: int,
    requests: int | None,
    first_seed: int = 0,
    noise_rule: bool = False,
) -> dict:
    build = slow_factory(example, stage)
    base = PipelineConfig(threads=1)
    calibrate(build, stage, requests or DEFAULT_COMPARE_REQUESTS, base)
    build.inner_ns.clear()
    decisive, found, noisy, widths, verdicts = 0, 0, 0, [], []
    started = time.perf_counter()
    for seed in range(first_seed, first_seed + reps):
        probe = NoiseProbe().start()
        rep_started = time.perf_counter()
        c = compare(
            build,
            [{"slow": 1.0}, {"slow": factor}],
            base=base,
            requests=requests,
            warmup=10,
            seed=seed,
            noise_probe=noise_rule,
        )
        rep_s = time.perf_counter() - rep_started
        noisy += bool(probe.finish(1).get("noisy"))
        entries = [*c.result["stages"], c.result["end_to_end"]]
        decisive += any(e["verdict"] in DECISIVE for e in entries)
        target = next(e for e in entries if e["name"] == stage)
        found += target["verdict"] == "slower"
        widths.append(target["p50_ci"][1] - target["p50_ci"][0])
        stopped = c.result.get("stopped") or {}
        verdicts.append(
            {
                "seed": seed,
                "verdict": target["verdict"],
                "p50_ratio": target["p50_ratio"],
                "p50_ci": target["p50_ci"],
                "p50_a_ms": target["p50_a_ms"],
                "decisive": [e["name"] for e in entries if e["verdict"] in DECISIVE],
                "seconds": round(rep_s, 1),
                "stopped": stopped.get("by"),
                "requests": c.result["requests"],
                "noisy_window": (c.result.get("noise") or {}).get("noisy"),
            }
        )
    k = decisive if factor == 1.0 else found
    lo, hi = wilson(k, reps)
    return {
        "example": example,
        "stage": stage,
        "factor": factor,
        "reps": reps,
        "requests": requests or "adaptive",
        "noise_rule": noise_rule,
        "max_rep_s": max(r["seconds"] for r in verdicts),
        "stopped_at_max_time": sum(r["stopped"] == "max_time" for r in verdicts),
        "what": "false slower/faster on any stage"
        if factor == 1.0
        else f"{stage} found slower on p50",
        "count": k,
        "rate": k / reps,
        "wilson_95": [round(lo, 4), round(hi, 4)],
        "median_p50_ci_width": round(sorted(widths)[len(widths) // 2], 4),
        "noisy_reps": noisy,
        "stage_p50_us": round(build.scale["stage_p50_ns"] / 1000, 2),
        "scale_k": round(build.scale["k"], 4),
        "seconds": round(time.perf_counter() - started, 1),
        "per_rep": verdicts,
    }


def row_of(first: dict, per_rep: list[dict], noisy: int, seconds: float) -> dict:
    """An arm's row (as :func:`repetitions` returns it) recounted from its repetitions' verdicts."""
    k = (
        sum(bool(r["decisive"]) for r in per_rep)
        if first["factor"] == 1.0
        else sum(r["verdict"] == "slower" for r in per_rep)
    )
    lo, hi = wilson(k, len(per_rep))
    widths = sorted(r["p50_ci"][1] - r["p50_ci"][0] for r in per_rep)
    if all("seconds" in r for r in per_rep):  # adaptive runs record each repetition's length
        first = {
            **first,
            "max_rep_s": max(r["seconds"] for r in per_rep),
            "stopped_at_max_time": sum(r.get("stopped") == "max_time" for r in per_rep),
        }
    return {
        **first,
        "reps": len(per_rep),
        "count": k,
        "rate": k / len(per_rep),
        "wilson_95": [round(lo, 4), round(hi, 4)],
        "median_p50_ci_width": round(widths[len(widths) // 2], 4),
        "noisy_reps": noisy,
        "seconds": round(seconds, 1),
        "per_rep": per_rep,
    }


def merge(paths: list[Path]) -> tuple[list[dict], tuple[float, float], bool]:
    """The rows of several parts' JSON files, one per (example, stage, factor, requests), in first-seen order.

    ``stage_p50_us`` and ``scale_k`` (measured once per part) become lists, one per part. Load average: the
    first part's before, the last part's after; busy when any part was.
    """
    parts = [json.loads(Path(p).read_text()) for p in paths]
    arms: dict[tuple, list[dict]] = {}
    for part in parts:
        for row in part["rows"]:
            arms.setdefault(
                (row["example"], row["stage"], row["factor"], row["requests"]), []
            ).append(row)
    rows = []
    for key, pieces in arms.items():
        seeds = [r["seed"] for piece in pieces for r in piece["per_rep"]]
        if len(set(seeds)) != len(seeds):
            raise SystemExit(
                f"--merge: {key} repeats seeds across parts (run the parts with --first-seed)"
            )
        per_rep = sorted((r for piece in pieces for r in piece["per_rep"]), key=lambda r: r["seed"])
        first = {
            **pieces[0],
            "stage_p50_us": [p["stage_p50_us"] for p in pieces],
            "scale_k": [p["scale_k"] for p in pieces],
        }
        rows.append(
            row_of(
                first,
                per_rep,
                sum(p["noisy_reps"] for p in pieces),
                sum(p["seconds"] for p in pieces),
            )
        )
    load = (parts[0]["load_average"][0], parts[-1]["load_average"][1])
    return rows, load, any(p["busy_machine"] for p in parts)


def _machine(load: tuple[float, float]) -> str:
    """``quiet`` when the load average stayed under half the cores, else ``**busy**``."""
    return "quiet" if max(load) < 0.5 * (os.cpu_count() or 1) + 0.5 else "**busy**"


def _verdicts_used(rows: list[dict]) -> str:
    spun = (
        " One core kept busy by a spinning child process (--busy)."
        if any(r.get("busy_core") for r in rows)
        else ""
    )
    if any(r.get("noise_rule") for r in rows):
        return "verdicts with the noise rule on (compare's default)." + spun
    return "statistical verdicts (noise rule off, see the script's docstring)." + spun


def markdown(rows: list[dict], load: tuple[float, float], busy: bool | None = None) -> str:
    machine = _machine(load) if busy is None else ("**busy**" if busy else "quiet")
    lines = [
        "# bench_compare: false alarms and power of `workbench compare`",
        "",
        f"Measured on a {machine} {os.cpu_count()}-core machine (load average {load[0]:.2f} before, "
        f"{load[1]:.2f} after), torch on 1 thread, "
        + _verdicts_used(rows)
        + " Regenerate: `python benchmarks/bench_compare.py`.",
        "",
        "| example | stage | B | reps x requests | what | rate | Wilson 95 % | goal | median p50 interval width "
        "| noisy reps | longest rep s (at max time) | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        goal = "<= 5 %" if r["factor"] == 1.0 else ">= 95 %"
        longest = f"{r['max_rep_s']} ({r['stopped_at_max_time']})" if "max_rep_s" in r else "-"
        lines.append(
            f"| {r['example']} | {r['stage']} | x{r['factor']} | {r['reps']} x {r['requests']} | {r['what']} "
            f"| {100 * r['rate']:.0f} % | [{100 * r['wilson_95'][0]:.1f}, {100 * r['wilson_95'][1]:.1f}] % "
            f"| {goal} | {r['median_p50_ci_width']} | {r['noisy_reps']} | {longest} | {r['seconds']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--examples", default="tabular,text")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument(
        "--requests",
        type=int,
        default=None,
        help="fixed measured requests per configuration (default: compare's adaptive run length; "
        f"the quiet-machine tables used {DEFAULT_COMPARE_REQUESTS})",
    )
    ap.add_argument(
        "--noise-rule", action="store_true", help="judge with the noise rule on (compare's default)"
    )
    ap.add_argument(
        "--busy",
        action="store_true",
        help="keep one core busy with a child process throughout; implies --noise-rule",
    )
    ap.add_argument("--stage", default="forward")
    ap.add_argument(
        "--factors", default="1.0,1.1", help="B's slow-down factors: 1.0 is A against A"
    )
    ap.add_argument(
        "--first-seed", type=int, default=0, help="seed of the first repetition (run in parts)"
    )
    ap.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="PART",
        help="join parts' JSON files; measure nothing",
    )
    ap.add_argument(
        "--saved",
        type=int,
        metavar="N",
        help="time compare and gate of two saved runs of N requests",
    )
    ap.add_argument("--json", type=Path, default=HERE / "results" / "compare.json")
    ap.add_argument("--md", type=Path, default=HERE / "results" / "compare.md")
    args = ap.parse_args()
    if args.merge:
        rows, load, busy = merge(args.merge)
        return write(args, rows, load, busy)
    if args.saved:
        import tempfile

        load_before = os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as work:
            rows = saved_benchmark(args.saved, Path(work))
        text = saved_markdown(rows, (load_before, os.getloadavg()[0]))
        print(text)
        return (
            0
            if all(
                r["seconds"] <= 10 and r["peak_rss_mb"] <= 500 and r["exit"] in (0, 1, 4)
                for r in rows
            )
            else 1
        )
    import torch

    torch.set_num_threads(1)
    spinner = busy_core() if args.busy else None
    load_before = os.getloadavg()[0]
    rows = []
    try:
        for example in args.examples.split(","):
            for factor in (float(f) for f in args.factors.split(",")):
                row = repetitions(
                    example,
                    args.stage,
                    factor,
                    args.reps,
                    args.requests,
                    args.first_seed,
                    noise_rule=args.noise_rule or args.busy,
                )
                row["busy_core"] = args.busy
                print(json.dumps({k: v for k, v in row.items() if k != "per_rep"}), flush=True)
                rows.append(row)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    load = (load_before, os.getloadavg()[0])
    return write(args, rows, load, args.busy or _machine(load) != "quiet")


SAVED_STAGES = ("parse", "hydrate", "forward", "serialize")


def saved_benchmark(n: int, work: Path) -> list[dict]:
    """Wall seconds and peak RSS (MB) of ``compare A B --json`` and ``gate A B --stages`` on two N-request runs."""
    import subprocess

    folders = [
        synthetic_run(work / name, n, slow, seed)
        for name, slow, seed in (("a", 1.0, 1), ("b", 1.3, 2))
    ]
    rows = []
    names = [
        f.name for f in folders
    ]  # run from `work`: the output names "a" and "b", not this machine's paths
    for argv in (
        ["compare", *names, "--json"],
        ["gate", *names, "--stages"],
    ):
        # /usr/bin/time reports the command's own peak RSS: a child forked from this process would start with
        # this process's high-water mark (the generated tables), and ru_maxrss would report that instead
        with open(work / "out.txt", "w+b") as out:
            proc = subprocess.run(
                [
                    "/usr/bin/time",
                    "-f",
                    "%M %e",
                    "-o",
                    str(work / "time.txt"),
                    sys.executable,
                    "-m",
                    "workbench",
                    *argv,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=work,
                env={**os.environ, "PYTHONPATH": str(HERE.parent)},
            )
            out.seek(0)
            last = out.read().decode().strip().splitlines()[-1][:160]
        rss_kb, wall = (work / "time.txt").read_text().split()[-2:]
        rows.append(
            {
                "command": " ".join(argv[:1] + ["A", "B"] + argv[3:]),
                "requests_each": n,
                "exit": proc.returncode,
                "seconds": float(wall),
                "peak_rss_mb": round(int(rss_kb) / 1024, 1),
                "last_line": last,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def synthetic_run(path: Path, n: int, forward_factor: float, seed: int) -> Path:
    """A run folder of ``n`` measured requests: a real run's run.json and table schemas, synthetic tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from workbench import Pipeline, profile

    def build(config):
        pipe = Pipeline("synthetic", items=lambda: iter(range(10**9)))
        for name in SAVED_STAGES:
            pipe.add(name, lambda b: b)
        return pipe

    profile(build, PipelineConfig(), requests=20, warmup=0, traced=0).save(path)
    rng = np.random.default_rng(seed)
    medians = {
        "parse": 20e3,
        "hydrate": 150e3,
        "forward": 400e3 * forward_factor,
        "serialize": 30e3,
    }
    durs = np.stack(
        [rng.lognormal(np.log(medians[s]), 0.25, n).astype("int64") for s in SAVED_STAGES], axis=1
    )
    e2e = durs.sum(axis=1) + 2_000
    starts = np.concatenate(([0], np.cumsum(e2e + 1_000)[:-1]))
    req_schema, st_schema = (
        pq.read_schema(path / "requests.parquet"),
        pq.read_schema(path / "stages.parquet"),
    )
    requests = {
        "request": np.arange(n),
        "warmup": np.zeros(n, bool),
        "start_ns": starts,
        "dur_ns": e2e,
        "ok": np.ones(n, bool),
        "batch_size": np.ones(n, "int64"),
    }
    stage_starts = starts[:, None] + np.concatenate(
        (np.zeros((n, 1), "int64"), np.cumsum(durs, axis=1)[:, :-1]), 1
    )
    stages = {
        "request": np.repeat(np.arange(n), len(SAVED_STAGES)),
        "stage": pa.DictionaryArray.from_arrays(
            np.tile(np.arange(len(SAVED_STAGES), dtype="int32"), n), list(SAVED_STAGES)
        ).cast(pa.string()),
        "stage_index": np.tile(np.arange(len(SAVED_STAGES)), n),
        "start_ns": stage_starts.ravel(),
        "dur_ns": durs.ravel(),
        "gc_ns": np.zeros(n * len(SAVED_STAGES), "int64"),
    }
    for file, schema, columns in (
        ("requests.parquet", req_schema, requests),
        ("stages.parquet", st_schema, stages),
    ):
        rows = n if file == "requests.parquet" else n * len(SAVED_STAGES)
        arrays = [
            pa.array(columns[f.name], type=f.type)
            if f.name in columns
            else pa.nulls(rows, type=f.type)
            for f in schema
        ]
        pq.write_table(pa.Table.from_arrays(arrays, schema=schema.remove_metadata()), path / file)
    meta = json.loads((path / "run.json").read_text())
    meta["timing"]["requests"] = n
    (path / "run.json").write_text(json.dumps(meta))
    return path


def saved_markdown(rows: list[dict], load: tuple[float, float]) -> str:
    lines = [
        "",
        f"## Two saved runs of {rows[0]['requests_each']:,} requests each (`--saved`)",
        "",
        f"Load average {load[0]:.2f} before, {load[1]:.2f} after ({os.cpu_count()} cores). Goal: each command "
        "at most 500 MB peak RSS and 10 s.",
        "",
        "| command | exit | seconds | peak RSS MB | goal met | last line |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = "yes" if r["seconds"] <= 10 and r["peak_rss_mb"] <= 500 else "**no**"
        lines.append(
            f"| `{r['command']}` | {r['exit']} | {r['seconds']} | {r['peak_rss_mb']} | {met} | "
            f"{r['last_line'].replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


def busy_core():
    """A child process that keeps one core busy (a spin loop) until killed."""
    import subprocess

    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def write(args, rows: list[dict], load: tuple[float, float], busy: bool) -> int:
    """The JSON and markdown files; exit 1 when a goal is missed."""
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"rows": rows, "load_average": load, "busy_machine": busy}, indent=2)
    )
    args.md.write_text(markdown(rows, load, busy))
    missed = [
        r
        for r in rows
        if (r["rate"] > 0.05 if r["factor"] == 1.0 else r["rate"] < 0.95)
        or (r.get("busy_core") and r.get("max_rep_s", 0) > 180)
    ]
    print(f"goals missed: {len(missed)} of {len(rows)}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
