"""Fakes for the explorers: a profile function that returns synthetic runs, counted and controllable."""

from __future__ import annotations

import threading

import pandas as pd

from workbench.config import PipelineConfig
from workbench.record import REQUEST_COLUMNS, STAGE_COLUMNS, Run
from workbench.pipeline import resolve_pipeline
from workbench.runner import Cancelled

STAGES = ["parse", "forward", "serialize"]
NOISY = {
    "noisy": True,
    "reasons": ["other processes used 1.4 of 2 cores during the run"],
    "fix": "--threads 1 (PipelineConfig(threads=1))",
    "other_cores": 1.4,
    "steal_pct": 0.0,
}


def synthetic_run(pipeline: str, config: PipelineConfig, requests: int, warmup: int) -> Run:
    """Stage k of request i lasts (k+1) * batch_size ms + i us; 50 us unattributed per request."""
    bs = config.batch_size
    precision_factor = {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 1}[config.precision]
    req_rows, stage_rows, t = [], [], 0
    for i in range(warmup + requests):
        start = t
        for k, name in enumerate(STAGES):
            dur = (k + 1) * bs * 1_000_000 * (
                precision_factor if name == "forward" else 1
            ) // 4 * 4 + i * 1_000
            stage_rows.append((i, name, k, t, dur, None))
            t += dur
        t += 50_000
        req_rows.append(
            (i, i < warmup, start, t - start, True, None, None, None, bs, None)
        )  # error_where last
    meta = {"kind": "profile", "pipeline": pipeline, "stages": STAGES, "config": config.to_dict()}
    stages = pd.DataFrame(stage_rows, columns=list(STAGE_COLUMNS))
    stages["device_dur_ns"] = stages["device_dur_ns"].astype("Int64")
    return Run(
        meta=meta, requests=pd.DataFrame(req_rows, columns=list(REQUEST_COLUMNS)), stages=stages
    )


class FakeProfile:
    """Stands in for ``workbench.runner.profile`` (``timeout_s`` ignored): counts calls, can block until
    released or cancelled."""

    def __init__(self, block: bool = False):
        self.calls: list[tuple] = []
        self.configs: list[PipelineConfig] = []  # every config profiled, threads included
        self.block = block
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(
        self, target, config, *, requests, warmup, traced, progress=None, cancel=None, **_
    ):
        if callable(target):
            resolve_pipeline(target, config)  # the real path for factory errors
        self.calls.append((target, config.device, config.batch_size, config.precision))
        self.configs.append(config)
        self.started.set()
        total = warmup + requests
        for i in range(total):
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"cancelled after {i} of {total} requests")
            if self.block and i == 0:
                while not self.release.wait(0.01):
                    if cancel is not None and cancel.is_set():
                        raise Cancelled(f"cancelled after {i} of {total} requests")
            if progress is not None:
                progress(i + 1, total, "timing")
        return self.finish(
            synthetic_run(target if isinstance(target, str) else "mine", config, requests, warmup),
            config,
        )

    def finish(self, run: Run, config: PipelineConfig) -> Run:
        """The run returned for ``config``: a subclass changes it here."""
        return run


class MetaProfile(FakeProfile):
    """A FakeProfile whose runs carry extra meta (noise) and, optionally, failed requests."""

    def __init__(self, meta=None, fail=()):
        super().__init__()
        self.meta, self.fail = meta or {}, set(fail)

    def finish(self, run, config):
        run.meta = run.meta.replace(**self.meta)
        for i in self.fail:
            run.requests.loc[
                i, ["ok", "error_stage", "error_type", "error_message", "error_where"]
            ] = [False, "forward", "RuntimeError", "out of memory", "model.py:12 in forward"]
        return run
