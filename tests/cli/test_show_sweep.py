"""The sweep table marks a point whose generator fell behind its schedule (issue 37)."""

from workbench.cli.show import table_row


def point(lag_p99_ms):
    return {
        "rate_rps": 400.0,
        "concurrency": 1,
        "offered_rps": 398.0,
        "achieved_rps": 390.0,
        "p50_ms": 4.0,
        "p95_ms": 9.0,
        "p99_ms": 12.0,
        "failed": 0,
        "generator_lag_p99_ms": lag_p99_ms,
        "stable": True,
        "windows": 3,
        "stable_after_windows": 3,
        "noisy": True,
    }


def test_a_point_behind_its_schedule_is_marked_in_the_table():
    assert table_row(point(1.0)).endswith("   1.000  stable after 3 windows BEHIND SCHEDULE NOISY")
    assert table_row(point(0.999)).endswith("   0.999  stable after 3 windows NOISY")
    assert table_row(point(None)).endswith("       -  stable after 3 windows NOISY")  # an old point
