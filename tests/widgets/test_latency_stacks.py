"""The explorer draws the selected run's sampled stacks, slowest minus median, when the run has them."""

from __future__ import annotations

from workbench.errors import ConfigError
from workbench.record import Run
from workbench.widgets import LatencyExplorer, LiveRuns

from widget_fakes import FakeProfile

from tests.support.waits import copying_sampled, lock_tables

STACKS = {
    "tail_set": "slowest_1pct",
    "headline": "forward, 91 % of the slowest 1 % in aten::mm <- run (m.py:3)",
    "stages": {
        "forward": {
            "samples": {"slowest_1pct": 120, "median": 387},
            "tree": [
                {"id": 0, "parent": -1, "name": "forward", "tail": 1.0, "median": 1.0},
                {"id": 1, "parent": 0, "name": "run", "tail": 1.0, "median": 0.4},
                {"id": 2, "parent": 1, "name": "aten::mm", "tail": 0.91, "median": 0.4},
                {"id": 3, "parent": 0, "name": "pad", "tail": 0.0, "median": 0.6},
            ],
        }
    },
}


class StackedProfile(FakeProfile):
    """The fake profile, with sampled stacks recorded on batch size 4 only; bf16 fails as the runner would."""

    def __call__(
        self, target, config, *, requests, warmup, traced, progress=None, cancel=None, **_
    ):
        if config.precision == "bf16":
            raise ConfigError("precision bf16: refused by this fake")
        return super().__call__(
            target,
            config,
            requests=requests,
            warmup=warmup,
            traced=traced,
            progress=progress,
            cancel=cancel,
        )

    def finish(self, run, config):
        if config.batch_size != 4:
            return run
        meta = run.meta.to_dict() | {"stacks": STACKS}
        return Run(meta=meta, requests=run.requests, stages=run.stages)


def test_a_run_with_stacks_shows_slow_minus_median_and_one_without_hides_it():
    ex = LatencyExplorer(
        "text",
        live=LiveRuns(profile=StackedProfile(), requests=20, warmup=3),
        debounce_s=0,
        batch_sizes=(1, 4),
    ).wait()
    assert ex.current.stacks is None and ex.stacks_pane.view.layout.display == "none"
    assert (
        "no sampled stacks" in ex.stacks_pane.figure.to_dict()["layout"]["annotations"][0]["text"]
    )

    ex.set(batch_size=4).wait()
    fig = ex.stacks_pane.figure.to_dict()
    icicle = fig["data"][0]
    assert ex.stacks_pane.view.layout.display == ""
    assert list(icicle["labels"]) == ["forward", "run", "aten::mm", "pad"]
    assert list(icicle["parents"]) == ["", "0", "1", "0"]
    assert [round(c, 2) for c in icicle["marker"]["colors"]] == [0.0, 0.6, 0.51, -0.6]
    assert fig["layout"]["title"]["text"].startswith(
        "forward: slowest 1 % minus median (sampled stacks; 120 slow and 387 median samples)"
    )

    ex.set(batch_size=1).wait()  # back to the cached run without stacks: the pane hides again
    assert (
        ex.stacks_pane.view.layout.display == "none"
        and ex.stacks_pane.figure.to_dict()["data"] == []
    )


def test_a_failed_configuration_clears_and_hides_the_stacks():
    ex = LatencyExplorer(
        "text",
        live=LiveRuns(profile=StackedProfile(), requests=20, warmup=3),
        debounce_s=0,
        batch_sizes=(1, 4),
        batch_size=4,
    ).wait()
    assert ex.stacks_pane.view.layout.display == ""
    ex.set(
        precision="bf16"
    ).wait()  # the run fails: every figure is cleared, the stacks pane hidden
    assert ex.message == "precision bf16: refused by this fake"
    assert ex.current is None and ex.stacks_pane.view.layout.display == "none"
    assert ex.stacks_pane.figure.to_dict()["data"] == []


class SampledProfile(FakeProfile):
    """The fake profile; batch size 4 returns the synthetic lock run, every thread sampled."""

    def finish(self, run, config):
        if config.batch_size != 4:
            return run
        meta = run.meta.replace(stages=["record"], sampled=copying_sampled())
        return Run(meta, *lock_tables())


def test_a_run_with_every_thread_sampled_shows_its_work_beside_its_waits():
    ex = LatencyExplorer(
        "text",
        live=LiveRuns(profile=SampledProfile(), requests=20, warmup=3),
        debounce_s=0,
        batch_sizes=(1, 4),
    ).wait()
    assert ex.waits_pane.view.layout.display == "none" and not ex.current.has_wait_flames
    ex.set(batch_size=4).wait()
    work, waits = ex.waits_pane.figure.to_dict()["data"]
    assert ex.waits_pane.view.layout.display == ""
    assert list(work["labels"]) == ["record", "record", "copy deepcopy"]
    assert list(waits["labels"]) == ["record", "waiting on a lock", "record"]
    ex.set(batch_size=1).wait()
    assert ex.waits_pane.view.layout.display == "none"
    assert ex.waits_pane.figure.to_dict()["data"] == []
