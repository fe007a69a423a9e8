"""LatencyExplorer keeps the runs the one on screen is read against beside it (issue 40, item 4):
the configuration before it, A, the recording of a configuration measured live, with p99 intervals,
a busy-machine label, and a status line that tells the room's queue from the measuring time."""

from __future__ import annotations

import fcntl
import os

import pytest
from widget_fakes import NOISY, FakeProfile, MetaProfile, synthetic_run

from workbench import load_run
from workbench.analysis.budget import stage_summary
from workbench.config import PipelineConfig
from workbench.examples import data_dir
from workbench.widgets import LatencyExplorer, LiveRuns

RUNS = data_dir() / "runs"


def e2e(run) -> dict:
    """End-to-end p50, p99 and the p99 interval of a run (the numbers the beside table shows)."""
    row = stage_summary(run).set_index("name").loc["end_to_end"]
    return {k: row[k] for k in ("p50_ms", "p99_ms", "p99_ci_low_ms", "p99_ci_high_ms")}


def shown(ex: LatencyExplorer) -> list[dict]:
    cols = ["role", "configuration", "source", "count", "p50_ms", "p99_ms", "noisy"]
    return ex.beside_rows[cols].to_dict("records")


def test_the_previous_configuration_stays_beside_the_current_one(fake_profile):
    ex = LatencyExplorer(
        "text", live=LiveRuns(profile=fake_profile, requests=20, warmup=3), debounce_s=0
    )
    ex.wait()
    assert ex.beside_rows is None and ex.beside_pane.view.layout.display == "none"  # alone
    ex.set(batch_size=2).wait()
    one, two = (e2e(synthetic_run("text", PipelineConfig(batch_size=b), 20, 3)) for b in (1, 2))
    assert shown(ex) == [
        {"role": "now", "configuration": "text cpu bs=2 fp32 threads=1", "source": "live",
         "count": 20, "p50_ms": two["p50_ms"], "p99_ms": two["p99_ms"], "noisy": None},
        {"role": "before", "configuration": "text cpu bs=1 fp32 threads=1", "source": "live",
         "count": 20, "p50_ms": one["p50_ms"], "p99_ms": one["p99_ms"], "noisy": None},
    ]  # fmt: skip
    assert list(ex.beside_rows["p99_ci_high_ms"]) == [None, None]  # 20 requests bound no p99
    p99, p50 = ex.beside_pane.figure.data
    assert list(p99.y) == [two["p99_ms"], one["p99_ms"]]
    assert list(p99.error_y.arrayminus) == pytest.approx(
        [two["p99_ms"] - two["p99_ci_low_ms"], one["p99_ms"] - one["p99_ci_low_ms"]]
    )
    assert list(p99.error_y.array) == [0.0, 0.0] and list(p99.text) == ["upper end not bounded"] * 2
    assert list(p50.y) == [two["p50_ms"], one["p50_ms"]]
    assert ex.beside_pane.view.layout.display == ""
    assert (ex.beside_line.level, ex.beside_line.text) == (
        "info",
        "p99 of 20 and 20 requests is not bounded by its sample (563 bound it): too few requests "
        "to compare p99 (this live run and the live run before it: machine noise not measured)",
    )
    ex.set(batch_size=1).wait()  # from the cache: batch 2 is now the one before
    assert [r["configuration"] for r in shown(ex)] == [
        "text cpu bs=1 fp32 threads=1",
        "text cpu bs=2 fp32 threads=1",
    ]
    assert len(fake_profile.calls) == 2


def test_a_noisy_live_run_is_not_comparable_with_the_quiet_recording(monkeypatch):
    monkeypatch.setattr("workbench.widgets.latency.prime_profiler", lambda: None)
    fake = MetaProfile({"noise": NOISY})
    ex = LatencyExplorer("text", runs=RUNS, live=LiveRuns(profile=fake), debounce_s=0).wait()
    assert "recorded run text-cpu-bs1-fp32" in ex.status.value and fake.calls == []
    ex.rerun_button.click()  # "measure here" on the recorded configuration
    ex.wait()
    recorded = e2e(load_run(RUNS / "text-cpu-bs1-fp32"))
    rows = shown(ex)
    assert [(r["role"], r["source"], r["noisy"]) for r in rows] == [
        ("now", "live", True),
        ("recorded", "recorded", False),  # the recorded view before it is the same run: one row
    ]
    assert (rows[1]["count"], rows[1]["p99_ms"]) == (600, recorded["p99_ms"])
    assert list(ex.beside_rows["p99_ci_high_ms"])[1] == recorded["p99_ci_high_ms"]
    assert (ex.beside_line.level, ex.beside_line.text) == (
        "warning",
        "this live run was measured on a busy machine: not comparable with the recording",
    )
    assert list(ex.beside_pane.figure.data[0].marker.color) == ["#d62728", "#8c8c8c"]
    assert list(ex.beside_pane.figure.data[0].text) == [
        "busy machine; upper end not bounded",
        "",
    ]
    ex.set(batch_size=8).wait()  # a recording after the busy live run
    assert ex.beside_line.text == (
        "the live run before it was measured on a busy machine: not comparable with this recorded run"
    )
    ex.set(batch_size=32).wait()  # no recording at 32: the class's case, live against recorded
    assert ex.beside_line.text == (
        "this live run was measured on a busy machine: not comparable with the recording before it"
    )


def test_a_pinned_recording_stays_beside_with_both_intervals(monkeypatch):
    ex = LatencyExplorer(
        "text", runs=RUNS, live=LiveRuns(profile=FakeProfile()), debounce_s=0
    ).wait()
    ex.pin()
    ex.set(batch_size=4).wait()
    assert "recorded run text-cpu-bs4-fp32" in ex.status.value
    assert [(r["role"], r["source"], r["noisy"]) for r in shown(ex)] == [
        ("now", "recorded", False),
        ("pinned", "recorded", False),  # A was also the one before: one row
    ]
    four, one = (e2e(load_run(RUNS / f"text-cpu-bs{b}-fp32")) for b in (4, 1))
    table = ex.beside_rows
    assert list(table["p99_ci_low_ms"]) == [four["p99_ci_low_ms"], one["p99_ci_low_ms"]]
    assert list(table["p99_ci_high_ms"]) == [four["p99_ci_high_ms"], one["p99_ci_high_ms"]]
    assert four["p99_ci_low_ms"] > one["p99_ci_high_ms"]  # the recorded intervals are apart
    ratio = four["p99_ms"] / one["p99_ms"]
    assert ex.beside_line.text == (
        f"p99 {ratio:.2f}x A, the pinned recording's, the 95 % intervals apart"
    )
    assert "text cpu bs=1 fp32 threads=1" in ex.beside_table.value


class SecondsClock:
    """An injected monotonic clock in seconds; the profile and the queue's sleep move it."""

    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_status_line_says_the_queue_wait_apart_from_the_measuring_time(tmp_path, monkeypatch):
    lock = tmp_path / "live.lock"
    monkeypatch.setenv("WORKBENCH_LIVE", "queue")
    monkeypatch.setenv("WORKBENCH_LIVE_LOCK", str(lock))
    held = os.open(lock, os.O_CREAT | os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # another student's live run holds the room's slot
    clock, waiting = SecondsClock(), []

    def sleep(_s: float) -> None:  # the other run ends 30.2 s later
        waiting.append(ex.status.value)
        clock.now += 30.2
        fcntl.flock(held, fcntl.LOCK_UN)

    fake = FakeProfile()

    def profile(target, config, *, requests, warmup, traced, progress=None, cancel=None, **_):
        clock.now += 2.1
        return fake(target, config, requests=requests, warmup=warmup, traced=traced)

    ex = LatencyExplorer(
        "text", live=LiveRuns(profile=profile, clock=clock, sleep=sleep), debounce_s=0, start=False
    )
    ex.refresh()
    ex.wait()
    os.close(held)
    assert waiting == ["waiting in the room's queue..."]
    assert ex.status.value.endswith(": waited 30.2 s in the room's queue, measured here in 2.1 s")
    ex.set(batch_size=2).wait()  # the slot is free: no wait to report
    assert ex.status.value.endswith(": measured here in 2.1 s") and "waited" not in ex.status.value
