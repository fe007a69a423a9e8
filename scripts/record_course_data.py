"""Record the data of notebooks 10-13 that a live run in class would take too long for: ``data/course/``.

    python scripts/record_course_data.py [--only arrivals,planted,audit,compile,redis,snapshot,continuous]

- ``arrivals_bursty.csv``: 8,000 arrival times (``arrival_us``) of bursty traffic
  (Poisson bursts of 50 ms every 200 ms, 170 requests/s on average, seed 1): the
  "production" arrival file notebook 10 replays against Poisson at the same rate.
- ``text-cpu-bs1-fp32-len256/``: the planted bottleneck of notebook 10 (the text
  example at batch 1 padding every text to 256 tokens), 200 measured requests, one
  torch thread, no trace.
- ``audit_try.json``: ``python -m workbench audit RUN --try --try-requests 40 --json``
  of that run (each candidate measured interleaved, with its output agreement).
- ``compile.json``: :func:`workbench.examples._course.compile_cost` (eager against
  ``torch.compile``; the compile takes tens of seconds on two cores).
- ``redis_l2.json``: :func:`workbench_redis.course.cache_levels` against a
  throwaway ``redis-server`` (needs one installed).
- ``snapshot-closed/`` and ``snapshot-paced/``: notebook 13's pipeline
  (:func:`workbench.examples._course.snapshot_pipeline`: a lock held 30 ms every 250 ms, cyclic
  records for the collector) at batch 1, one torch thread, no trace: 6,000 requests back to back,
  then Poisson arrivals at 100 requests/s for at least 62 s (over 5,661 requests: p99.9 gets its
  interval). No stack sampling (the notebook samples its live run). About 80 s.
- ``generate-continuous/{precision}-r{rate}/``: ``load --example generate`` with continuous batching
  (max_num_seqs 8, max_batched_tokens 512, 32-token prompts and answers, one torch thread), 200
  Poisson requests (at most 10 s of them: 174 at 20/s) at 20, 40 and 80 requests/s, in fp32, bf16 and int8: notebook 14's and the
  generative explorer's step models (``load.continuous.step_model``) and measured points. About 2 min.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "data" / "course"
PLANTED = "text-cpu-bs1-fp32-len256"
PARTS = ("arrivals", "planted", "audit", "compile", "redis", "snapshot", "continuous")
SNAPSHOT_RATE_RPS = 100
CONTINUOUS_RATES_RPS = (20, 40, 80)


def write_json(path: Path, data) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
    tmp.replace(path)


def arrivals() -> None:
    from workbench.batching.arrivals import Arrivals

    times = Arrivals("bursty", rate_rps=170, count=8000, seed=1, on_ms=50, off_ms=150).times_ns()
    lines = ["arrival_us", *(str(int(t) // 1000) for t in times)]
    (OUT / "arrivals_bursty.csv").write_text("\n".join(lines) + "\n")


def planted() -> None:
    from workbench import PipelineConfig, profile

    config = PipelineConfig(batch_size=1, threads=1, options={"max_len": 256})
    run = profile("text", config, requests=200, warmup=10, traced=0)
    run.save(OUT / PLANTED)


def audit() -> None:
    command = [sys.executable, "-m", "workbench", "audit", f"data/course/{PLANTED}", "--try",
               "--try-requests", "40", "--json"]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
    write_json(OUT / "audit_try.json", json.loads(done.stdout))


def compile_() -> None:
    from workbench.examples._course import compile_cost

    write_json(OUT / "compile.json", compile_cost())


def redis() -> None:
    from workbench_redis.course import cache_levels, local_redis

    with local_redis() as url:
        if url is None:
            sys.exit("redis-server is not installed: apt-get install redis-server")
        write_json(OUT / "redis_l2.json", cache_levels(url))


def snapshot() -> None:
    from workbench import PipelineConfig, profile
    from workbench.examples._course import snapshot_pipeline, stop_background_jobs
    from workbench.runner import Pace

    config = PipelineConfig(batch_size=1, threads=1)
    paced = Pace(rate_rps=SNAPSHOT_RATE_RPS, min_duration_s=62)
    for name, kwargs in (("closed", {"requests": 6000}),
                         ("paced", {"requests": 200, "pace": paced, "max_duration_s": 75})):  # fmt: skip
        try:
            # no stack sampler: the recording is the distribution (and the collector's pauses, timed by
            # gc callbacks); the notebook's live run shows what the sampler names
            run = profile(
                snapshot_pipeline, config, warmup=50, traced=0, sample_stacks=False, **kwargs
            )
        finally:
            stop_background_jobs()
        run.save(OUT / f"snapshot-{name}")


def continuous() -> None:
    for precision in ("fp32", "bf16", "int8"):
        for rate in CONTINUOUS_RATES_RPS:
            out = OUT / "generate-continuous" / f"{precision}-r{rate}"
            shutil.rmtree(out, ignore_errors=True)
            command = [sys.executable, "-m", "workbench", "load", "--example", "generate",
                       "--precision", precision, "--threads", "1", "--max-num-seqs", "8",
                       "--max-batched-tokens", "512", "--option", "prompt_tokens=32",
                       "--option", "answer_tokens=32", "--rate", str(rate), "--requests", "200",
                       "--out", str(out)]  # fmt: skip
            subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts to record")
    parts = parser.parse_args().only.split(",")
    OUT.mkdir(parents=True, exist_ok=True)
    steps = {"arrivals": arrivals, "planted": planted, "audit": audit, "compile": compile_,
             "redis": redis, "snapshot": snapshot, "continuous": continuous}  # fmt: skip
    for part in parts:
        steps[part]()
        print(f"recorded {part}")


if __name__ == "__main__":
    main()
