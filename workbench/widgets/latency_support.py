"""The latency explorer's helpers that touch no widget, and which recorded run stands in for a
configuration: one ``workbench.fingerprint.recorded_match`` accepts, never one matched by name
(another model's latency); on a device this machine lacks, threads are a label and the model
fingerprint is the CPU's.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import PipelineConfig
from ..device import check_device, cpu_model, torch_or_none, torch_version
from ..errors import ConfigError, PipelineError, RunRecordError
from ..examples import EXAMPLES, factory
from ..examples.fingerprints import cached
from ..fingerprint import (
    UNKNOWN,
    _cores,
    _fingerprint,
    differences,
    factory_spec,
    fingerprint_of,
    model_fingerprint,
    recorded_match,
)
from ..pipeline import resolve_pipeline
from ..precision import check_precision
from ..record import META_FILE, read_meta
from ..units import ns_to_ms
from ..wings import hook, wing
from .summaries import Key, RunView

TIMEOUT_S = 30.0  # per request of the explorer's runs: a stuck stage must not freeze the page
COMPARE_REQUESTS = 100  # per configuration: 10 rounds of blocks of 10


@dataclass(frozen=True)
class LiveRuns:
    """How the explorer measures here: ``profile`` and ``compare`` are called as
    ``workbench.runner.profile`` and ``workbench.interleave.compare`` (the defaults; tests inject
    fakes); ``timeout_s`` is per request (None: none); ``clock``, ``sleep``: the room's live slot's.
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
        live_slot = hook("room", "live_slot", _no_room_slot)
        return live_slot(on_wait=on_wait, clock=self.clock, sleep=self.sleep)

    def measure(
        self, target: Any, config: PipelineConfig, progress: Callable, cancel: threading.Event
    ) -> Any:
        """A profile of ``target`` under ``config`` (a ``Run``)."""
        profile = self.profile
        if profile is None:
            from ..runner import profile  # 30 ms of imports: a recorded view never profiles
        runs = {k: getattr(self, k) for k in ("requests", "warmup", "traced", "timeout_s")}
        return profile(target, config, progress=progress, cancel=cancel, **runs)

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
    host = (threads, version, __version__, cpu_model(), _cores())
    pipeline = target if isinstance(target, str) else None
    return _fingerprint(pipeline, factory_spec(target), config, host, UNKNOWN)


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


def pinned_for(
    pinned: tuple[Key, PipelineConfig] | None, key: Key, measurable: Callable[[str], bool]
) -> tuple[Key, PipelineConfig]:
    """A of "compare with B", checked against B's ``key``: one pipeline, two measurable configs."""
    if pinned is None:
        raise ConfigError(
            "nothing pinned: press 'pin as A' on one configuration, move a control, then compare"
        )
    a_key, a_config = pinned
    if a_key == key:
        raise ConfigError("B is the pinned configuration A itself: move a control first")
    if a_key[0] != key[0]:
        raise ConfigError(
            f"A is pipeline {a_key[0]!r} and B {key[0]!r}: compare configurations of one pipeline"
        )
    for k in (a_key, key):
        if not measurable(k[1]):
            raise ConfigError(
                f"cannot compare on {k[1]}: it is not available here, and a comparison "
                "measures both configurations live, interleaved"
            )
    return a_key, a_config


@dataclass(frozen=True)
class Recorded:
    """One recorded profile run: its folder, fingerprint and where it ran."""

    folder: Path
    fingerprint: dict[str, Any]
    device_name: str | None
    created: str


@dataclass(frozen=True)
class Match:
    """A recorded run accepted for a configuration, and what differs (labels for the status line)."""

    run: Recorded
    labels: tuple[str, ...]


class RecordedRuns:
    """Recorded profile runs under ``paths`` (run folders or folders of them; the last match wins)."""

    def __init__(self, paths: Any = None):
        self.runs: list[Recorded] = []
        self.skipped: list[str] = []
        self._wanted: dict[tuple, dict] = {}
        roots = map(Path, [paths] if isinstance(paths, (str, Path)) else paths or [])
        found = [[r] if (r / META_FILE).is_file() else sorted(r.glob("*")) for r in roots]
        for folder in [f for group in found for f in group if (f / META_FILE).is_file()]:
            try:
                meta = read_meta(folder / META_FILE)
            except RunRecordError as exc:
                self.skipped.append(str(exc))
                continue
            if meta.kind != "profile" or meta.sync_policy != "stage":
                continue
            created = str(meta.created or "")[:10]
            self.runs.append(Recorded(folder, fingerprint_of(meta), meta.env.device_name, created))

    @property
    def note(self) -> str:
        """A line for the page ("" when nothing was skipped)."""
        if not self.skipped:
            return ""
        return f"skipped {len(self.skipped)} unreadable recorded run(s): " + "; ".join(self.skipped)

    def batch_sizes(self, pipeline: str) -> set[int]:
        """The batch sizes recorded for ``pipeline``."""
        return {
            int(r.fingerprint["batch_size"])
            for r in self.runs
            if isinstance(r.fingerprint.get("batch_size"), int)
            and r.fingerprint.get("pipeline") == pipeline
        }

    def match(self, wanted: dict[str, Any], *, measurable: bool = True) -> Match | None:
        """The recorded run standing in for ``wanted``, or None (threads a label unless measurable)."""
        found = None
        for run, want in self._matching(wanted, measurable):
            labels = difference_labels(want, _comparable(run.fingerprint))
            if want.get("threads") != wanted.get("threads"):
                threads = run.fingerprint.get("threads")
                labels.insert(0, f"recorded with {threads} CPU threads (cannot be measured here)")
            found = Match(run, tuple(labels))
        return found

    def _matching(self, wanted: dict[str, Any], measurable: bool, **same: Any):
        """(run, ``wanted`` with its threads unless ``measurable``) per match, ``same`` on both."""
        for run in self.runs:
            want = wanted if measurable else wanted | {"threads": run.fingerprint.get("threads")}
            if recorded_match(want | same, _comparable(run.fingerprint) | same)[0]:
                yield run, want

    def find(
        self, target: Any, config: PipelineConfig, *, measurable: bool, build: bool = True
    ) -> Match | None:
        """The matching recorded run, or None (also when telling needs a build and ``build=False``)."""
        if not self.runs:
            return None
        wanted = self.fingerprint(target, config, measurable=measurable, build=build)
        return None if wanted is None else self.match(wanted, measurable=measurable)

    def fingerprint(
        self, target: Any, config: PipelineConfig, build: bool = True, *, measurable: bool = True
    ) -> dict[str, Any] | None:
        """A live run's fingerprint, building only for a model ``examples.fingerprints`` lacks."""
        cache_key = (id(target), config.device, config.batch_size, config.precision, config.threads)
        if cache_key in self._wanted:
            return self._wanted[cache_key]
        wanted = cheap_fingerprint(target, config)
        # a run matching the cheap fields recorded a model fingerprint: compare the model too
        matching = self._matching(wanted, measurable, model=None)
        if not isinstance(target, str) or any(
            run.fingerprint.get("model") not in (None, UNKNOWN) for run, _ in matching
        ):
            built = config if measurable else replace(config, device="cpu")
            known = cached(target, built)  # the shipped examples' fingerprints
            if known is None and not build:
                return None
            if known is None:
                pipe = resolve_pipeline(
                    factory(target) if isinstance(target, str) else target, built
                )
                models = list(getattr(pipe, "models", []) or [])
                known = {"pipeline": pipe.name, "model": model_fingerprint(models)}
            wanted |= known
        self._wanted[cache_key] = wanted
        return wanted

    def recorded_threads(self, target: Any, config: PipelineConfig) -> int | None:
        """The thread count of the recorded run of ``config`` at any thread count, else None."""
        match = self.find(target, config, measurable=False)
        threads = match.run.fingerprint.get("threads") if match is not None else None
        return threads if isinstance(threads, int) and threads >= 1 else None

    def refuse_unmeasurable(self, family: str, config: PipelineConfig) -> None:
        """No recorded run and no such device here: the device check's message, plus what was recorded."""
        same = [r.folder.name for r in self.runs if _family(r.fingerprint) == family]
        try:
            check_device(config.device)
        except ConfigError as exc:
            if not same:
                raise
            raise ConfigError(f"{exc}; recorded {family} runs: {', '.join(same)}") from None

    def other_threads_hint(self, target: Any, config: PipelineConfig) -> str:
        """When a recorded run differs from this configuration only in threads, say which threads to pick."""
        wanted = self.fingerprint(target, config)
        match = self.match(wanted, measurable=False)
        if match is None or match.run.fingerprint.get("threads") == wanted["threads"]:
            return ""
        return (
            f"; a recorded run ({match.run.folder.name}) has {match.run.fingerprint.get('threads')} threads: "
            "pick that to see it"
        )

    def device_options(self, here: list[str], pipeline: str) -> list:
        """This machine's devices, plus those only recorded runs have, labelled with their cards:
        ``("cuda (recorded on NVIDIA H100 80GB HBM3)", "cuda")`` (``pipeline``'s runs, else all)."""
        runs = [r for r in self.runs if r.fingerprint.get("pipeline") == pipeline]
        extra: dict[str, list[str]] = {}  # device family -> the distinct device names
        for run in runs or self.runs:
            if (family := _family(run.fingerprint)) not in here:
                names = extra.setdefault(family, [])
                if (run.device_name or family) not in names:
                    names.append(run.device_name or family)
        if not extra:
            return here
        return [(d, d) for d in here] + [
            (f"{d} (recorded on {', '.join(names)})", d) for d, names in extra.items()
        ]


def difference_labels(wanted: dict[str, Any], recorded: dict[str, Any]) -> list[str]:
    """What an accepted recorded run differs in: ``recorded with torch '2.11', here '2.13'``, and one
    ``not recorded: factory, workbench`` for the fields the run did not record."""
    labels, missing = [], []
    for name, here, there in differences(wanted, recorded):
        if there is None or there == UNKNOWN:
            missing.append(name)
        else:
            labels.append(f"recorded with {name} {there!r}, here {here!r}")
    return labels + ([f"not recorded: {', '.join(missing)}"] if missing else [])


def _family(fp: dict[str, Any]) -> str:
    """The device family the toggle offers (``cuda:0`` -> ``cuda``); none recorded: the CPU."""
    return str(fp.get("device") or "cpu").split(":")[0]


def _comparable(fp: dict[str, Any]) -> dict[str, Any]:
    """A recorded fingerprint with its device reduced to its family."""
    return fp | {"device": _family(fp)}


def _no_room_slot(**_) -> AbstractContextManager[float]:
    """No slot without the room wing; a kernel the room started is told to install the wing."""
    if os.environ.get("WORKBENCH_LIVE", "on").strip().lower() not in ("", "on"):
        wing("room")
    return nullcontext(0.0)
