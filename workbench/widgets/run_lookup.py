"""Which recorded run the latency explorer shows for a configuration, and what it says when there is none.

The fingerprint a live run of a configuration would record (built only when a recorded run needs
its model compared), the match among the recorded runs
(:class:`~workbench.widgets.recorded.RecordedRuns`), and the lines said around it; no widget.

On a device this machine lacks, the model fingerprint is the one the same configuration has on
the CPU: it hashes parameter names, shapes and dtypes, which the device does not change. That is
what lets ``text-cuda-bs1-fp32`` stand in for ``text`` on ``cuda`` on a machine without a GPU.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config import PipelineConfig
from ..device import check_device
from ..errors import ConfigError
from ..examples import factory
from ..examples.fingerprints import cached
from ..fingerprint import model_fingerprint
from ..pipeline import resolve_pipeline
from .latency_support import cheap_fingerprint
from .recorded import Match, RecordedRuns


class RunLookup:
    """The recorded runs under ``runs`` and the fingerprints of the configurations looked up so far."""

    def __init__(self, runs: Any = None):
        self.recorded = RecordedRuns(runs)
        self._wanted: dict[tuple, dict] = {}

    def find(
        self, target: Any, config: PipelineConfig, *, measurable: bool, build: bool = True
    ) -> Match | None:
        """The recorded run matching this configuration's fingerprint, or None (see ``widgets.recorded``).

        measurable: whether this machine has ``config.device``. ``build=False``: None also
        where telling would need the pipeline built.
        """
        if not self.recorded.runs:
            return None
        wanted = self.fingerprint(target, config, measurable=measurable, build=build)
        if wanted is None:
            return None
        return self.recorded.find(wanted, measurable=measurable)

    def fingerprint(
        self, target: Any, config: PipelineConfig, build: bool = True, *, measurable: bool = True
    ) -> dict[str, Any] | None:
        """What a live run of this configuration would record as its fingerprint; the pipeline is
        built only for a factory's name or a model a recorded run fingerprinted that the shipped
        ``workbench.examples.fingerprints`` lack (``build=False``: None there instead)."""
        cache_key = (id(target), config.device, config.batch_size, config.precision, config.threads)
        if cache_key in self._wanted:
            return self._wanted[cache_key]
        wanted = cheap_fingerprint(target, config)
        if not isinstance(target, str) or self.recorded.needs_model(wanted, measurable=measurable):
            known = _model_of(
                target, config if measurable else dataclasses.replace(config, device="cpu"), build
            )
            if known is None:
                return None
            wanted |= known
        self._wanted[cache_key] = wanted
        return wanted

    def recorded_threads(self, target: Any, config: PipelineConfig) -> int | None:
        """The thread count of the recorded run of ``config`` at any thread count, else None."""
        if not self.recorded.runs:
            return None
        match = self.recorded.find(
            self.fingerprint(target, config, measurable=False), measurable=False
        )
        threads = match.run.fingerprint.get("threads") if match is not None else None
        return threads if isinstance(threads, int) and threads >= 1 else None

    def refuse_unmeasurable(self, family: str, config: PipelineConfig) -> None:
        """No recorded run and no such device here: the device check's message, plus what was recorded."""
        same = [
            r.folder.name
            for r in self.recorded.runs
            if str(r.fingerprint.get("device") or "").split(":")[0] == family
        ]
        try:
            check_device(config.device)
        except ConfigError as exc:
            if not same:
                raise
            raise ConfigError(f"{exc}; recorded {family} runs: {', '.join(same)}") from None

    def other_threads_hint(self, target: Any, config: PipelineConfig) -> str:
        """When a recorded run differs from this configuration only in threads, say which threads to pick."""
        wanted = self.fingerprint(target, config)
        match = self.recorded.find(wanted, measurable=False)
        if match is None or match.run.fingerprint.get("threads") == wanted["threads"]:
            return ""
        return (
            f"; a recorded run ({match.run.folder.name}) has {match.run.fingerprint.get('threads')} threads: "
            "pick that to see it"
        )

    def device_options(self, here: list[str], pipeline: str | None = None) -> list:
        """This machine's devices, plus devices only recorded runs have, labelled with the cards the runs
        of ``pipeline`` (all runs when None or none of its own) were recorded on, from their records:
        ``("cuda (recorded on NVIDIA H100 80GB HBM3)", "cuda")``."""
        cards = self.recorded.cards(pipeline)
        extra = {d: names for d, names in cards.items() if d not in here}
        if not extra:
            return here
        return [(d, d) for d in here] + [
            (f"{d} (recorded on {', '.join(names)})", d) for d, names in extra.items()
        ]


def _model_of(target: Any, config: PipelineConfig, build: bool) -> dict[str, Any] | None:
    """``{"pipeline", "model"}`` of ``target`` built with ``config``: from the shipped cache, else a build
    (None without one when ``build`` is False)."""
    known = cached(target, config)
    if known is None and build:
        pipe = resolve_pipeline(factory(target) if isinstance(target, str) else target, config)
        known = {
            "pipeline": pipe.name,
            "model": model_fingerprint(list(getattr(pipe, "models", []) or [])),
        }
    return known
