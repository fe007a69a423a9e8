"""A/B pinning of the latency explorer: keep one configuration as A, compare the current one (B) with it.

Both configurations run interleaved in this process (``LiveRuns.interleave``), one live run at
a time; the result is the comparison's ``result`` dict (ratio per stage with its interval and
verdict). Nothing here touches a widget: the explorer passes a status callback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import PipelineConfig
from ..errors import ConfigError
from .latency_support import Key, LiveRuns, check_config


class Pinning:
    """The pinned configuration A and the last comparison's result.

    live: how the explorer measures (``LiveRuns``: the comparison, its request counts, the room's slot).
    measurable: ``device -> bool``, whether this machine can run it (both A and B run live).
    """

    def __init__(self, live: LiveRuns, measurable: Callable[[str], bool]):
        self.live, self.measurable = live, measurable
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
        check_config(a_config)
        check_config(b_config)
        with self.live.slot(on_wait):
            self.comparison = self.live.interleave(target, [a_config, b_config])
        return self.comparison
