"""What sampling the stacks of every timed request costs: timing-run p50 with and without the sampler.

Question (issue 25, item 1): the timing run samples Python stacks from a
thread (``workbench.sampling.StackSampler``); which sampler, at which
interval, keeps the timing run's p50 within +3 % of an unsampled run? On the
three shipped examples (batch 1, one torch thread), the same pipeline runs
``workbench.timing.time_request`` in blocks, modes interleaved block by block:

* ``plain``: no sampler;
* ``thread 1ms`` / ``thread 5ms``: the workbench's sampler thread at that interval;
* ``pyinstrument 1ms``: pyinstrument's in-thread ``setstatprofile`` hook at 1 ms
  (the pinned sampler; its C hook runs on every call and return), its callback
  walking the stack as the workbench's does;
* ``stage-only 5ms`` (issue 38): the sampler without per-thread counters (no CPU reads, no other
  thread recorded, classes from the calls alone), as the sampler was before every thread, every
  sample; ``thread 5ms`` is the all-thread sampler (thread CPU-clock reads, every thread's rows);
* ``pyinstrument default``: ``pyinstrument.Profiler()`` with its defaults (1 ms), as a user runs it;
* ``py-spy idle`` / ``py-spy gil``: ``py-spy record --pid <this process> --rate 200 --idle`` (or
  ``--gil``) sampling from outside, when a ``py-spy`` executable is found (``$PY_SPY`` or ``PATH``;
  ``pip install py-spy``); the block starts 1 s after it attaches.

Per example and mode: end-to-end p50 (ms, ``analysis/stats``) and its ratio to
``plain``; the samples per request of the workbench sampler.

Run: ``python benchmarks/bench_sampler.py [--requests 40] [--blocks 6] [--md PATH] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.analysis.stats import percentile_ns  # noqa: E402
from workbench.sampling import StackSampler  # noqa: E402
from workbench.timing import time_request  # noqa: E402

EXAMPLES = ("tabular", "text", "image")
MODES = (
    "plain",
    "stage-only 5ms",
    "thread 5ms",
    "pyinstrument default",
    "py-spy idle",
    "py-spy gil",
)  # "thread Nms", "thread 1ms", "pyinstrument 1ms" also work


class _PyinstrumentWay:
    """pyinstrument's C hook (``setstatprofile``) calling back every interval with the current frame."""

    def __init__(self, interval_s: float):
        from pyinstrument.low_level.stat_profile import setstatprofile

        self._set, self.interval_s, self.samples = setstatprofile, interval_s, 0
        self._probe = StackSampler(
            interval_s
        )  # its stack walk, so both ways do the same work per sample

    def _callback(self, frame, event, arg):
        if self._probe._stage_stack(frame) is not None:
            self.samples += 1

    def __enter__(self):
        self._set(self._callback, self.interval_s)
        return self

    def __exit__(self, *exc):
        self._set(None)


class _PySpy:
    """``py-spy record`` attached to this process from outside, at 200 Hz, until the block ends."""

    def __init__(self, how: str):
        self.how = how

    def __enter__(self):
        exe = os.environ.get("PY_SPY") or shutil.which("py-spy")
        out = Path(tempfile.mkdtemp()) / "py-spy.txt"
        argv = [exe, "record", "--pid", str(os.getpid()), "--rate", "200", f"--{self.how}"]
        self._proc = subprocess.Popen(
            [*argv, "--format", "raw", "-o", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached and sampling before the block is timed
        return self

    def __exit__(self, *exc):
        self._proc.send_signal(signal.SIGINT)
        self._proc.wait(timeout=30)


def available_modes(modes: tuple[str, ...]) -> tuple[str, ...]:
    """The modes this machine can run (py-spy's only with a py-spy executable)."""
    spy = os.environ.get("PY_SPY") or shutil.which("py-spy")
    return tuple(m for m in modes if spy or not m.startswith("py-spy"))


def run_block(pipe, items, mode: str, n: int) -> tuple[list[int], int]:
    names, fns = pipe.stage_names, [s.fn for s in pipe.stages]
    batches = [[next(items)] for _ in range(n)]
    if mode == "plain":
        return [_e2e(time_request(names, fns, b)) for b in batches], 0
    if mode == "stage-only 5ms":
        with StackSampler(0.005, cpu_reader=None) as sampler:
            out = [_e2e(time_request(names, fns, b)) for b in batches]
        return out, len(sampler.samples_ns)
    if mode == "pyinstrument default":
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
        out = [_e2e(time_request(names, fns, b)) for b in batches]
        profiler.stop()
        return out, 0
    if mode.startswith("py-spy"):
        with _PySpy(mode.split()[1]):
            out = [_e2e(time_request(names, fns, b)) for b in batches]
        return out, 0
    if mode.startswith("thread"):
        with StackSampler(float(mode.split()[1][:-2]) / 1e3) as sampler:
            out = [_e2e(time_request(names, fns, b)) for b in batches]
        return out, len(sampler.samples_ns)
    with _PyinstrumentWay(0.001) as way:
        out = [_e2e(time_request(names, fns, b)) for b in batches]
    return out, way.samples


def _e2e(t) -> int:
    return t.end_ns - t.start_ns


def measure(example: str, requests: int, blocks: int, modes: tuple[str, ...] = MODES) -> dict:
    from workbench import PipelineConfig
    from workbench.examples import factory
    from workbench.pipeline import resolve_pipeline

    pipe = resolve_pipeline(factory(example), PipelineConfig(batch_size=1, threads=1))
    pipe.config.apply_threads()
    items = pipe.item_iterator()
    run_block(pipe, items, "plain", 20)  # warm-up
    times = {m: [] for m in modes}
    samples = {m: 0 for m in modes}
    for b in range(blocks):
        order = modes[b % len(modes) :] + modes[: b % len(modes)]  # rotate which mode goes first
        for mode in order:
            t, s = run_block(pipe, items, mode, requests)
            times[mode] += t
            samples[mode] += s
    p50 = {m: percentile_ns(v, 50) / 1e6 for m, v in times.items()}
    return {
        "example": example,
        "requests_per_mode": requests * blocks,
        "p50_ms": p50,
        "ratio": {m: p50[m] / p50["plain"] for m in modes},
        "samples_per_request": {m: samples[m] / (requests * blocks) for m in modes},
    }


def markdown(
    rows: list[dict], argv: list[str], load: tuple[float, float], modes: tuple[str, ...] = MODES
) -> str:
    lines = [
        f"## {', '.join(modes[1:])} against plain",
        "",
        f"`python benchmarks/bench_sampler.py {' '.join(argv)}` (batch 1, torch threads 1, modes interleaved "
        f"by block, the first mode rotating). Host: {os.cpu_count()} cores, load average {load[0]:.1f} before, "
        f"{load[1]:.1f} after"
        + (
            " (**busy**: other processes shared the cores; ratios indicative)"
            if max(load) > 0.5 * (os.cpu_count() or 1)
            else ""
        )
        + ".",
        "",
        "| example | "
        + " | ".join(f"{m} p50 ms" for m in modes)
        + " | "
        + " | ".join(f"{m} / plain" for m in modes[1:])
        + " | samples/request |",
        "|---" * (2 * len(modes) + 1) + "|",
    ]
    for r in rows:
        lines.append(
            f"| {r['example']} | "
            + " | ".join(f"{r['p50_ms'][m]:.3f}" for m in modes)
            + " | "
            + " | ".join(f"{r['ratio'][m]:.3f}x" for m in modes[1:])
            + " | "
            + ", ".join(f"{m} {r['samples_per_request'][m]:.1f}" for m in modes[1:])
            + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=40, help="requests per block")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--examples", nargs="+", default=list(EXAMPLES))
    parser.add_argument("--modes", nargs="+", default=list(MODES[1:]), help="besides plain")
    parser.add_argument("--md", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    before = os.getloadavg()[0]
    modes = available_modes(("plain", *args.modes))
    rows = [measure(e, args.requests, args.blocks, modes) for e in args.examples]
    load = (before, os.getloadavg()[0])
    text = markdown(rows, list(argv if argv is not None else sys.argv[1:]), load, modes)
    print(text)
    if args.md:  # appended: each run is kept
        head = (
            ""
            if args.md.is_file()
            else "# Stack sampling of every timed request: what it costs\n\n"
        )
        with args.md.open("a") as f:
            f.write(head + text + "\n")
    if args.json:
        previous = json.loads(args.json.read_text()) if args.json.is_file() else []
        previous = previous if isinstance(previous, list) else [previous]
        args.json.write_text(
            json.dumps(
                previous + [{"rows": rows, "load_average": load, "when": time.time()}], indent=1
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
