"""Memory of a long interactive session: 100 slider changes of the latency explorer in one process.

    python benchmarks/bench_widget_memory.py [--changes 100] [--example text] [--json PATH]

The explorer cycles through 2 batch sizes x 2 precisions x a few values (a
handful of cache misses that really profile, with a traced request each), and
every ``--remeasure-every`` changes presses "measure here", which profiles
again even though the configuration is cached: the path where torch.profiler
traces, figures and runs could pile up. RSS (psutil) is sampled every 10
changes; after the warm-up (the first visit of every configuration) it must
stay flat. The peer is the same sequence of ``workbench.profile`` calls with
no widget, in the same process after the explorer: the growth the runner and
torch cause on their own. Also reported: the time a cache hit takes to update
the figures (Python side: building the figures and the widget message).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

MB = 1024 * 1024
CONFIGS = [(bs, p) for bs in (1, 4) for p in ("fp32", "int8")]


def rss_mb() -> float:
    gc.collect()
    return psutil.Process(os.getpid()).memory_info().rss / MB


def explorer_session(example: str, changes: int, remeasure_every: int, requests: int) -> dict:
    from workbench.widgets import LatencyExplorer, LiveRuns

    explorer = LatencyExplorer(
        example, live=LiveRuns(requests=requests, warmup=2, traced=1), debounce_s=0, cache_size=8
    )
    explorer.wait()
    first_view = rss_mb()
    samples, hit_ms = [], []
    warm = len(CONFIGS)
    for i in range(changes):
        bs, precision = CONFIGS[i % len(CONFIGS)]
        cached = explorer.cache.get((example, "cpu", bs, precision)) is not None
        started = time.perf_counter()
        explorer.set(batch_size=bs, precision=precision)
        explorer.wait()
        if cached:
            hit_ms.append((time.perf_counter() - started) * 1e3)
        if remeasure_every and i >= warm and i % remeasure_every == 0:
            explorer.rerun_button.click()
            explorer.wait()
        if explorer.message_line.level == "error":
            raise SystemExit(f"explorer error at change {i}: {explorer.message}")
        if (i + 1) % 10 == 0:
            samples.append((i + 1, round(rss_mb(), 1), explorer.profile_calls))
    return {
        "samples": samples,
        "profiles": explorer.profile_calls,
        "cache_entries": len(explorer.cache),
        "hit_ms": hit_ms,
        "warm_index": 1,
        "first_view_mb": first_view,
    }


def peer_session(example: str, profiles: int, requests: int) -> dict:
    from workbench import PipelineConfig, profile

    samples = []
    for i in range(profiles):
        bs, precision = CONFIGS[i % len(CONFIGS)]
        run = profile(
            example,
            PipelineConfig(batch_size=bs, precision=precision),
            requests=requests,
            warmup=2,
            traced=1,
        )
        run.close()  # the run owns its temporary trace folder; drop it as the explorer does
        del run
        if (i + 1) % 5 == 0 or i + 1 == profiles:
            samples.append((i + 1, round(rss_mb(), 1)))
    return {"samples": samples}


def growth(samples: list, start_index: int) -> float:
    """RSS growth (MB) from the sample at start_index to the last one."""
    return round(samples[-1][1] - samples[start_index][1], 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--example", default="text")
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--remeasure-every", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    ours = explorer_session(args.example, args.changes, args.remeasure_every, args.requests)
    peer = peer_session(args.example, ours["profiles"], args.requests)
    ours_growth = growth(ours["samples"], ours["warm_index"])
    peer_growth = growth(peer["samples"], 0)
    hits = ours["hit_ms"]
    print(
        f"latency explorer, example={args.example}, {args.changes} slider changes, "
        f"{ours['profiles']} profiling runs, cache entries {ours['cache_entries']}"
    )
    print(f"{'after change':>12} {'RSS MB':>8} {'profiles':>9}")
    for n, mb, profiles in ours["samples"]:
        print(f"{n:>12} {mb:>8.1f} {profiles:>9}")
    print(
        f"RSS after the first view {ours['first_view_mb']:.1f} MB; growth after warm-up "
        f"(change 20 -> {args.changes}): {ours_growth:+.1f} MB"
    )
    print(
        f"peer (same {ours['profiles']} profile() calls, no widget): RSS {peer['samples'][0][1]:.1f} -> "
        f"{peer['samples'][-1][1]:.1f} MB, growth {peer_growth:+.1f} MB"
    )
    if hits:
        print(
            f"cache hit -> figures updated (Python side): median {statistics.median(hits):.0f} ms, "
            f"max {max(hits):.0f} ms over {len(hits)} hits"
        )
    result = {
        "example": args.example,
        "changes": args.changes,
        "profiles": ours["profiles"],
        "rss_first_view_mb": round(ours["first_view_mb"], 1),
        "explorer_samples": ours["samples"],
        "explorer_growth_after_warmup_mb": ours_growth,
        "peer_samples": peer["samples"],
        "peer_growth_mb": peer_growth,
        "cache_hit_ms": {"median": round(statistics.median(hits), 1), "max": round(max(hits), 1)}
        if hits
        else None,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
