"""Where the served batcher loses time that the simulator does not: close delay and dispatch gap.

    python research/served/diag_served_gaps.py DIR [--cells SUBSTRING]

DIR is the ``--work`` folder of ``research/served/validate_served.py`` (as
for ``diag_served_models.py``). For each cell's measured segments, as the
server timed them, every batch is compared with the simulator's rules
(:func:`workbench.batching.simulator.batch_loop`, one executor):

* **close delay**: the batch's close minus the rule's close, ``max(first
  arrival + max wait (or the max-batch-th arrival), previous batch's start)``.
* **dispatch gap**: the batch's start minus ``max(its close, previous batch's
  end)``: time with a closed batch waiting and the executor free, which the
  simulator takes as 0. As the served models have it:
  :func:`research.served.contention.batch_features`.
* **rule size**: how many requests the rule would have put in the batch, given
  the live batch's own first request and the live close.

Prints per cell p50/p99/max of both (us), the fraction of batches whose size
differs from the rule's, and the share of the live batcher end to end (mean)
that the two account for. A diagnostic, not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from research.served.contention import batch_features  # noqa: E402
from research.served.diag_served_models import parse_tag  # noqa: E402
from research.served.validation import cell_runs  # noqa: E402


def batches_of(requests) -> dict[str, np.ndarray]:
    """Per batch of one served segment (start order): first arrival, size, close, start (int64 ns)."""
    req = requests[(requests["batch"] >= 0) & requests["ok"]].sort_values("arrival_ns")
    close = req["arrival_ns"] + req["batch_wait_ns"]
    g = req.assign(close_ns=close, start_ns=close + req["queue_wait_ns"]).groupby("batch")
    b = g.agg(
        first_ns=("arrival_ns", "min"),
        size=("batch", "size"),
        close_ns=("close_ns", "max"),
        start_ns=("start_ns", "max"),
    ).sort_values("start_ns")
    return {c: b[c].to_numpy(dtype=np.int64) for c in b.columns}


def closes(requests, max_batch_size: int, max_wait_ns: int) -> dict[str, np.ndarray]:
    """Close delay (ns), size and rule size per batch after the first: the batcher's closes against the rule."""
    b = batches_of(requests)
    arrivals = np.sort(requests["arrival_ns"].to_numpy(dtype=np.int64))
    first_index = np.searchsorted(arrivals, b["first_ns"], side="left")
    nth = np.minimum(first_index + max_batch_size - 1, len(arrivals) - 1)
    ideal = np.minimum(
        b["first_ns"] + max_wait_ns,
        np.where(
            first_index + max_batch_size - 1 < len(arrivals), arrivals[nth], np.iinfo(np.int64).max
        ),
    )
    prev_start = np.concatenate([[np.iinfo(np.int64).min], b["start_ns"][:-1]])
    rule_size = np.minimum(
        np.searchsorted(arrivals, b["close_ns"], side="right") - first_index, max_batch_size
    )
    return {
        "close_delay_ns": (b["close_ns"] - np.maximum(ideal, prev_start))[1:],
        "size": b["size"][1:],
        "rule_size": rule_size[1:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--cells", default="", help="only cells whose tag contains this")
    args = ap.parse_args()
    tags = sorted(
        p.name.removeprefix("served-") for p in args.work.glob("served-*") if args.cells in p.name
    )
    print(
        f"{'cell':34} {'close delay us p50/p99/max':>28} {'dispatch gap us p50/p99/max':>30} "
        f"{'size != rule':>12} {'share of e2e':>12}"
    )
    for tag in tags:
        _example, policy, _load = parse_tag(tag)
        measured, _probe, _by_load = cell_runs(args.work, tag)
        parts = [
            closes(run.requests, policy.max_batch_size, policy.max_wait_ns) for run in measured
        ]
        c = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        f = pd.concat(
            [batch_features(run.requests) for run in measured], ignore_index=True
        )  # the models' gaps
        ok = [run.requests[run.requests["ok"]] for run in measured]
        e2e = np.concatenate(
            [(r["batch_wait_ns"] + r["queue_wait_ns"] + r["service_ns"]).to_numpy() for r in ok]
        )
        # each request of a batch carries its batch's close delay and dispatch gap
        lost = float(
            np.sum(c["close_delay_ns"].clip(min=0) * c["size"])
            + np.sum(f["dispatch_gap_ns"] * f["size"])
        )

        def q(x):
            return "/".join(f"{v / 1e3:.0f}" for v in np.percentile(x, [50, 99, 100]))

        print(
            f"{tag:34} {q(c['close_delay_ns']):>28} {q(f['dispatch_gap_ns']):>30} "
            f"{np.mean(c['size'] != c['rule_size']):>12.1%} {lost / e2e.sum():>12.1%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
