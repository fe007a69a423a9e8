"""Regenerate cpu_stages.pt.trace.json.gz: a small real torch.profiler trace on the CPU.

Two profiler steps of a tiny model, each request wrapped in the workbench's stage
ranges (``record_function(stage_range_name(...))``), so the trace analysis can be
tested on a real CPU-only trace with stages. Run from the repo root:

    python tests/data/traces/make_cpu_trace.py
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
OUT = HERE / "cpu_stages.pt.trace.json.gz"


def main() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    from workbench.naming import stage_range_name

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).eval()
    raw = torch.randn(8, 16)
    tmp = HERE / "_cpu_trace.json"
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=0, active=3, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(tmp)),
    ) as prof:
        for _ in range(3):
            with torch.no_grad():
                with record_function(stage_range_name("preprocess")):
                    x = (raw - raw.mean()) / raw.std()
                with record_function(stage_range_name("forward")):
                    y = model(x)
                with record_function(stage_range_name("postprocess")):
                    y.softmax(dim=1).argmax(dim=1).tolist()
            prof.step()
    raw_text = tmp.read_bytes()  # kept byte for byte: re-dumping floats would change ts digits
    tmp.unlink()
    OUT.write_bytes(gzip.compress(raw_text, mtime=0))
    print(
        f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(json.loads(raw_text)['traceEvents'])} events)"
    )


if __name__ == "__main__":
    main()
