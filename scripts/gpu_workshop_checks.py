"""The workshop's CUDA paths on a real GPU (issue 30; issue 25's slow-request traces on CUDA).

Run by ``scripts/gpu_workshop_checks.sh`` on the device machine after it has
recorded a fresh text run on the GPU (``--run``) and a live batcher run
(``--load``, the JSON of ``load --json``). Each check prints one line,
``ok``/``FAIL`` and the figures it read; the lines also go to ``--md``:

- the record names the card it ran on, and the explorer and the static page
  label the run "recorded on <card>" from that record (never from text);
- the explorer draws the CUDA run with a GPU work panel (kernels and copies)
  under the flame graph, on a machine with the GPU and from the recorded run;
- the explorer's live path on CUDA (a configuration with no recorded run)
  profiles on the GPU and draws;
- the live batcher's queueing split on CUDA: batch wait ends when the batch
  closes (p99 at most the max wait), the wait for a busy executor is its own
  part, and the parts add up to the request;
- the traced slow requests and the cold start of the fresh trace (``show`` and
  ``analyze``'s JSON, read by the shell script into ``--show``/``--analyze``).

    python scripts/gpu_workshop_checks.py --run R --load L.json --show S.json --analyze A.json --md OUT.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LINES: list[str] = []


def check(name: str, ok: bool, detail: str) -> bool:
    line = f"{'ok  ' if ok else 'FAIL'} {name}: {detail}"
    print(line, flush=True)
    LINES.append(f"- {line}")
    return ok


def record_names_card(run: Path) -> str:
    from workbench.record import load_run

    meta = load_run(run).meta
    card = meta.env.device_name or ""
    check(
        "record names the card",
        "NVIDIA" in card,
        f"env.device_name={card!r}, torch {meta.env.torch}",
    )
    return card


def explorer_recorded(run: Path, card: str, device: str) -> None:
    from workbench.widgets import LatencyExplorer

    t0 = time.perf_counter()
    ex = LatencyExplorer("text", runs=run.parent, device=device, threads="recorded").wait(300)
    took = time.perf_counter() - t0
    status = ex.status.value
    check(
        "explorer labels the recorded run from its record",
        f"recorded on {card}" in status or card in status,
        f"{status!r} ({took:.1f} s)",
    )
    fig = ex.flame_pane.figure
    gpu = [t for t in fig.data if getattr(t, "name", "") == "GPU work"]
    kernels = sum(
        1 for label in (gpu[0].labels if gpu else ()) if label and not str(label).startswith("gpu:")
    )
    check(
        "flame graph of the CUDA run has its GPU panel",
        bool(gpu) and kernels > 0,
        f"{len(fig.data)} traces, GPU panel boxes {kernels}",
    )
    devices = [o if isinstance(o, str) else o[0] for o in ex.device.options]
    check("device choices", any("cuda" in d for d in devices), f"{devices}")


def explorer_live(device: str) -> None:
    from workbench.widgets import LatencyExplorer, LiveRuns

    with tempfile.TemporaryDirectory() as empty:
        t0 = time.perf_counter()
        ex = LatencyExplorer(
            "text", runs=empty, device=device, batch_size=2, live=LiveRuns(requests=20, traced=1)
        ).wait(300)
        took = time.perf_counter() - t0
    status = ex.status.value
    fig = ex.flame_pane.figure
    gpu = [t for t in fig.data if getattr(t, "name", "") == "GPU work"]
    check(
        "explorer live profile on CUDA",
        device in status and "not run" not in status and bool(gpu),
        f"{status!r}; GPU panel {'drawn' if gpu else 'missing'} ({took:.1f} s)",
    )


def static_page(run: Path, card: str) -> None:
    from workbench_room.static import export_dashboard

    with tempfile.TemporaryDirectory() as out:
        page = export_dashboard(Path(out) / "page", run.parent)
        html = page.read_text()
    check(
        "static page names the card from the record", card in html, f"{len(html) / 1e6:.1f} MB page"
    )


def queueing(load_json: Path, max_wait_ms: float) -> None:
    doc = json.loads(load_json.read_text())
    parts = {k: doc[k] for k in ("queue_wait", "batch_wait", "service", "end_to_end")}
    bw, qw = parts["batch_wait"], parts["queue_wait"]
    check(
        "batch wait ends when the batch closes",
        bw["p99_ms"] <= max_wait_ms + 1e-6,
        f"batch wait p50/p99/max {bw['p50_ms']:.3f}/{bw['p99_ms']:.3f}/{bw['max_ms']:.3f} ms under a "
        f"{max_wait_ms} ms max wait; executor (queue) wait p50/p99 {qw['p50_ms']:.3f}/{qw['p99_ms']:.3f} ms",
    )
    parts_ms = sum(parts[k]["mean_ms"] for k in ("queue_wait", "batch_wait", "service"))
    e2e_ms = parts["end_to_end"]["mean_ms"]
    check(
        "queue + batch wait + service add up to the request",
        abs(parts_ms - e2e_ms) < 0.001,
        f"means {parts_ms:.4f} vs end to end {e2e_ms:.4f} ms over {parts['end_to_end']['count']} requests, "
        f"{doc['throughput_rps']:.0f} req/s, mean batch {doc['mean_batch_size']:.2f}",
    )


def tail_and_cold_start(show_json: Path, analyze_json: Path) -> None:
    show = json.loads(show_json.read_text())
    stacks, tail = show.get("stacks") or {}, show.get("tail") or {}
    check(
        "show --json of the fresh CUDA run: stacks of the slow requests",
        bool(stacks.get("samples")),
        f"tail: {tail.get('headline')!r}; stacks: {stacks.get('headline')!r}, {stacks.get('samples')} samples "
        f"every {stacks.get('interval_ms')} ms; roles {show.get('stage_roles')}",
    )
    an = json.loads(analyze_json.read_text())
    launches = an.get("launches", {})
    cold = launches.get("cold_start")
    check(
        "analyze splits the cold start off the steady state",
        cold is not None,
        f"cold_start {cold}; verdict {an.get('launch_verdict')!r}",
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--load", type=Path, required=True)
    p.add_argument("--max-wait-ms", type=float, default=2.0)
    p.add_argument("--show", type=Path, required=True)
    p.add_argument("--analyze", type=Path, required=True)
    p.add_argument("--md", type=Path, required=True)
    p.add_argument(
        "--device", default="cuda", help="cpu: a dry run of the script here (the card checks fail)"
    )
    args = p.parse_args()
    card = ""
    for name, step in (
        ("record", lambda: record_names_card(args.run)),
        ("explorer recorded", lambda: explorer_recorded(args.run, card, args.device)),
        ("explorer live", lambda: explorer_live(args.device)),
        ("static page", lambda: static_page(args.run, card)),
        ("queueing", lambda: queueing(args.load, args.max_wait_ms)),
        ("tail and cold start", lambda: tail_and_cold_start(args.show, args.analyze)),
    ):
        try:
            got = step()
            if name == "record":
                card = got
        except Exception as exc:  # one broken check must not hide the others' results
            check(name, False, f"{type(exc).__name__}: {exc}")
    args.md.write_text("\n".join(LINES) + "\n")
    return 0 if all(line.startswith("- ok") for line in LINES) else 1


if __name__ == "__main__":
    sys.exit(main())
