"""A measured capacity sweep against the simulator's curve, and the load generators' lag at its top rate.

    python benchmarks/bench_sweep.py [--rates 25,50,100,200] [--window-s 2] [--max-windows 4]
        [--sla-ms 50] [--lag-duration 5] [--md PATH] [--png PATH]

1. Profiles the text example at batch sizes 1, 2, 4, 8 (``workbench
   profile``, one thread): the simulator's service times.
2. Serves it (``workbench serve --example text --max-batch-size 8
   --max-wait-ms 5 --threads 1``) and sweeps ``load --url --sweep
   rate=...`` against it, each point windows of ``--window-s`` until three
   agree, at most ``--max-windows``, with ``--service`` the profiles: the simulator's curve for
   the same policy at the same rates, the measured/predicted ratio per point.
3. At the highest rate, ``load --url`` once with the workbench's own
   generator and once each with Locust (``--engine locust``) and 1 and 2
   workers: generator lag p50 / p99 / max.

Everything runs on this machine, on loopback: the generators share the
server's cores, and each run's noise verdict is printed beside its figures.
``--png`` also writes the sweep's figure as a PNG (plotly + kaleido when
installed, else a screenshot of its HTML page with Debian's chromium).
About 2-3 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")

sys.path.insert(0, str(REPO))
from workbench_serve.process import ServeProcess  # noqa: E402


def workbench(*args: object, timeout: float = 900) -> dict:
    """``python -m workbench ARGS --json`` in its own process; its JSON (exit status checked)."""
    cmd = [sys.executable, "-m", "workbench", *map(str, args), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=timeout)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-800:]}")
    return json.loads(r.stdout)


def profiles(root: Path) -> list[Path]:
    runs = []
    for size in (1, 2, 4, 8):
        out = root / f"profile-bs{size}"
        workbench(
            "profile",
            "--closed-loop",
            "--example",
            "text",
            "--threads",
            1,
            "--batch-size",
            size,
            "--requests",
            80,
            "--warmup",
            5,
            "--traced",
            0,
            "--out",
            out,
        )
        runs.append(out)
    return runs


def lag_runs(url: str, rate: float, duration: float, root: Path) -> list[dict]:
    rows = []
    for label, extra in (
        ("workbench (own)", []),
        ("locust, 1 worker", ["--engine", "locust", "--workers", 1]),
        ("locust, 2 workers", ["--engine", "locust", "--workers", 2]),
    ):
        out = workbench(
            "load",
            "--url",
            url,
            "--example",
            "text",
            "--threads",
            1,
            "--rate",
            rate,
            "--duration",
            duration,
            *extra,
            "--out",
            root / f"lag-{len(rows)}",
        )
        rows.append(
            {
                "generator": label,
                "rate_rps": rate,
                "requests": out["requests"],
                "throughput_rps": out["throughput_rps"],
                "lag": out["generator_lag"],
                "p99_ms": out["end_to_end"]["p99_ms"],
                "noisy": out["noise"].get("noisy"),
            }
        )
    return rows


def write_png(record: dict, html: Path, png: Path) -> str:
    """The sweep figure as PNG: kaleido when importable, else chromium's screenshot of a page of it."""
    from workbench.plots.batching import sweep_record_figure

    fig = sweep_record_figure(
        record, title="text example served (max batch 8, wait 5 ms): latency vs throughput"
    )
    try:
        import kaleido  # noqa: F401

        fig.write_image(png, width=1000, height=560, scale=1)
        return "plotly + kaleido"
    except ImportError:
        fig.write_html(html, include_plotlyjs=True, config={"displayModeBar": False})
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is None:
            return "none (neither kaleido nor chromium installed)"
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--screenshot={png}",
                "--window-size=1000,560",
                "--virtual-time-budget=5000",
                html.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return "a screenshot of the HTML page with Debian's chromium (kaleido not installed)"


def markdown(args, record: dict, lags: list[dict], started: str, png_how: str | None) -> str:
    lines = [
        "# Capacity sweep against the simulator, and load generator lag (`benchmarks/bench_sweep.py`)",
        "",
        f"The text example served by `workbench serve --max-batch-size 8 --max-wait-ms 5 --threads 1`, swept "
        f"with `load --url --sweep rate={args.rates}` (windows of {args.window_s:g} s until three agree "
        f"within 10 %, at most {args.max_windows} per point), on loopback; started {started}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores. Simulator: `--service` = profiles of the text example at batch sizes 1, 2, "
        "4, 8 (`workbench profile`, one thread), the same policy, Poisson arrivals at each point's rate.",
        "",
        f"Load average {os.getloadavg()[0]:.1f} when the run ended (this benchmark's own server and "
        "generators included); each point's noise verdict is in the table. The generators share the "
        "server's 2 cores, so a noisy point measures the machine as much as the pipeline.",
        "",
        "| rate (req/s) | offered | achieved | p50 (ms) | p99 (ms) | sim p50 | sim p99 | p50 ratio | p99 ratio "
        "| stable | lag p99 (ms) | noisy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in record["points"]:
        pred = p.get("predicted") or {}
        over = (
            pred.get("stable") is False
        )  # at or above the simulator's capacity: its queue grows without bound
        sim = (
            ["over capacity"] * 4
            if over
            else [
                _f(pred.get("p50_ms")),
                _f(pred.get("p99_ms")),
                _f(pred.get("p50_ratio"), 2),
                _f(pred.get("p99_ratio"), 2),
            ]
        )
        cells = [
            f"{p['rate_rps']:g}",
            f"{p['offered_rps']:.1f}",
            f"{p['achieved_rps']:.1f}",
            _f(p["p50_ms"]),
            _f(p["p99_ms"]),
            *sim,
            f"after {p['stable_after_windows']}" if p["stable"] else f"no ({p['windows']} windows)",
            _f(p["generator_lag_p99_ms"]),
            "yes" if p["noisy"] else "no",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    knee = record.get("knee")
    capacity = next(
        (p["predicted"]["capacity_rps"] for p in record["points"] if p.get("predicted")), None
    )
    if capacity is not None:
        lines += [
            "",
            f"The simulator's capacity at max batch 8 (full batches back to back, from the profiled "
            f"service times): {capacity:.1f} req/s; at or above it the simulated queue grows without "
            'bound and the table says "over capacity" instead of a finite run\'s numbers.',
        ]
    lines += [
        "",
        f"Stopped: {record['stopped']}. Knee at SLA p99 <= {args.sla_ms:g} ms: "
        + (
            f"{knee['offered_rps']:.1f} req/s offered (p99 {knee['p99_ms']:.2f} ms)."
            if knee
            else "none (no stable point met the SLA)."
        ),
        "",
        f"## Generator lag at {lags[0]['rate_rps']:g} req/s ({args.lag_duration:g} s each, same server)",
        "",
        "| generator | requests | throughput (req/s) | lag p50 (ms) | lag p99 (ms) | lag max (ms) "
        "| end-to-end p99 (ms) | noisy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in lags:
        lines.append(
            f"| {r['generator']} | {r['requests']} | {r['throughput_rps']:.1f} | {r['lag']['p50_ms']:.3f} "
            f"| {r['lag']['p99_ms']:.3f} | {r['lag']['max_ms']:.3f} | {_f(r['p99_ms'])} "
            f"| {'yes' if r['noisy'] else 'no'} |"
        )
    if png_how:
        lines += ["", f"Figure: {png_how}."]
    return "\n".join(lines) + "\n"


def _f(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="25,50,100,200")
    p.add_argument("--window-s", type=float, default=2.0)
    p.add_argument("--max-windows", type=int, default=4)
    p.add_argument("--sla-ms", type=float, default=50.0)
    p.add_argument("--lag-duration", type=float, default=5.0)
    p.add_argument("--md", type=Path, default=RESULTS / "sweep.md")
    p.add_argument("--png", type=Path)
    args = p.parse_args()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        root = Path(tmp)
        service = profiles(root)
        server = ServeProcess(
            [
                "--example",
                "text",
                "--threads",
                1,
                "--port",
                0,
                "--max-batch-size",
                8,
                "--max-wait-ms",
                5,
                "--out",
                root / "server",
            ],
            env=ENV,
        )
        try:
            record = workbench(
                "load",
                "--url",
                server.url,
                "--example",
                "text",
                "--threads",
                1,
                "--sweep",
                f"rate={args.rates}",
                "--window-s",
                args.window_s,
                "--max-windows",
                args.max_windows,
                "--sla-ms",
                args.sla_ms,
                "--figure",
                root / "sweep.html",
                "--service",
                *service,
                "--out",
                root / "sweep",
            )
            lags = lag_runs(server.url, record["points"][-1]["rate_rps"], args.lag_duration, root)
        finally:
            server.stop()
        png_how = write_png(record, root / "figure.html", args.png) if args.png else None
    # the scratch folder is this machine's temporary path: the results name it <scratch>
    text_json = json.dumps(record, indent=1).replace(str(root), "<scratch>")
    args.md.with_suffix(".json").write_text(text_json + "\n")
    text = markdown(args, record, lags, started, png_how)
    args.md.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
