"""A/B pinning of the latency explorer: keep one configuration as A, compare the current one (B) with it.

Split out of :mod:`workbench.widgets.latency` (which keeps the wiring). Both
configurations run interleaved in this process (``workbench.interleave.compare``),
one live run at a time (``workbench.live_queue``); the result is the comparison's
``result`` dict (ratio per stage with its interval and verdict). Nothing here
touches a widget: the explorer passes a status callback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import PipelineConfig
from ..errors import ConfigError
from ..live_queue import live_slot
from .latency_support import Key, check_config


class Pinning:
    """The pinned configuration A and the last comparison's result.

    compare_fn: the comparison (``workbench.interleave.compare``); tests inject a fake.
    requests/warmup: measured and warm-up requests per configuration.
    measurable: ``device -> bool``, whether this machine can run it (both A and B run live).
    """

    def __init__(
        self,
        compare_fn: Callable | None,
        requests: int,
        warmup: int,
        measurable: Callable[[str], bool],
    ):
        self.compare_fn, self.requests, self.warmup = compare_fn, requests, warmup
        self.measurable = measurable
        self.pinned: tuple[Key, PipelineConfig] | None = None
        self.comparison: dict | None = None

    def pin(self, key: Key, config: PipelineConfig) -> None:
        self.pinned = (key, config)

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
        compare = self.compare_fn
        if compare is None:
            from ..interleave import compare
        check_config(a_config)
        check_config(b_config)
        with live_slot(on_wait=on_wait):
            result = compare(
                target, [a_config, b_config], requests=self.requests, warmup=self.warmup
            ).result
        self.comparison = result
        return result
