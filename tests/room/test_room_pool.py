"""The room's pool: per-dashboard sizes, "ready" once the pooled notebooks ran, refills within max_kernels."""
from __future__ import annotations

import asyncio
import logging

import pytest

from workbench.room.pool import (RoomError, bounded_pool_class, parse_preheat, pending_starts, pool_failures,
                                 pool_progress, pools_config, refill_allowed)


@pytest.fixture()
def served(tmp_path):
    for name in ("dashboards/latency_explorer.ipynb", "dashboards/trace_explorer.ipynb", "01_quickstart.ipynb",
                 "solutions/dashboards/trace_explorer.ipynb", "dashboards/.ipynb_checkpoints/latency_explorer.ipynb"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    return tmp_path


def test_preheat_names_a_notebook_by_stem_or_relative_path(served):
    assert parse_preheat(["latency_explorer=30"], served) == {"dashboards/latency_explorer.ipynb": 30}
    assert parse_preheat(["solutions/dashboards/trace_explorer.ipynb=2", " 01_quickstart=0 "], served) == {
        "solutions/dashboards/trace_explorer.ipynb": 2, "01_quickstart.ipynb": 0}


def test_preheat_refuses_unknown_ambiguous_and_malformed_names(served):
    with pytest.raises(RoomError, match=r"'nowhere=3': no notebook under .* is called 'nowhere'"):
        parse_preheat(["nowhere=3"], served)
    with pytest.raises(RoomError, match=r"2 notebooks \(dashboards/trace_explorer.ipynb, "
                                        r"solutions/dashboards/trace_explorer.ipynb\)"):
        parse_preheat(["trace_explorer=1"], served)
    with pytest.raises(RoomError, match="expected NAME=N"):
        parse_preheat(["latency_explorer:30"], served)
    with pytest.raises(RoomError, match="expected NAME=N"):
        parse_preheat(["latency_explorer=-1"], served)


def test_pools_config_is_a_default_size_and_one_entry_per_notebook():
    assert pools_config(1, {"dashboards/latency_explorer.ipynb": 30}) == {
        "default": {"pool_size": 1}, "dashboards/latency_explorer.ipynb": {"pool_size": 30}}
    assert pools_config(-2, {}) == {"default": {"pool_size": 0}}


LOOP = asyncio.new_event_loop()  # futures only, never run


@pytest.fixture(scope="module", autouse=True)
def close_loop():
    yield
    LOOP.close()


def done(value=None, error=None):
    future = LOOP.create_future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


def pending():
    return LOOP.create_future()


def test_pool_progress_counts_a_kernel_only_once_its_notebook_has_run():
    executed = done({"task": done(("html", None)), "kernel_id": "a"})
    running = done({"task": pending(), "kernel_id": "b"})
    failed = done({"task": done(error=RuntimeError("cell raised")), "kernel_id": "c"})
    starting = pending()
    pools = {"dashboards/latency_explorer.ipynb": [executed, running, starting],
             "dashboards/trace_explorer.ipynb": [failed, done(error=RuntimeError("no kernel"))]}
    assert pool_progress(pools) == (1, 5)
    assert pool_failures(pools) == 2
    assert pending_starts(pools) == 1
    assert pool_progress({}) == (0, 0)


def test_a_refill_fits_only_below_max_kernels():
    assert refill_allowed(running=31, pending=0, max_kernels=40)
    assert not refill_allowed(running=38, pending=2, max_kernels=40)
    assert not refill_allowed(running=40, pending=0, max_kernels=40)
    assert refill_allowed(running=400, pending=9, max_kernels=0)  # 0: no bound


class FakeVoilaManager:
    """What ``bounded_pool_class`` relies on in Voila's kernel manager: pools, a length, fill_if_needed."""

    def __init__(self, running: int, max_kernels: int, pools: dict):
        self.running, self.max_kernels, self._pools = running, max_kernels, pools
        self.fills: list[str] = []
        self.log = logging.getLogger("test-room-pool")

    def __len__(self):
        return self.running

    def fill_if_needed(self, delay=None, notebook_name=None, extra_kernel_env_variables=None, **kwargs):
        self.fills.append(notebook_name)


def test_refills_stop_at_max_kernels_but_the_first_fill_always_runs():
    cls = bounded_pool_class(FakeVoilaManager)
    assert cls.__name__ == "RoomPoolFakeVoilaManager"
    nb = "dashboards/latency_explorer.ipynb"
    km = cls(running=39, max_kernels=40, pools={nb: [pending()]})  # a refill already starting: 39 + 1
    km.fill_if_needed(notebook_name=nb)
    assert km.fills == []
    km.running = 38
    km.fill_if_needed(notebook_name=nb)
    assert km.fills == [nb]
    km.running = 40
    km.fill_if_needed(notebook_name="dashboards/new.ipynb")  # no pool yet: Voila's first fill at start-up
    assert km.fills == [nb, "dashboards/new.ipynb"]
