"""Reading another thread's CPU time: what each counter costs, and what it does to the sampler's cadence.

Question (issue 38, the CI run that sampled an 80-ms spinning stage once): the all-thread sampler
reads every Python thread's CPU time at each wake-up (``workbench.sampling.thread_cpu_reader``).
``schedstat`` and ``stat`` read a ``/proc`` file per thread, and a file read lets go of the GIL;
``thread_clock`` reads the kernel's per-thread CPU clock and keeps it. Two measures per reader:

* ``read_us``: one read, averaged over ``--reads`` reads of each of ``--threads`` idle threads;
* ``samples_per_s``: the sampler (``StackSampler``, 5 ms) around a stage that spins in pure Python
  for ``--spin-s`` seconds, with the idle threads beside it: its samples of the stage per second
  (200 at most).

Run: ``python benchmarks/bench_thread_cpu.py [--threads 4] [--reads 2000] [--spin-s 2] [--md PATH]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.sampling import (  # noqa: E402
    StackSampler,
    _schedstat_ns,
    _stat_ns,
    _thread_clock_ns,
)
from workbench.timing import time_request  # noqa: E402

READERS = {"thread_clock": _thread_clock_ns, "schedstat": _schedstat_ns, "stat": _stat_ns}


def read_us(reader, natives: list[int], reads: int) -> float:
    start = time.perf_counter()
    for _ in range(reads):
        for native in natives:
            reader(native)
    return (time.perf_counter() - start) / (reads * len(natives)) * 1e6


def samples_per_s(reader, spin_s: float) -> float:
    def spin(x):
        end = time.perf_counter() + spin_s
        n = 0
        while time.perf_counter() < end:
            n = (n * 31 + 7) % 1000003
        return x

    with StackSampler(interval_s=0.005, cpu_reader=reader) as sampler:
        time_request(["spin"], [spin], 0)
    return len(sampler.samples_ns) / spin_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=4, help="idle threads beside the stage")
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--spin-s", type=float, default=2.0)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args()
    stop = threading.Event()
    idle = [threading.Thread(target=stop.wait, daemon=True) for _ in range(args.threads)]
    for t in idle:
        t.start()
    natives = [t.native_id for t in idle]
    rows = []
    try:
        for name, reader in READERS.items():
            try:
                reader(threading.get_native_id())
            except OSError as exc:
                print(f"{name}: not here ({exc})", file=sys.stderr)
                continue
            rows.append(
                (name, read_us(reader, natives, args.reads), samples_per_s(reader, args.spin_s))
            )
    finally:
        stop.set()
    load = os.getloadavg()[0]
    lines = [
        f"`python benchmarks/bench_thread_cpu.py --threads {args.threads} --reads {args.reads} "
        f"--spin-s {args.spin_s:g}`: {args.threads} idle threads beside a stage spinning in pure Python; "
        f"the sampler at 5 ms (200 samples/s at most). Load average {load:.2f} on {os.cpu_count()} cores "
        "at the end.",
        "",
        "| reader | one read (us) | samples of the spinning stage per second |",
        "|---|---|---|",
        *(f"| {n} | {us:.1f} | {sps:.0f} |" for n, us, sps in rows),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
