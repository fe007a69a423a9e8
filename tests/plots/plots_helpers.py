"""Helpers for figure tests: decode plotly's typed arrays, build small exact run tables."""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd

from workbench.analysis.budget import stage_summary
from workbench.record import Run

ORDER = ["parse", "model", "post"]


def decode(value):
    """A plotly array from ``fig.to_dict()`` as a plain list (typed arrays are base64 ``bdata``)."""
    if isinstance(value, dict) and "bdata" in value:
        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        if "shape" in value:
            arr = arr.reshape([int(s) for s in str(value["shape"]).split(",")])
        return arr.tolist()
    if isinstance(value, (np.ndarray, tuple)):
        return list(np.asarray(value).tolist())
    return list(value)


def summary_of(requests: pd.DataFrame, stages: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """``stage_summary`` of a run made of these tables."""
    return stage_summary(Run(meta={"stages": order}, requests=requests, stages=stages))


def make_run(
    durs: dict[str, list[int]], warmup: int = 0, glue_ns: int = 1_000
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Requests and stages tables: request i runs stage s for ``durs[s][i]`` ns, plus ``glue_ns`` between.

    The first ``warmup`` requests are flagged warm-up. End to end = sum of stages + glue.
    """
    n = len(next(iter(durs.values())))
    req_rows, stage_rows = [], []
    t = 0
    for i in range(n):
        start = t
        for k, name in enumerate(durs):
            stage_rows.append((i, name, k, t, durs[name][i], None))
            t += durs[name][i]
        t += glue_ns
        req_rows.append((i, i < warmup, start, t - start, True, None, None, None, 1))
    requests = pd.DataFrame(
        req_rows,
        columns=[
            "request",
            "warmup",
            "start_ns",
            "dur_ns",
            "ok",
            "error_stage",
            "error_type",
            "error_message",
            "batch_size",
        ],
    )
    stages = pd.DataFrame(
        stage_rows,
        columns=["request", "stage", "stage_index", "start_ns", "dur_ns", "device_dur_ns"],
    )
    stages["device_dur_ns"] = stages["device_dur_ns"].astype("Int64")
    return requests, stages


def small_trace(path) -> pd.DataFrame:
    """A one-step traced request, times in ns, loaded through workbench.trace.load_events.

    ProfilerStep#0 [0, 1 ms) -> stage forward [10, 900) us on thread 100:
      aten::linear [20, 50) us -> cudaLaunchKernel [25, 35) us, corr 1 -> gemm kernel [40, 45) us
      aten::add [100, 120) us -> cudaLaunchKernel [105, 110) us, corr 2 -> add kernel [200, 250) us
      cudaMemcpyAsync [300, 308) us, corr 3 -> Memcpy HtoD (Pageable -> Device) [310, 330) us, 2 MB
      cudaMemcpyAsync [400, 406) us, corr 4 -> Memcpy DtoH (Device -> Pinned) [410, 420) us, 0.5 MB
      cudaMemsetAsync [450, 454) us, corr 5 -> memset [460, 462) us, 4096 B
      cudaDeviceSynchronize [500, 600) us
    """
    from workbench.trace import load_events
    from tests.support.synthetic import TraceBuilder

    us = 1_000
    b = TraceBuilder()
    b.annotation("ProfilerStep#0", 0, 1_000 * us)
    b.stage("forward", 10 * us, 890 * us)
    b.op("aten::linear", 20 * us, 30 * us).runtime("cudaLaunchKernel", 25 * us, 10 * us, 1)
    b.kernel("ampere_sgemm_128x64_tn", 40 * us, 5 * us, 1)
    b.op("aten::add", 100 * us, 20 * us).runtime("cudaLaunchKernel", 105 * us, 5 * us, 2)
    b.kernel("vectorized_elementwise_kernel", 200 * us, 50 * us, 2)
    b.runtime("cudaMemcpyAsync", 300 * us, 8 * us, 3)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 310 * us, 20 * us, 3, nbytes=2_000_000)
    b.runtime("cudaMemcpyAsync", 400 * us, 6 * us, 4)
    b.memcpy("Memcpy DtoH (Device -> Pinned)", 410 * us, 10 * us, 4, nbytes=500_000)
    b.runtime("cudaMemsetAsync", 450 * us, 4 * us, 5)
    b.memset(460 * us, 2 * us, 5, nbytes=4096)
    b.runtime("cudaDeviceSynchronize", 500 * us, 100 * us)
    return load_events(b.write(path / "small.pt.trace.json"))


def cpu_only_trace(path) -> pd.DataFrame:
    """Two operators on the host, no runtime calls, no GPU work."""
    from workbench.trace import load_events
    from tests.support.synthetic import TraceBuilder

    b = TraceBuilder()
    b.annotation("ProfilerStep#0", 0, 100_000).op("aten::mm", 1_000, 50_000).op(
        "aten::relu", 60_000, 10_000
    )
    return load_events(b.write(path / "cpu.pt.trace.json"))
