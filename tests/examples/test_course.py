"""workbench.examples._course: the measurements notebooks 11 and 13 make live and scripts/record_course_data.py
records."""

from __future__ import annotations

from workbench.examples import _course


def test_snapshot_pipeline_starts_one_snapshot_thread_that_stop_background_jobs_ends():
    import threading

    from workbench import PipelineConfig

    config = PipelineConfig(options={"period_ms": 40, "hold_ms": 10, "records": 50, "churn": 2})
    pipe = _course.snapshot_pipeline(config)
    try:
        assert pipe.stage_names == ["parse", "lookup", "score"]
        assert pipe([3, 5_004]) == [21.0, 28.0]  # the table's value of each key (key % 5,000) * 7
        assert [t.name for t in threading.enumerate()].count("snapshot") == 1
    finally:
        stopped = _course.stop_background_jobs()
    assert stopped == 1 and "snapshot" not in [t.name for t in threading.enumerate()]
    assert _course.stop_background_jobs() == 0
