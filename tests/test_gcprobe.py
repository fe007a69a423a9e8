"""GC pauses through gc.callbacks, on an injected clock."""

from __future__ import annotations

import gc

from workbench.gcprobe import GcProbe


def test_a_collection_adds_its_pause_on_the_injected_clock():
    ticks = iter([100, 350, 1_000, 1_060])
    with GcProbe(clock=lambda: next(ticks)) as probe:
        probe._callback("start", {})
        probe._callback("stop", {})
        probe._callback("start", {})
        probe._callback("stop", {})
    assert probe.pause_ns == 250 + 60 and probe.collections == 2 and probe.max_pause_ns == 250


def test_a_real_collection_is_seen_and_the_callback_is_removed():
    with GcProbe() as probe:
        gc.collect()
    assert probe.collections >= 1 and probe.pause_ns > 0
    assert probe._callback not in gc.callbacks


def test_stop_without_start_is_ignored():
    probe = GcProbe(clock=lambda: 5)
    probe._callback("stop", {})
    assert probe.pause_ns == 0 and probe.collections == 0
