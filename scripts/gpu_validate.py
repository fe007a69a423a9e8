"""Validate every CUDA path on a real GPU and record the GPU example data (issue 6).

One prepared script for a scarce GPU lease (about 8 minutes for every step; `--only tests
recorded_runs served` took 178 s on an H100). It writes under
``--out`` (default ``$OUT``):

  results.json, results.md   the tables below
  pytest_cuda.log            the CUDA-marked tests
  gpu_runs.tar.gz            data/runs/*-cuda-* run folders (scripts/record_examples.py --device cuda)
  served.tar.gz              step ``served``: the text example served on the GPU and the load run against it

Tables: timing truth (CUDA events vs synchronized and unsynchronized host timers vs
the stage's kernels in the trace), launch-bound vs compute-bound, pageable vs
pinned copies with and without non_blocking, precision latency and throughput.
Steps (``--only``/``--skip``): tests, timing_truth, launch_bound, graphs_vs_eager,
transfers, precision, recorded_runs, served.

    python scripts/gpu_validate.py --out /tmp/gpu   # needs a CUDA GPU
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from workbench import PipelineConfig, profile  # noqa: E402

DEVICE = "cuda"  # --cpu-dry-run sets "cpu" to check the code paths here, with tiny counts
SCALE = 1


def log(*a):
    print(*a, flush=True)


def environment() -> dict:
    if DEVICE == "cpu":
        return {
            "gpu": "none (CPU dry run)",
            "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        }
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "gpu": torch.cuda.get_device_name(0),
        "nvidia_smi": smi,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def run_cuda_tests(out: Path) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "cuda",
        "-q",
        "-rA",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        f"--junitxml={out / 'pytest_cuda.xml'}",
        "tests",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=150)
    (out / "pytest_cuda.log").write_text(proc.stdout + proc.stderr)
    tail = [
        line
        for line in proc.stdout.splitlines()
        if line.startswith(("PASSED", "FAILED", "ERROR", "SKIPPED"))
    ]
    return {
        "returncode": proc.returncode,
        "summary": proc.stdout.strip().splitlines()[-1:],
        "results": tail,
    }


def stage_means(run) -> dict:
    """Per stage: mean host ms and mean device (CUDA event) ms over measured requests."""
    st = run.stages[
        run.stages["request"].isin(run.requests.loc[~run.requests["warmup"], "request"])
    ]
    g = st.groupby("stage", sort=False)
    return {
        name: {
            "host_ms": float(grp["dur_ns"].mean()) / 1e6,
            "device_ms": float(grp["device_dur_ns"].astype("float64").mean()) / 1e6,
        }
        for name, grp in g
    }


def trace_stage_gpu_ms(run) -> dict:
    """Per stage: GPU time (ms per request) of the work launched inside the stage, from the trace."""
    from workbench.analysis.trace_stages import trace_stage_summary
    from workbench.trace import load_trace

    table = trace_stage_summary(load_trace(run.trace_path))
    return {row["stage"]: row["gpu_ns"] / row["count"] / 1e6 for row in table.to_dict("records")}


def timing_truth(pairs) -> list[dict]:
    rows = []
    pairs = pairs if DEVICE == "cuda" else [(ex, 1) for ex, _ in pairs[:1]]
    for ex, bs in pairs:
        if True:
            cfg = PipelineConfig(device=DEVICE, batch_size=bs)
            synced = profile(
                ex, cfg, requests=60 // SCALE, warmup=10 // SCALE, traced=5, sync="stage"
            )
            unsynced = profile(
                ex, cfg, requests=60 // SCALE, warmup=10 // SCALE, traced=0, sync="request"
            )
            a, b, k = stage_means(synced), stage_means(unsynced), trace_stage_gpu_ms(synced)
            for stage in synced.stage_names:
                dev, kern = a[stage]["device_ms"], k.get(stage, 0.0)
                rows.append(
                    {
                        "example": ex,
                        "batch_size": bs,
                        "stage": stage,
                        "device_events_ms": dev,
                        "host_synced_ms": a[stage]["host_ms"],
                        "host_unsynced_ms": b[stage]["host_ms"],
                        "trace_kernels_ms": kern,
                        "kernels_vs_events": (kern / dev - 1) if dev > 0 else None,
                    }
                )
            log(f"timing truth {ex} bs={bs} done")
    return rows


def launch_bound(batch_sizes=(1, 64, 256)) -> list[dict]:
    from workbench.analysis.trace_report import analyze

    rows = []
    batch_sizes = batch_sizes if DEVICE == "cuda" else (1, 8)
    for bs in batch_sizes:
        run = profile(
            "text",
            PipelineConfig(device=DEVICE, batch_size=bs),
            requests=30 // SCALE,
            warmup=5 // SCALE,
            traced=max(1, 5 // SCALE),
        )
        rep = analyze(run.trace_path)
        fwd = next((s for s in rep["stages"] if s["stage"] == "forward"), {})
        rows.append(
            {
                "variant": f"text bs={bs} eager",
                "kernels": rep["kernels"]["count"],
                "kernel_us": rep["kernels"]["total_us"],
                "gpu_idle_fraction": rep["gpu"]["idle_fraction"],
                "launches": rep["launches"]["count"],
                "launch_us": rep["launches"]["total_us"],
                "forward_launch_bound": fwd.get("launch_bound"),
                "forward_host_us": fwd.get("host_us"),
                "forward_gpu_us": fwd.get("gpu_us"),
                "e2e_p50_ms": float(run.requests.loc[~run.requests["warmup"], "dur_ns"].median())
                / 1e6,
            }
        )
    return rows


def graphs_vs_eager(layers: int = 40, reps: int = 20) -> list[dict]:
    """A launch-bound stack of tiny Linear layers at batch 1: eager launches vs one CUDA graph replay."""
    from torch.profiler import ProfilerActivity, profile as tprofile

    from workbench.analysis.trace_report import analyze

    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(layers)]).cuda().eval()
    x = torch.randn(1, 64, device="cuda")
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        static_x = x.clone()
        with torch.cuda.graph(graph):
            static_y = model(static_x)  # noqa: F841
    rows = []
    for label, step in (("eager", lambda: model(x)), ("cuda_graph", graph.replay)):
        with torch.inference_mode():
            with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(reps):
                    step()
                torch.cuda.synchronize()
        path = Path(tempfile.mkdtemp()) / f"{label}.pt.trace.json"
        prof.export_chrome_trace(str(path))
        rep = analyze(path)
        rows.append(
            {
                "variant": f"{layers} x Linear(64) bs=1 {label}",
                "kernels": rep["kernels"]["count"],
                "kernel_us": rep["kernels"]["total_us"],
                "gpu_idle_fraction": rep["gpu"]["idle_fraction"],
                "launches": rep["launches"]["count"],
                "graph_launches": rep["launches"]["graph_count"],
                "gpu_span_us": rep["gpu"]["span_us"],
            }
        )
    return rows


def transfers(mib: int = 64) -> list[dict]:
    """HtoD copies of one tensor: pageable vs pinned, blocking vs non_blocking."""
    n = mib * 2**20 // 4
    pageable = torch.randn(n)
    pinned = pageable.pin_memory()
    dst = torch.empty(n, device=DEVICE)
    rows = []
    for label, src, nb in (
        ("pageable", pageable, False),
        ("pageable", pageable, True),
        ("pinned", pinned, False),
        ("pinned", pinned, True),
    ):
        host, dev = [], []
        for i in range(12):
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter_ns()
            e0.record()
            dst.copy_(src, non_blocking=nb)
            e1.record()
            t1 = time.perf_counter_ns()
            torch.cuda.synchronize()
            if i >= 2:
                host.append((t1 - t0) / 1e6)
                dev.append(e0.elapsed_time(e1))
        d = float(np.median(dev))
        rows.append(
            {
                "host_memory": label,
                "non_blocking": nb,
                "MiB": mib,
                "device_ms": d,
                "GBps": mib * 2**20 / (d / 1e3) / 1e9,
                "host_call_ms": float(np.median(host)),
                "host_blocks": float(np.median(host)) > 0.5 * d,
            }
        )
    return rows


def precision_table(examples=("text", "image"), sizes=(1, 16, 64)) -> list[dict]:
    rows = []
    sizes = sizes if DEVICE == "cuda" else sizes[:1]
    for ex in examples:
        for bs in sizes:
            for prec in ("fp32", "bf16", "fp16") if DEVICE == "cuda" else ("fp32",):
                run = profile(
                    ex,
                    PipelineConfig(device=DEVICE, batch_size=bs, precision=prec),
                    requests=40 // SCALE,
                    warmup=10 // SCALE,
                    traced=0,
                )
                e2e = run.requests.loc[~run.requests["warmup"] & run.requests["ok"], "dur_ns"] / 1e6
                fwd = stage_means(run).get("forward", {})
                rows.append(
                    {
                        "example": ex,
                        "batch_size": bs,
                        "precision": prec,
                        "p50_ms": float(e2e.median()),
                        "p99_ms": float(np.percentile(e2e, 99)),
                        "forward_device_ms": fwd.get("device_ms"),
                        "throughput_items_per_s": bs / float(e2e.mean()) * 1e3,
                    }
                )
        log(f"precision {ex} done")
    return rows


def record_runs(out: Path) -> list[str]:
    tmp = Path(tempfile.mkdtemp())
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "record_examples.py"),
            "--device",
            "cuda",
            "--out",
            str(tmp),
        ],
        capture_output=True,
        text=True,
        timeout=420,
    )
    log(proc.stdout[-3000:], proc.stderr[-2000:])
    with tarfile.open(out / "gpu_runs.tar.gz", "w:gz") as tar:
        for d in sorted(tmp.iterdir()):
            tar.add(d, arcname=d.name)
    return sorted(p.name for p in tmp.iterdir())


def served(out: Path, rate: float = 200.0, duration_s: float = 5.0) -> dict:
    """The text example served on DEVICE (max batch 16, 2 ms wait), driven by ``load --url`` from another process.

    Checks the serving path on a GPU: the batcher's executor thread runs CUDA work, every request
    answers, and the server's run folder records the device. Both run folders go to ``served.tar.gz``.
    """
    from workbench import load_run
    from workbench_serve.process import ServeProcess

    root = Path(tempfile.mkdtemp())
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    importable = dict(
        env, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    )
    server = ServeProcess(
        [
            "--example",
            "text",
            "--device",
            DEVICE,
            "--max-batch-size",
            16,
            "--max-wait-ms",
            2,
            "--port",
            0,
            "--out",
            root / "server",
        ],
        env=env,
    )
    try:  # run from the scratch folder with a relative --out, so the JSON kept in results names no machine path
        load = subprocess.run(
            [
                sys.executable,
                "-m",
                "workbench",
                "load",
                "--url",
                server.url,
                "--example",
                "text",
                "--rate",
                str(rate),
                "--duration",
                str(duration_s),
                "--json",
                "--out",
                "client",
            ],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=root,
            env=importable,
        )
    finally:
        server_exit, _, server_err = server.stop()
    client = (
        json.loads(load.stdout)
        if load.stdout.strip().startswith("{")
        else {"stdout": load.stdout[-2000:]}
    )
    run = load_run(root / "server")
    ok = run.requests[run.requests["ok"].astype(bool)]
    with tarfile.open(out / "served.tar.gz", "w:gz") as tar:
        for d in ("server", "client"):
            if (root / d).exists():
                tar.add(root / d, arcname=d)
    return {
        "load_exit": load.returncode,
        "load_stderr": load.stderr[-1500:],
        "server_exit": server_exit,
        "server_stderr": server_err[-1500:],
        "server_device": run.meta.config.device,
        "server_requests": len(run.requests),
        "server_ok": len(ok),
        "batch_sizes": ok["batch_size"].value_counts().sort_index().to_dict()
        if "batch_size" in ok
        else None,
        "client": client,
    }


def markdown(results: dict) -> str:
    lines = [
        f"# GPU validation: {results['env']['gpu']}, torch {results['env']['torch']}, {results['env']['date']}",
        "",
    ]
    for key in ("timing_truth", "launch_bound", "graphs_vs_eager", "transfers", "precision"):
        rows = results.get(key) or []
        if not rows:
            continue
        cols = list(rows[0])
        lines += [f"## {key}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in rows:
            lines.append(
                "| "
                + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r.values())
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-out")))
    parser.add_argument("--skip", nargs="*", default=[], help="steps to skip")
    parser.add_argument("--only", nargs="*", help="run only these steps")
    parser.add_argument(
        "--truth",
        nargs="*",
        default=["text:1", "text:64", "image:1", "image:64"],
        help="EXAMPLE:BATCH pairs for the timing-truth table",
    )
    parser.add_argument(
        "--cpu-dry-run", action="store_true", help="run the analysis steps on CPU, tiny counts"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    global DEVICE, SCALE
    if args.cpu_dry_run:
        DEVICE, SCALE = "cpu", 10
        args.skip += [
            "tests",
            "transfers",
            "recorded_runs",
            "graphs_vs_eager",
        ]  # "served" runs on CPU too
    elif not torch.cuda.is_available():
        log("no CUDA GPU here")
        return 1
    results = {"env": environment()}
    pairs = [(p.split(":")[0], int(p.split(":")[1])) for p in args.truth]
    steps = [
        ("tests", lambda: run_cuda_tests(args.out)),
        ("timing_truth", lambda: timing_truth(pairs)),
        ("launch_bound", launch_bound),
        ("graphs_vs_eager", graphs_vs_eager),
        ("transfers", transfers),
        ("precision", precision_table),
        ("recorded_runs", lambda: record_runs(args.out)),
        ("served", lambda: served(args.out)),
    ]
    for name, step in steps:
        if name in args.skip or (args.only and name not in args.only):
            continue
        t0 = time.perf_counter()
        try:
            results[name] = step()
        except Exception as exc:  # keep going: one broken step must not lose the others' results
            import traceback

            results[name + "_error"] = traceback.format_exc()
            log(f"STEP {name} FAILED: {exc!r}")
        log(f"step {name}: {time.perf_counter() - t0:.1f} s")
        (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    (args.out / "results.md").write_text(markdown(results))
    log(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
