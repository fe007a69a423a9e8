"""What the served validation's run folders show: service-time drift between runs, and the server's contention.

    python research/served/validate_served.py --work DIR ...
    python research/served/diag_served_work.py DIR [--cells SUBSTRING]

For each cell (a ``served-TAG`` server folder in DIR) whose tag contains
``--cells``: each load run against that server (probe, calibrations, measured
segments), in the order they ran, with its request rate and the service time
p50/mean of its batches (ms); then, over the probe and calibration runs,
batches that started within ``RESPONSE_WINDOW_NS`` of the previous batch's end
against the others (service mean, ms) and the fitted contention costs
(``research/served/contention.py``). A diagnostic, not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from research.served.contention import RESPONSE_WINDOW_NS, batch_features, fit_contention  # noqa: E402
from research.served.validation import _as_load_run  # noqa: E402
from workbench.record import load_run  # noqa: E402


def cell(work: Path, tag: str) -> None:
    server = load_run(work / f"served-{tag}")
    parts = []
    for folder in sorted(work.glob(f"*-{tag}")):
        if folder.name.startswith("served-"):
            continue
        client = load_run(folder)
        run = _as_load_run(server, client.meta.serving.request_id_prefix)
        ok = run.requests[run.requests["ok"]]
        if ok.empty:
            continue
        parts.append((int(ok["arrival_ns"].min()), folder.name.removesuffix(f"-{tag}"), run))
    print(f"== {tag}")
    calibration = []
    for _, name, run in sorted(parts, key=lambda p: p[0]):
        ok = run.requests[run.requests["ok"]]
        span_s = (ok["arrival_ns"].max() - ok["arrival_ns"].min()) / 1e9
        print(
            f"{name:<16} {len(ok):>5} requests, {len(ok) / span_s if span_s else 0:7.1f} req/s, "
            f"service p50 {ok['service_ns'].median() / 1e6:.2f} ms, mean {ok['service_ns'].mean() / 1e6:.2f} ms"
        )
        if not name.startswith("client"):
            calibration.append(run)
    features = pd.concat([batch_features(r.requests) for r in calibration], ignore_index=True)
    after = features["responses"] > 0
    print(
        f"probe + calibrations: {int(after.sum())} batches started within {RESPONSE_WINDOW_NS // 1000} us of the "
        f"previous one's end, service mean {features.loc[after, 'service_ns'].mean() / 1e6:.2f} ms; "
        f"{int((~after).sum())} others, {features.loc[~after, 'service_ns'].mean() / 1e6:.2f} ms"
    )
    fit = fit_contention(calibration)
    print(
        f"fitted: {fit.per_arrival_ns / 1e6:.3f} ms per arrival, {fit.per_response_ns / 1e6:.3f} ms per response "
        f"({fit.batches} batches)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--cells", default="", help="only cells whose tag contains this")
    args = ap.parse_args()
    tags = sorted(
        p.name.removeprefix("served-") for p in args.work.glob("served-*") if args.cells in p.name
    )
    if not tags:
        raise SystemExit(f"no served-* folder in {args.work} matching {args.cells!r}")
    for tag in tags:
        cell(args.work, tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
