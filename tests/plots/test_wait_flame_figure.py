"""The slowest requests' work beside their waits: two icicles of the wait flame trees."""

from __future__ import annotations

import pytest

from tests.support.waits import copying_sampled, lock_tables
from workbench.analysis.waits import wait_flames
from workbench.plots.flame import wait_flame_figure


def test_work_and_waits_are_drawn_side_by_side_on_one_colour_scale():
    requests, stages = lock_tables()
    fig = wait_flame_figure(wait_flames(copying_sampled(), requests, stages, ["record"])).to_dict()
    work, waits = fig["data"]
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["work (on CPU)", "waits"]
    assert work["labels"] == ["record", "record", "copy deepcopy"]
    assert waits["labels"] == ["record", "waiting on a lock", "record"]
    assert waits["parents"] == ["", "0", "1"] and list(waits["values"]) == [200_000_000] * 3
    # per request: slow 2 ms against the median's 5/95 ms of work; 40 ms against 1/95 ms of waits
    assert work["customdata"][2] == pytest.approx([2.0, 0.0, 2.0])
    assert waits["customdata"][0] == pytest.approx([40.0, 1 / 95, 40 - 1 / 95])
    assert work["marker"]["cmax"] == waits["marker"]["cmax"] == pytest.approx(40.0)
    assert work["marker"]["showscale"] is False and waits["marker"]["showscale"] is True
    assert "the slowest 5 % (5 requests) against the median" in fig["layout"]["title"]["text"]


def test_a_run_without_thread_samples_says_so():
    fig = wait_flame_figure(None).to_dict()
    assert fig["data"] == []
    assert fig["layout"]["annotations"][0]["text"].startswith("no thread samples")


def test_a_label_too_small_to_read_is_hidden_not_shrunk():
    """At 1280x800 a short GC pause's box drew its label at 0.5 px (the overlap test): labels under
    10 px are hidden, the hover keeps them."""
    requests, stages = lock_tables()
    fig = wait_flame_figure(wait_flames(copying_sampled(), requests, stages, ["record"])).to_dict()
    assert fig["layout"]["uniformtext"] == {"minsize": 10, "mode": "hide"}
