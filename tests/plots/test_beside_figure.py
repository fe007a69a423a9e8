"""plots.compare_figures.beside_figure: the run on screen beside the runs it is read against, p99 with its interval."""

from __future__ import annotations

import pandas as pd

from workbench.plots.compare_figures import beside_figure


def test_points_carry_their_intervals_and_say_busy_or_unbounded():
    table = pd.DataFrame(
        [
            ("now", "text cpu bs=8 bf16 threads=1", "live", 20, 3.0, 9.0, 4.0, None, True),
            ("recorded", "text cpu bs=8 bf16 threads=1", "recorded", 600, 2.0, 4.5, 4.2, 4.9, False),
            ("before", "text cpu bs=8 fp32 threads=1", "recorded", 600, 5.0, 10.0, 9.5, 11.0, False),
        ],
        columns=["role", "configuration", "source", "count", "p50_ms", "p99_ms",
                 "p99_ci_low_ms", "p99_ci_high_ms", "noisy"],
        dtype=object,
    )  # fmt: skip
    fig = beside_figure(table).to_dict()
    p99, p50 = fig["data"]
    assert p99["name"] == "p99 (95 % CI)" and p50["name"] == "p50"
    assert list(p99["x"]) == [
        "now: text cpu bs=8 bf16 threads=1 (live)<br><i>busy machine; upper end not bounded</i>",
        "recorded: text cpu bs=8 bf16 threads=1 (recorded)",
        "before: text cpu bs=8 fp32 threads=1 (recorded)",
    ]
    assert list(p99["y"]) == [9.0, 4.5, 10.0] and list(p50["y"]) == [3.0, 2.0, 5.0]
    assert [round(v, 6) for v in p99["error_y"]["array"]] == [0.0, 0.4, 1.0]
    assert [round(v, 6) for v in p99["error_y"]["arrayminus"]] == [5.0, 0.3, 0.5]
    assert list(p99["text"]) == ["busy machine; upper end not bounded", "", ""]
    assert list(p99["marker"]["color"]) == ["#d62728", "#8c8c8c", "#8c8c8c"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "end to end (ms)"
