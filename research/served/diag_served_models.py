"""Which part of the served validation's error is the service model's: alternative models on its run folders.

    python research/served/validate_served.py --work DIR ...
    python research/served/diag_served_models.py DIR [--cells SUBSTRING] [--replications 20]
    python research/served/diag_served_models.py DIR --segments [--cells SUBSTRING]

Re-simulates every cell of a served validation from its kept run folders, no
server needed, with the table's ``contention`` and ``matched`` models (which
it reproduces), ``phases`` (the table's too) and three more:

* **oracle**: the measured segments' own batch service times, each with its
  dispatch gap as the served models have it, drawn independently: what is
  left is the error of the queueing model and of independent draws, not of the
  service times.
* **oracle-seq**: the same samples, drawn in the measured sequence's rank order
  (``simulate_served(..., ranks=...)``): slow phases kept together.
* **correlated**: ``matched``'s samples, drawn in the rank order of the
  calibration batches they come from (contention costs fitted out first): a
  prediction, using only the runs made before each measured segment's cell.

It also compares the live measurement with itself: the batcher's p50 and p99
of the first half of the segments against the second, and of the even ones
against the odd (0+1 vs 2+3 and 0+2 vs 1+3 with four). A cell whose halves
differ by more than the goals under both splits cannot be judged against them
by any model at this run length (``halves``: the worse split's difference).

``--segments`` prints, instead, each measured segment's batcher p99 and its
longest batch (service + dispatch gap), ms: where a cell's tail was made.

A diagnostic, not a test: it prints one line per cell and the pass counts.
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

from research.served.contention import (  # noqa: E402
    batch_features,
    fit_contention,
    service_ranks,
    without_contention,
)
from research.served.validation import (  # noqa: E402
    CALIBRATION_LOADS,
    cell_runs,
    contention_costs,
    served_models,
    served_phases,
    simulate_segments,
)
from validate_batching import GOALS  # noqa: E402
from workbench.batching.policy import BatchPolicy  # noqa: E402
from workbench.batching.service_model import ServiceModel, service_model_from_runs  # noqa: E402
from workbench.record import load_run  # noqa: E402

MODELS = ("contention", "matched", "phases", "oracle", "oracle-seq", "correlated")
COLUMNS = (*MODELS, "halves")


def threaded_model(root: Path, example: str) -> ServiceModel:
    """``validate_batching.threaded_model`` rebuilt from its kept folders (profiles and threaded load runs)."""
    profiled = service_model_from_runs([load_run(p) for p in sorted((root / example).glob("bs*"))])
    runs = [load_run(p) for p in sorted((root / example).glob("threaded-bs*"))]
    measured = service_model_from_runs(runs, min_batches=60)
    return ServiceModel.from_samples({**profiled.samples, **measured.samples}, pipeline=example)


def parse_tag(tag: str) -> tuple[str, BatchPolicy, float]:
    example, mb, w, _process, load = tag.split("-")
    return example, BatchPolicy(int(mb.removeprefix("mb")), float(w.removeprefix("w"))), float(load)


def base_ranks(runs, costs: dict) -> np.ndarray:
    """Rank sequence of ``runs``' batches (in run order, then start order) after the contention costs."""
    f = pd.concat([batch_features(r.requests) for r in runs], ignore_index=True)
    base = (
        f["service_ns"]
        - costs["per_arrival_ns"] * f["arrivals"]
        - costs["per_response_ns"] * f["responses"]
    )
    return service_ranks(f.assign(service_ns=base))


def batcher_ns(runs) -> np.ndarray:
    ok = pd.concat([r.requests[r.requests["ok"]] for r in runs], ignore_index=True)
    return (ok["batch_wait_ns"] + ok["queue_wait_ns"] + ok["service_ns"]).to_numpy()


def halves(measured: list) -> dict:
    """The live run against itself: per quantile, the larger relative difference of two splits of the segments
    (first half vs second, even vs odd), and whether both are within the goals."""
    half = len(measured) // 2
    splits = [
        (batcher_ns(a), batcher_ns(b))
        for a, b in ((measured[:half], measured[half:]), (measured[0::2], measured[1::2]))
    ]
    out = {}
    for q, pct in (("p50", 50), ("p99", 99)):
        diffs = [
            (np.percentile(a, pct) - np.percentile(b, pct)) / np.percentile(b, pct)
            for a, b in splits
        ]
        worst = max(diffs, key=abs)
        out[f"halves_{q}"] = (float(worst), all(abs(d) <= GOALS[q] for d in diffs))
    return out


def cell(root: Path, tag: str, threaded: ServiceModel, replications: int) -> dict:
    example, policy, load = parse_tag(tag)
    measured, probe, by_load = cell_runs(root, tag)
    calibration = [probe, *(run for runs in by_load for run in runs)]
    fitted = fit_contention(calibration)
    costs = contention_costs(fitted)
    phases = served_phases(calibration, fitted)
    models = served_models(example, threaded, load, calibration, by_load, fitted, phases)
    own_features = pd.concat([batch_features(r.requests) for r in measured], ignore_index=True)
    own = {
        b: np.sort(v) for b, v in without_contention(own_features, 0.0, 0.0).items()
    }  # service + dispatch gap
    oracle = ServiceModel.from_samples({**models["matched"].samples, **own}, pipeline=example)
    own_ranks = service_ranks(
        own_features.assign(service_ns=own_features["service_ns"] + own_features["dispatch_gap_ns"])
    )
    nearest = by_load[int(np.argmin([abs(load - x) for x in CALIBRATION_LOADS]))]
    draws = {
        "contention": (models["contention"], None, None, costs),
        "matched": (models["matched"], None, None, costs),
        "phases": (models["phases"], None, phases, costs),
        "oracle": (oracle, None, None, None),
        "oracle-seq": (oracle, own_ranks, None, None),
        "correlated": (models["matched"], base_ranks(nearest, costs), None, costs),
    }
    live = batcher_ns(measured)
    schedules = [np.sort(r.requests["arrival_ns"].to_numpy(dtype=np.int64)) for r in measured]
    row = {
        "tag": tag,
        "live_p50_ms": np.percentile(live, 50) / 1e6,
        "live_p99_ms": np.percentile(live, 99) / 1e6,
    }
    row |= halves(measured)
    for name, (model, ranks, speed, model_costs) in draws.items():
        sim = simulate_segments(model, schedules, policy, replications, ranks, speed, model_costs)
        for q, pct in (("p50", 50), ("p99", 99)):
            err = (np.percentile(sim, pct) / 1e6 - row[f"live_{q}_ms"]) / row[f"live_{q}_ms"]
            row[f"{name}_{q}"] = (float(err), abs(err) <= GOALS[q])
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--cells", default="", help="only cells whose tag contains this")
    ap.add_argument("--replications", type=int, default=20)
    ap.add_argument(
        "--segments", action="store_true", help="per measured segment: batcher p99, longest batch"
    )
    args = ap.parse_args()
    tags = sorted(
        p.name.removeprefix("served-") for p in args.work.glob("served-*") if args.cells in p.name
    )
    if not tags:
        raise SystemExit(f"no served-* folder in {args.work} matching {args.cells!r}")
    if args.segments:
        for tag in tags:
            measured = cell_runs(args.work, tag)[0]
            parts = []
            for run in measured:
                f = batch_features(run.requests)
                parts.append(
                    f"{np.percentile(batcher_ns([run]), 99) / 1e6:.1f}/"
                    f"{(f['service_ns'] + f['dispatch_gap_ns']).max() / 1e6:.1f}"
                )
            print(f"{tag:<34} p99/longest batch ms per segment: {'  '.join(parts)}")
        return 0
    threaded = {}
    rows = []
    print(f"{'cell':<34} {'live p50/p99 ms':>16}  " + "  ".join(f"{m:>18}" for m in COLUMNS))
    for tag in tags:
        example = tag.split("-")[0]
        threaded.setdefault(example, threaded_model(args.work, example))
        row = cell(args.work, tag, threaded[example], args.replications)
        rows.append(row)
        print(
            f"{tag:<34} {row['live_p50_ms']:7.2f}/{row['live_p99_ms']:<8.2f}  "
            + "  ".join(
                f"{row[f'{m}_p50'][0] * 100:+5.0f}{'' if row[f'{m}_p50'][1] else '*'} {row[f'{m}_p99'][0] * 100:+5.0f}"
                f"{'' if row[f'{m}_p99'][1] else '*'}".rjust(18)
                for m in COLUMNS
            ),
            flush=True,
        )
    print(
        "passed (p50, p99), * marks a miss: "
        + "; ".join(
            f"{m} {sum(r[f'{m}_p50'][1] for r in rows)}/{len(rows)}, {sum(r[f'{m}_p99'][1] for r in rows)}/{len(rows)}"
            for m in COLUMNS
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
