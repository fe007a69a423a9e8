"""The one controller the three explorers share: cache, worker, errors, ``last_error``."""

from __future__ import annotations

import threading

import pytest

from workbench.errors import ConfigError
from workbench.widgets import BatchingExplorer, LatencyExplorer, TraceExplorer
from workbench.widgets.controller import Controller


class Squares(Controller):
    """A minimal explorer: key -> key squared, drawn into ``shown``; 13 is refused, 99 is a bug."""

    def __init__(self):
        super().__init__(debounce_s=0, cache_size=2)
        self.value, self.shown, self.computed = 1, [], []

    @property
    def key(self):
        return self.value

    def draw(self, value):
        self.shown.append(value)

    def compute(self, key, cancel: threading.Event):
        self.computed.append(key)
        if key == 13:
            raise ConfigError("13 is not allowed")
        if key == 99:
            raise KeyError("bug")
        return key * key

    def move(self, value):
        self.value = value
        self.update(value, lambda cancel: self.compute(value, cancel), queued=f"computing {value}")
        return self.wait()


def test_every_explorer_is_a_controller_and_has_last_error():
    assert issubclass(LatencyExplorer, Controller) and issubclass(BatchingExplorer, Controller)
    ex = TraceExplorer(paths=[], start=False)
    assert isinstance(ex, Controller) and ex.last_error is None and ex.message == ""


def test_computed_once_then_served_from_the_lru_cache():
    c = Squares()
    c.move(3).move(4).move(3)
    assert c.shown == [9, 16, 9] and c.computed == [3, 4]
    c.move(5).move(6).move(3)  # cache of 2: 3 was dropped
    assert c.computed == [3, 4, 5, 6, 3]


def test_a_workbench_error_is_a_message_and_the_last_result_stays():
    c = Squares().move(2).move(13)
    assert c.shown == [4] and c.message == "13 is not allowed" and c.message_line.level == "error"
    assert c.status.value == "not run" and c.last_error is None


def test_a_bug_is_kept_in_last_error_and_shown_with_its_type():
    c = Squares().move(99)
    assert isinstance(c.last_error, KeyError)
    assert c.message == "unexpected KeyError: 'bug'"


def test_a_result_for_a_setting_no_longer_on_screen_is_cached_not_drawn():
    c = Squares()
    c.value = 7
    c.update(8, lambda cancel: c.compute(8, cancel))
    c.wait()
    assert c.shown == [] and 8 in c.cache


def test_quiet_silences_observers_only_inside():
    c = Squares()
    with c.quiet():
        assert c._silent
    assert not c._silent
    with pytest.raises(RuntimeError), c.quiet():
        raise RuntimeError
    assert not c._silent
