"""The latency explorer's helpers that touch no widget: how it measures live, A/B pinning, control
choices, the wanted fingerprint and its message lines.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from .. import __version__
from ..config import PipelineConfig
from ..device import check_device, cpu_model, torch_or_none, torch_version
from ..errors import ConfigError, PipelineError
from ..examples import EXAMPLES
from ..fingerprint import UNKNOWN, _cores, factory_spec
from ..live_queue import live_slot
from ..precision import check_precision
from ..units import ns_to_ms
from .summaries import Key, RunView

TIMEOUT_S = 30.0  # per request of the explorer's runs: a stuck stage must not freeze the page
COMPARE_REQUESTS = 100  # per configuration: 10 rounds of blocks of 10


@dataclasses.dataclass(frozen=True)
class LiveRuns:
    """How the explorer measures here: its collaborators (tests inject fakes) and the size of their runs.

    profile: called as ``workbench.runner.profile`` (default), with ``requests``, ``warmup``, ``traced``
        and ``timeout_s`` (per request, None: none; a stuck stage ends the run as "incomplete: timeout").
    compare: "compare with B", called as ``workbench.interleave.compare`` (default) is.
    clock, sleep: of the room's live slot (``live_queue.live_slot``) and the measuring time shown.
    """

    profile: Callable | None = None
    requests: int = 20
    warmup: int = 3
    traced: int = 1
    timeout_s: float | None = TIMEOUT_S
    compare: Callable | None = None
    compare_requests: int = COMPARE_REQUESTS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def slot(self, on_wait: Callable[[], None]) -> AbstractContextManager[float]:
        """The room's live-run slot, one live run at a time; yields the seconds waited."""
        return live_slot(on_wait=on_wait, clock=self.clock, sleep=self.sleep)

    def measure(
        self, target: Any, config: PipelineConfig, progress: Callable, cancel: threading.Event
    ) -> Any:
        """A profile of ``target`` under ``config`` (a ``Run``)."""
        profile = self.profile
        if profile is None:
            from ..runner import profile  # 30 ms of imports: a recorded view never profiles
        return profile(
            target,
            config,
            requests=self.requests,
            warmup=self.warmup,
            traced=self.traced,
            timeout_s=self.timeout_s,
            progress=progress,
            cancel=cancel,
        )

    def interleave(self, target: Any, configs: list[PipelineConfig]) -> dict:
        """The comparison's ``result`` of ``configs`` of ``target``, measured interleaved."""
        compare = self.compare
        if compare is None:
            from ..interleave import compare  # 20 ms of imports: only "compare with B" needs them
        return compare(target, configs, requests=self.compare_requests, warmup=self.warmup).result


def pipeline_targets(example: Any, pipelines: dict[str, Any] | None) -> dict[str, Any]:
    """Dropdown label -> example name or factory; the first entry is selected."""
    label = getattr(example, "__name__", None) or type(example).__name__
    first = {example: example} if isinstance(example, str) else {label: example}
    if isinstance(example, str) and example not in EXAMPLES:
        raise PipelineError(
            f"unknown example {example!r}; choose one of {', '.join(EXAMPLES)} or pass a factory"
        )
    rest = {name: name for name in EXAMPLES} | dict(pipelines or {})
    return first | {k: v for k, v in rest.items() if k not in first}


def thread_options(default: int | None) -> list[tuple[str, int | None]]:
    """1, 2, 4, ... up to the cores this process may use (and the default), then torch's own default."""
    cores = _cores()
    counts = {n for n in (1, 2, 4, 8, 16, 32, 64) if n <= cores} | {cores} | {default} - {None, 0}
    return [(str(n), n) for n in sorted(counts)] + [("torch default", None)]


def check_config(config: PipelineConfig) -> None:
    check_device(config.device)
    check_precision(config)


def cheap_fingerprint(target: Any, config: PipelineConfig) -> dict[str, Any]:
    """The fingerprint fields known without building the pipeline (an example's pipeline is its name);
    torch is imported only for its default thread count, so a recorded first view costs no torch."""
    version = torch_version()
    threads = config.threads
    if threads is None and version is not None:
        torch = torch_or_none()
        threads = torch.get_num_threads() if torch is not None else None
    return {
        "pipeline": target if isinstance(target, str) else None,
        "factory": factory_spec(target),
        "options": dict(config.options),
        "precision": config.precision,
        "device": config.device,
        "batch_size": config.batch_size,
        "threads": threads,
        "torch": version,
        "workbench": __version__,
        "host": {"cpu_model": cpu_model(), "cores": _cores()},
        "model": UNKNOWN,
    }


def request_options(view: RunView) -> list[tuple[str, int | None]]:
    """Measured successful requests, slowest first: ``("request 17: 3.210 ms", 17)``."""
    req = view.requests
    measured = req[~req["warmup"].astype(bool) & req["ok"].astype(bool)].sort_values(
        ["dur_ns", "request"], ascending=[False, True]
    )
    if measured.empty:
        return [("(no measured request)", None)]
    rows = zip(measured["request"].astype(int), measured["dur_ns"].astype("int64"))
    return [
        (f"request {r}: {ns_to_ms(d):.3f} ms{' (slowest)' if i == 0 else ''}", r)
        for i, (r, d) in enumerate(rows)
    ]


def clicked_request(point: dict) -> int | None:
    """The request id of a clicked point of the latency-over-run chart (its ``customdata``, else its
    x); None for a point that carries no whole number (a click the chart did not make)."""
    for value in (point.get("customdata"), point.get("x")):
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if isinstance(value, bool):
            continue
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return int(value)
    return None


def failures_text(view: RunView) -> str:
    """``failures: forward 3 (15 %): RuntimeError: boom x3 at f.py:3 in g`` per stage; "" without failures."""
    if not view.failures:
        return ""
    parts = []
    for stage, info in view.failures.items():
        share = f" ({info['share']:.0%})" if info.get("share") is not None else ""
        messages = ", ".join(
            f"{m['type']}: {m['message']} x{m['count']}"
            + (f" at {m['where']}" if m.get("where") else "")
            for m in info["messages"]
        )
        parts.append(f"{stage} {info['count']}{share}: {messages}")
    return "failures (left out of the percentiles): " + "; ".join(parts)


def verdict_text(result: dict) -> str:
    """End to end of a comparison: ``p50 ratio 1.213 [1.150, 1.281]: slower``."""
    e2e = result.get("end_to_end") or {}
    metric = result.get("metric") or "p50"
    ratio, ci = e2e.get(f"{metric}_ratio"), e2e.get(f"{metric}_ci") or [None, None]
    if ratio is None:
        return f"end to end {e2e.get('verdict', 'not compared')}"
    bounds = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if None not in ci else ""
    return f"end to end {metric} ratio {ratio:.3f}{bounds}: {e2e.get('verdict', '?')}"


class Pinning:
    """The pinned configuration A and the last comparison's result; ``measurable(device)``: whether
    this machine can run it (both A and B run live)."""

    def __init__(self, live: LiveRuns, measurable: Callable[[str], bool]):
        self.live, self.measurable = live, measurable
        self.pinned: tuple[Key, PipelineConfig] | None = None
        self.comparison: dict | None = None

    def pinned_for(self, key: Key) -> tuple[Key, PipelineConfig]:
        """A, checked against B's ``key``: one pipeline, two different configurations, both measurable here."""
        if self.pinned is None:
            raise ConfigError(
                "nothing pinned: press 'pin as A' on one configuration, move a control, then compare"
            )
        a_key, a_config = self.pinned
        if a_key == key:
            raise ConfigError("B is the pinned configuration A itself: move a control first")
        if a_key[0] != key[0]:
            raise ConfigError(
                f"A is pipeline {a_key[0]!r} and B {key[0]!r}: compare configurations of one pipeline"
            )
        for k in (a_key, key):
            if not self.measurable(k[1]):
                raise ConfigError(
                    f"cannot compare on {k[1]}: it is not available here, and a comparison "
                    "measures both configurations live, interleaved"
                )
        return a_key, a_config

    def run(
        self,
        target: Any,
        a_config: PipelineConfig,
        b_config: PipelineConfig,
        on_wait: Callable[[], None],
    ) -> dict:
        """Worker thread: A and B interleaved; the comparison's ``result`` (kept as :attr:`comparison`)."""
        check_config(a_config)
        check_config(b_config)
        with self.live.slot(on_wait):
            self.comparison = self.live.interleave(target, [a_config, b_config])
        return self.comparison
