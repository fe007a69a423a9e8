"""Run every benchmark and keep its figures in benchmarks/results/ (``make bench``).

Each benchmark compares against its peer tool in the same run and prints ratios;
this script only runs them one after another so they do not compete for the
two cores.

The benchmarks added in 0.2 run here with small settings, so ``make bench``
stays a few minutes on a laptop; their outputs go to ``results/bench_*.md`` /
``.json`` and never overwrite the full-size results the README quotes
(``results/compare.md``, ``results/stacks.md``, ``results/fuzz_traces.md``,
``results/room.md``), which come from running a script alone with its defaults.
``fuzz_traces`` and ``bench_room`` are optional: skipped, with a line, when the
script is absent (``bench_room`` also needs Debian's chromium).

``python benchmarks/run_all.py --list`` prints the commands without running them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _json(name: str) -> list[str]:
    return ["--json", str(RESULTS / f"{name}.json")]


# (script name, its arguments, required): a missing required script is a failure, an optional one a skip.
BENCHMARKS: list[tuple[str, list[str], bool]] = [
    ("bench_overhead", _json("bench_overhead"), True),
    ("bench_trace_load", _json("bench_trace_load"), True),
    ("bench_simulator", _json("bench_simulator"), True),
    ("bench_figures", _json("bench_figures"), True),
    ("bench_widget_memory", _json("bench_widget_memory"), True),
    ("bench_first_view", ["--as-before", *_json("bench_first_view")], True),
    (
        "bench_compare",
        [
            "--examples",
            "tabular",
            "--reps",
            "10",
            "--requests",
            "60",
            *_json("bench_compare"),
            "--md",
            str(RESULTS / "bench_compare.md"),
        ],
        True,
    ),
    (
        "bench_stacks",
        ["--requests", "20", "--blocks", "2", "--out", str(RESULTS / "bench_stacks.md")],
        True,
    ),
    (
        "bench_loadgen",
        ["--duration", "2", *_json("bench_loadgen"), "--md", str(RESULTS / "bench_loadgen.md")],
        True,
    ),
    (
        "bench_serve_gc",
        ["--duration", "2", "--rounds", "1", "--md", str(RESULTS / "bench_serve_gc.md")],
        True,
    ),
    (
        "bench_sweep",
        [
            "--rates",
            "25,50",
            "--window-s",
            "1",
            "--max-windows",
            "3",
            "--lag-duration",
            "2",
            "--md",
            str(RESULTS / "bench_sweep.md"),
        ],
        True,
    ),
    ("bench_edge", ["--duration", "2", "--md", str(RESULTS / "bench_edge.md")], True),
    (
        "bench_periodic",
        ["--periods", "250", "--min-duration", "1", "--md", str(RESULTS / "bench_periodic.md")],
        True,
    ),
    (
        "bench_open_closed",
        [
            "--examples",
            "tabular",
            "--min-duration",
            "1",
            "--md",
            str(RESULTS / "bench_open_closed.md"),
        ],
        True,
    ),
    (
        "bench_sim_live",
        ["--loads", "0.3", "--duration", "1", "--min-duration", "1", "--replications", "2"]
        + ["--rounds", "1", "--md", str(RESULTS / "bench_sim_live.md")],
        True,
    ),
    (
        "bench_timer_slack",
        ["--sleeps", "200", "--blocks", "2", "--md", str(RESULTS / "bench_timer_slack.md")],
        True,
    ),
    (
        "bench_sampler",
        [
            "--requests",
            "20",
            "--blocks",
            "2",
            "--modes",
            "thread 5ms",
            "--md",
            str(RESULTS / "bench_sampler.md"),
        ],
        True,
    ),
    (
        "bench_describe_memory",
        ["--requests", "10", "--batch", "64", "--md", str(RESULTS / "bench_describe_memory.md")],
        True,
    ),
    (
        "bench_traced_count",
        [
            "--counts",
            "5",
            "20",
            "--examples",
            "image",
            "--md",
            str(RESULTS / "bench_traced_count.md"),
        ],
        True,
    ),
    (
        "bench_scale",
        ["--requests", "20000", *_json("bench_scale"), "--md", str(RESULTS / "bench_scale.md")],
        True,
    ),
    (
        "bench_continuous",
        [
            "--duration",
            "2",
            *_json("bench_continuous"),
            "--md",
            str(RESULTS / "bench_continuous.md"),
        ],
        True,
    ),
    ("fuzz_traces", ["--smoke"], False),
    (
        "bench_room",
        ["--pages", "4", *_json("bench_room"), "--md", str(RESULTS / "bench_room.md")],
        False,
    ),
]


def commands() -> list[tuple[str, list[str] | None]]:
    """(name, command line) per benchmark; None for an optional script that is absent."""
    out = []
    for name, args, required in BENCHMARKS:
        script = HERE / f"{name}.py"
        present = script.exists()
        out.append((name, [sys.executable, str(script), *args] if present or required else None))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--list"]:
        for name, cmd in commands():
            print(f"{name}: {' '.join(cmd) if cmd else 'absent (optional), skipped'}")
        return 0
    RESULTS.mkdir(exist_ok=True)
    failed = []
    for name, cmd in commands():
        if cmd is None:
            print(f"== {name}: absent (optional), skipped", flush=True)
            continue
        if not Path(cmd[1]).exists():
            print(f"== {name}: missing", flush=True)
            failed.append(name)
            continue
        print(f"== {name}", flush=True)
        if subprocess.call(cmd):
            failed.append(name)
    print("failed or missed goals: " + (", ".join(failed) if failed else "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
