"""How well ``workbench load --url`` holds its schedule: generator lag p50 / p99 / max at 200, 500, 1,000 req/s.

    python benchmarks/bench_loadgen.py [--rates 200,500,1000] [--duration 10] [--chrt] [--md PATH] [--json PATH]

Starts a real server on this machine (``python -m workbench serve`` with the
trivial pipeline ``build`` below: JSON in, a sum out, no model, so the
server's capacity is well above the rates and the numbers are the client's),
waits for its ready line, then runs ``python -m workbench load --url ...
--json`` once per rate, open-loop Poisson, each in its own process as a user
would. Lag is when a request's bytes went to the socket minus when it was
due (``workbench_serve.client``). Goal (issue 13): lag p99 under 1 ms up
to 1,000 req/s on the 2-core machine, server on the same machine.

Each run's noise record (``workbench.noise``: other processes' CPU, load
average, steal; the local server's own CPU not counted) is kept: a run
whose machine was busy says so in the table, and the figures are then
from a busy machine, not the client's limit. ``--chrt`` runs the load
generator under ``chrt -f 10`` (real-time priority; root), which tells the
client's own cost apart from other processes taking its core: not how a
user runs it, and said so in the table. About 50 s with the defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
PIPELINE = f"{Path(__file__).resolve()}:build"
LAG_REASON = "the load generator fell behind"

sys.path.insert(0, str(REPO))
from tests.support.cli import ENV  # noqa: E402
from workbench_serve.process import ServeProcess  # noqa: E402


def build(config):
    """The served pipeline: parse JSON, add, serialize (microseconds per batch)."""
    import itertools

    from workbench import Pipeline

    pipe = Pipeline(
        "loadgen-echo", items=lambda: (json.dumps({"x": k}).encode() for k in itertools.count())
    )

    @pipe.stage
    def parse(batch):
        return [json.loads(b) for b in batch]

    @pipe.stage
    def forward(rows):
        return [{"y": r["x"] + 1} for r in rows]

    @pipe.stage
    def serialize(rows):
        return [json.dumps(r).encode() for r in rows]

    return pipe


def start_server(out: Path, timeout_s: float = 120.0) -> ServeProcess:
    """``workbench serve`` of the echo pipeline on a free port, ready."""
    return ServeProcess(
        [
            "--pipeline",
            PIPELINE,
            "--port",
            0,
            "--threads",
            1,
            "--max-wait-ms",
            1,
            "--warmup",
            1,
            "--out",
            out,
        ],
        env=ENV,
        cwd=REPO,
        timeout_s=timeout_s,
    )


def measure(url: str, rate: float, duration_s: float, out: Path, prefix: list[str]) -> dict:
    """One ``workbench load --url`` run at ``rate``: its --json, plus the run's full noise record."""
    load_before = os.getloadavg()[0]
    res = subprocess.run(
        [
            *prefix,
            sys.executable,
            "-m",
            "workbench",
            "load",
            "--url",
            url,
            "--pipeline",
            PIPELINE,
            "--rate",
            str(rate),
            "--duration",
            str(duration_s),
            "--json",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=duration_s + 120,
    )
    if res.returncode not in (0, 1):
        raise RuntimeError(
            f"load --rate {rate} exited {res.returncode}: {res.stderr.strip()[-2000:]}"
        )
    got = json.loads(res.stdout)
    meta = json.loads((out / "run.json").read_text())
    noise = meta["noise"]
    busy = (
        [r for r in (noise.get("reasons") or []) if not r.startswith(LAG_REASON)]
        if noise.get("noisy")
        else []
    )
    return {
        "rate_rps": rate,
        "duration_s": duration_s,
        "requests": got["requests"],
        "failed": got["failed"],
        "throughput_rps": round(got["throughput_rps"], 1),
        "generator_lag": got["generator_lag"],
        "generator_lag_ms": got["generator_lag_ms"],
        "network": got.get("network"),
        "noise_reasons": got["noise"]["reasons"],
        "noisy": got["noise"]["noisy"],
        "machine_busy": bool(busy),
        "busy_reasons": busy,
        "other_cores": noise.get("other_cores"),
        "server_cores": noise.get("server_cores"),
        "load_before_1m": round(load_before, 2),
        "lag_p99_under_1ms": got["generator_lag"]["p99_ms"] < 1.0,
        "client": meta["serving"]["client"],
    }


def run(rates: list[float], duration_s: float, prefix: list[str]) -> dict:
    started = datetime.now(timezone.utc)
    with tempfile.TemporaryDirectory(prefix="bench_loadgen-") as tmp:
        server = start_server(Path(tmp) / "server")
        try:
            rows = [
                measure(server.url, rate, duration_s, Path(tmp) / f"load-{rate:g}", prefix)
                for rate in rates
            ]
        finally:
            try:
                server.stop(timeout_s=60)
            except subprocess.TimeoutExpired:
                server.kill()
    return {
        "rows": rows,
        "client_prefix": " ".join(prefix) or None,
        "started": started.isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "machine_busy": any(r["machine_busy"] for r in rows),
        "goal_met": all(r["lag_p99_under_1ms"] for r in rows)
        and not any(r["failed"] for r in rows),
    }


def markdown(result: dict) -> str:
    busy = result["machine_busy"]
    lines = [
        "# Load generator lag (`benchmarks/bench_loadgen.py`)",
        "",
        f"`workbench load --url` against `workbench serve` (a trivial JSON pipeline, 1 thread, max wait 1 ms) on the "
        f"same {result['cores']}-core machine, open-loop Poisson, {result['rows'][0]['duration_s']:g} s per rate; "
        f"started {result['started']}, Python {result['python']}, client {result['rows'][0]['client']}. "
        "Lag = a request's send (bytes to the socket) minus "
        "its due time. Goal (issue 13): lag p99 under 1 ms up to 1,000 req/s.",
        "",
        *(
            [
                f"The load generator ran under `{result['client_prefix']}` (real-time priority): other processes could "
                "not take its core, unlike a user's plain run.",
                "",
            ]
            if result.get("client_prefix")
            else []
        ),
        (
            "**The machine was busy** (other processes competed for the cores, see the last column): these are figures "
            "from a loaded machine, not the client's limit; rerun on a quiet machine."
            if busy
            else "The machine was quiet during every run (the noise probe found no other load)."
        ),
        "",
        "| rate (req/s) | requests | failed | throughput (req/s) | lag p50 (ms) | lag p99 (ms) | lag max (ms) "
        "| network p50/p99 (ms) | p99 < 1 ms | machine |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lag, net = r["generator_lag"], r["network"] or {}
        machine = "busy: " + "; ".join(r["busy_reasons"]) if r["machine_busy"] else "quiet"
        lines.append(
            f"| {r['rate_rps']:g} | {r['requests']} | {r['failed']} | {r['throughput_rps']:.0f} "
            f"| {lag['p50_ms']:.3f} | {lag['p99_ms']:.3f} | {lag['max_ms']:.2f} "
            f"| {net.get('p50_ms', float('nan')):.2f}/{net.get('p99_ms', float('nan')):.2f} "
            f"| {'yes' if r['lag_p99_under_1ms'] else '**no**'} | {machine} |"
        )
    lines += [
        "",
        f"Goal met: {'yes' if result['goal_met'] else '**no**'}"
        f"{' (on a busy machine: not conclusive either way)' if busy else ''}. "
        f"Load average after: {result['load_average_after']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="200,500,1000", help="comma-separated request rates (req/s)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per rate (default 10)")
    ap.add_argument(
        "--chrt", action="store_true", help="run the load generator under chrt -f 10 (root)"
    )
    ap.add_argument("--md", type=Path, default=RESULTS / "loadgen.md")
    ap.add_argument("--json", type=Path, default=RESULTS / "loadgen.json")
    args = ap.parse_args(argv)
    result = run(
        [float(r) for r in args.rates.split(",")],
        args.duration,
        ["chrt", "-f", "10"] if args.chrt else [],
    )
    args.md.write_text(markdown(result))
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    return (
        0 if result["goal_met"] else 1
    )  # a miss on a busy machine is a miss too: the table says why


if __name__ == "__main__":
    sys.exit(main())
