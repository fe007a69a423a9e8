"""Synthetic profiler traces built in code: exact small ones for tests, big ones for benchmarks.

:class:`TraceBuilder` takes times in integer nanoseconds and writes them as exact
decimal microseconds (``1712345678901234.567``), which ``json.dumps`` of a float
could not do. :func:`write_synthetic_trace` streams a realistic trace of any size
(cpu_op -> runtime -> kernel/memcpy/memset chains with correlations and flow
events, ProfilerStep and stage ranges) without holding it in memory.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from workbench.naming import stage_range_name

EPOCH_NS = 1_712_345_678_901_234_567  # an epoch-sized clock: float64 us would lose the ns


def us_text(ns: int) -> str:
    """Exact decimal microseconds of integer nanoseconds: 1234567 -> '1234.567'."""
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(int(ns)), 1000)
    return f"{sign}{whole}" if frac == 0 else f"{sign}{whole}.{frac:03d}"


_NEW = {
    "cpu_op": "cpu_op",
    "runtime": "cuda_runtime",
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "user_annotation": "user_annotation",
}
_OLD = {
    "cpu_op": "Operator",
    "runtime": "Runtime",
    "kernel": "Kernel",
    "memcpy": "Memcpy",
    "memset": "Memset",
    "user_annotation": "user_annotation",
}


@dataclass
class TraceBuilder:
    """Accumulates events; ``schema="2021"`` writes the old categories and ``correlation id``."""

    schema: str = "kineto"
    device_properties: list | None = None
    events: list = field(default_factory=list)
    host_pid: int = 100
    host_tid: int = 100

    def x(
        self, cat: str, name: str, ts_ns: int, dur_ns: int, *, pid=None, tid=None, **args
    ) -> TraceBuilder:
        """A complete event with a raw category and any args."""
        event = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": self.host_pid if pid is None else pid,
            "tid": self.host_tid if tid is None else tid,
            "ts": ts_ns,
            "dur": dur_ns,
        }
        if args:
            event["args"] = args
        self.events.append(event)
        return self

    def _cat(self, kind: str) -> str:
        return (_OLD if self.schema == "2021" else _NEW)[kind]

    def _corr(self, correlation: int | None) -> dict:
        if correlation is None:
            return {}
        return {"correlation id" if self.schema == "2021" else "correlation": correlation}

    def op(self, name: str, ts_ns: int, dur_ns: int, **kw) -> TraceBuilder:
        return self.x(self._cat("cpu_op"), name, ts_ns, dur_ns, **kw)

    def annotation(self, name: str, ts_ns: int, dur_ns: int, **kw) -> TraceBuilder:
        return self.x(self._cat("user_annotation"), name, ts_ns, dur_ns, **kw)

    def stage(self, stage: str, ts_ns: int, dur_ns: int, **kw) -> TraceBuilder:
        return self.annotation(stage_range_name(stage), ts_ns, dur_ns, **kw)

    def runtime(
        self, name: str, ts_ns: int, dur_ns: int, correlation: int | None = None, **kw
    ) -> TraceBuilder:
        return self.x(self._cat("runtime"), name, ts_ns, dur_ns, **self._corr(correlation), **kw)

    def kernel(
        self, name: str, ts_ns: int, dur_ns: int, correlation: int | None, *, device=0, stream=7
    ) -> TraceBuilder:
        return self.x(
            self._cat("kernel"),
            name,
            ts_ns,
            dur_ns,
            pid=device,
            tid=stream,
            device=device,
            stream=stream,
            **self._corr(correlation),
        )

    def memcpy(
        self,
        name: str,
        ts_ns: int,
        dur_ns: int,
        correlation: int | None,
        *,
        nbytes=None,
        device=0,
        stream=7,
    ) -> TraceBuilder:
        extra = {} if nbytes is None else {"bytes": nbytes}
        return self.x(
            self._cat("memcpy"),
            name,
            ts_ns,
            dur_ns,
            pid=device,
            tid=stream,
            device=device,
            stream=stream,
            **self._corr(correlation),
            **extra,
        )

    def memset(
        self, ts_ns: int, dur_ns: int, correlation: int | None, *, nbytes=None, device=0, stream=7
    ) -> TraceBuilder:
        extra = {} if nbytes is None else {"bytes": nbytes}
        return self.x(
            self._cat("memset"),
            "Memset (Device)",
            ts_ns,
            dur_ns,
            pid=device,
            tid=stream,
            device=device,
            stream=stream,
            **self._corr(correlation),
            **extra,
        )

    def to_json(self) -> bytes:
        """The trace as JSON text with exact decimal ``ts``/``dur``."""
        top = {"schemaVersion": 1}
        if self.device_properties is not None:
            top["deviceProperties"] = self.device_properties
        parts = [_event_json(e) for e in self.events]
        head = json.dumps(top)[:-1]
        return f'{head}, "traceEvents": [{",".join(parts)}]}}'.encode()

    def write(self, path: str | os.PathLike) -> Path:
        """Write ``path`` (gzip when it ends in ``.gz``)."""
        path = Path(path)
        data = self.to_json()
        path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
        return path


def _event_json(event: dict) -> str:
    rest = {k: v for k, v in event.items() if k not in ("ts", "dur")}
    text = json.dumps(rest)
    timing = f'"ts": {us_text(event["ts"])}'
    if "dur" in event:
        timing += f', "dur": {us_text(event["dur"])}'
    return "{" + timing + ", " + text[1:]


# --- big realistic traces (benchmarks) --------------------------------------------------

_KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "ampere_sgemm_128x64_tn",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, "
    "(cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
    "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps"
    "<float, float, float, float>, unsigned int, float, 4>)",
]
_OPS = [
    ("aten::linear", "aten::addmm"),
    ("aten::relu", "aten::clamp_min"),
    ("aten::add", None),
    ("aten::conv2d", "aten::cudnn_convolution"),
    ("aten::mean", "aten::sum"),
]


def write_synthetic_trace(path: str | os.PathLike, target_bytes: int, seed: int = 0) -> dict:
    """Stream a realistic kineto trace of at least ``target_bytes`` of JSON to ``path``.

    Returns ``{"bytes", "events", "steps"}``. Host ops nest ``ProfilerStep#N`` ->
    stage range -> op -> child op -> runtime call; each launch has a kernel (or a
    copy/memset) on stream 7 with the same correlation and an ``ac2g`` flow pair.
    """
    rng = random.Random(seed)
    state = {"t": EPOCH_NS, "corr": 1, "ext": 1, "events": 0}
    path = Path(path)
    written, step = 0, 0
    with open(path, "w", encoding="ascii") as out:
        out.write(
            '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Synthetic GPU", '
            '"totalGlobalMem": 85899345920}], "distributedInfo": {"rank": 0}, "displayTimeUnit": "ms", '
            '"traceEvents": [\n'
        )
        first = True
        while written < target_bytes:
            chunk = _step_events(rng, state, step)
            text = (",\n" if not first else "") + ",\n".join(chunk)
            out.write(text)
            written += len(text)
            first = False
            step += 1
        out.write("\n]}\n")
    return {"bytes": path.stat().st_size, "events": state["events"], "steps": step}


def _step_events(rng: random.Random, state: dict, step: int) -> list[str]:
    events: list[str] = []
    start = state["t"]
    for stage in ("preprocess", "forward", "postprocess"):
        s0 = state["t"]
        for _ in range(40 if stage == "forward" else 4):
            _op_chain(rng, state, events, copy=stage != "forward")
        events.append(_host("user_annotation", stage_range_name(stage), s0, state["t"] - s0, state))
        state["t"] += 1_000
    events.append(
        _host("user_annotation", f"ProfilerStep#{step}", start, state["t"] - start, state)
    )
    state["t"] += 5_017
    state["events"] += len(events)
    return events


def _op_chain(rng: random.Random, state: dict, events: list[str], copy: bool) -> None:
    outer, inner = _OPS[rng.randrange(len(_OPS))]
    t0 = state["t"]
    state["t"] += rng.randrange(2_000, 9_000)
    if inner is not None:
        i0 = state["t"]
        state["t"] += rng.randrange(1_000, 4_000)
        _launch(rng, state, events, copy)
        state["t"] += rng.randrange(500, 2_000)
        events.append(_host("cpu_op", inner, i0, state["t"] - i0, state))
    else:
        _launch(rng, state, events, copy)
    state["t"] += rng.randrange(500, 3_000)
    events.append(_host("cpu_op", outer, t0, state["t"] - t0, state))


def _launch(rng: random.Random, state: dict, events: list[str], copy: bool) -> None:
    corr, ts = state["corr"], state["t"]
    dur = rng.randrange(3_000, 12_000)
    gpu_ts = ts + dur + rng.randrange(1_000, 200_000)
    if copy and rng.random() < 0.5:
        name, gpu = "cudaMemcpyAsync", _gpu_copy(rng, corr, gpu_ts)
    elif rng.random() < 0.05:
        name, gpu = (
            "cudaMemsetAsync",
            _gpu_event("gpu_memset", "Memset (Device)", gpu_ts, 1_504, corr, ', "bytes": 4096'),
        )
    else:
        kname = _KERNELS[rng.randrange(len(_KERNELS))]
        extra = (
            ', "registers per thread": 32, "shared memory": 0, "blocks per SM": 1.5, '
            '"warps per SM": 12.0, "grid": [128, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 38'
        )
        name, gpu = (
            "cudaLaunchKernel",
            _gpu_event("kernel", kname, gpu_ts, rng.randrange(1_000, 60_000), corr, extra),
        )
    events.append(
        f'{{"ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": 4242, "tid": 4242, '
        f'"ts": {us_text(ts)}, "dur": {us_text(dur)}, "args": {{"External id": {state["ext"]}, '
        f'"cbid": 211, "correlation": {corr}}}}}'
    )
    events.append(gpu)
    events.append(
        f'{{"ph": "s", "id": {corr}, "pid": 4242, "tid": 4242, "ts": {us_text(ts)}, "cat": "ac2g", "name": "ac2g"}}'
    )
    events.append(
        f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {us_text(gpu_ts)}, "cat": "ac2g", '
        f'"name": "ac2g", "bp": "e"}}'
    )
    state["corr"] += 1
    state["t"] += dur


def _gpu_copy(rng: random.Random, corr: int, ts: int) -> str:
    name, nbytes = rng.choice(
        [("Memcpy HtoD (Pageable -> Device)", 602112), ("Memcpy DtoH (Device -> Pinned)", 4000)]
    )
    return _gpu_event(
        "gpu_memcpy",
        name,
        ts,
        rng.randrange(2_000, 80_000),
        corr,
        f', "bytes": {nbytes}, "memory bandwidth (GB/s)": 7.5',
    )


def _gpu_event(cat: str, name: str, ts: int, dur: int, corr: int, extra: str) -> str:
    return (
        f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": 7, "ts": {us_text(ts)}, '
        f'"dur": {us_text(dur)}, "args": {{"External id": {corr}, "queued": 0, "device": 0, "context": 1, '
        f'"stream": 7, "correlation": {corr}{extra}}}}}'
    )


def _host(cat: str, name: str, ts: int, dur: int, state: dict) -> str:
    state["ext"] += 1
    return (
        f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 4242, "tid": 4242, "ts": {us_text(ts)}, '
        f'"dur": {us_text(dur)}, "args": {{"External id": {state["ext"]}, "Record function id": 0, '
        f'"Ev Idx": {state["ext"]}, "Input Dims": [[64, 1024], [1024]], "Input type": ["float", "float"]}}}}'
    )


# --- the worked example the tests use ------------------------------------------------------


def example_trace(schema: str = "kineto", t0: int = EPOCH_NS, rocm: bool = False) -> TraceBuilder:
    """A small trace with known figures (times relative to ``t0``, in ns):

    ProfilerStep#1 [0, 100k): stage ``forward`` [1k, 60k) holding aten::linear
    [2k, 20k) -> cudaLaunchKernel [5k, 10k) corr 1 -> kernel gemm [30k, 42k) (dev 0,
    stream 7); aten::copy_ [21k, 50k) -> cudaMemcpyAsync [22k, 25k) corr 2 -> HtoD
    Pageable copy [40k, 52k) of 1.2 MB (stream 8) and cudaStreamSynchronize [25k, 49k);
    then cudaLaunchKernel [61k, 62k) corr 3 -> kernel relu [200k, 204k).
    ProfilerStep#2 [300k, 400k): cudaGraphLaunch [310k, 370k) corr 4 -> kernels g1
    [380k, 383k) and g2 [385k, 393k); cudaMemsetAsync [372k, 372.5k) corr 5 -> memset
    [392k, 392.25k) (stream 8). Kernels without launch call (corr 99) on device 1:
    orphan [500k, 502k) and [600k, 601k).
    """
    b = TraceBuilder(
        schema=schema,
        device_properties=[{"id": 0, "name": "Example GPU"}, {"id": 1, "name": "Example GPU"}],
    )
    launch, memcpy, memset_call, sync, graph = (
        (
            "hipLaunchKernel",
            "hipMemcpyAsync",
            "hipMemsetAsync",
            "hipStreamSynchronize",
            "hipGraphLaunch",
        )
        if rocm
        else (
            "cudaLaunchKernel",
            "cudaMemcpyAsync",
            "cudaMemsetAsync",
            "cudaStreamSynchronize",
            "cudaGraphLaunch",
        )
    )
    host = "Host" if rocm else "Pageable"
    k = 1_000
    b.annotation("ProfilerStep#1", t0, 100 * k)
    b.stage("forward", t0 + 1 * k, 59 * k)
    b.op("aten::linear", t0 + 2 * k, 18 * k)
    b.runtime(launch, t0 + 5 * k, 5 * k, correlation=1)
    b.kernel("gemm", t0 + 30 * k, 12 * k, 1)
    b.op("aten::copy_", t0 + 21 * k, 29 * k)
    b.runtime(memcpy, t0 + 22 * k, 3 * k, correlation=2)
    b.memcpy(f"Memcpy HtoD ({host} -> Device)", t0 + 40 * k, 12 * k, 2, nbytes=1_200_000, stream=8)
    b.runtime(sync, t0 + 25 * k, 24 * k)
    b.runtime(launch, t0 + 61 * k, 1 * k, correlation=3)
    b.kernel("relu", t0 + 200 * k, 4 * k, 3)
    b.annotation("ProfilerStep#2", t0 + 300 * k, 100 * k)
    b.runtime(graph, t0 + 310 * k, 60 * k, correlation=4)
    b.kernel("g1", t0 + 380 * k, 3 * k, 4)
    b.kernel("g2", t0 + 385 * k, 8 * k, 4)
    b.runtime(memset_call, t0 + 372 * k, 500, correlation=5)
    b.memset(t0 + 392 * k, 250, 5, nbytes=4096, stream=8)
    b.kernel("orphan", t0 + 500 * k, 2 * k, 99, device=1)
    b.kernel("orphan", t0 + 600 * k, 1 * k, 99, device=1)
    return b
