"""show's "why" lines: the sampled stacks' tail line, the attribute that explains the most, head-of-line blocking."""

from __future__ import annotations

import io

from workbench.cli.show import print_explain

STACKS_LINE = "hydrate, 91 % of the slowest 1 % in redis read_response <- get_features (recommend.py:143); median 40 %"


def lines(report):
    out = io.StringIO()
    print_explain(report, out)
    return out.getvalue().splitlines()


def test_the_stacks_attributes_and_blocking_lines():
    report = {
        "tail": {
            "headline": "in the slowest 1 %, hydrate holds 94% of the time; in the median request, 12%"
        },
        "stacks": {"headline": STACKS_LINE},
        "attributes_summary": {
            "headline": "hydrate tracks keys: p50 9.67 ms at 16 against 323 ms at 640 (33.4x)"
        },
        "head_of_line": {
            "stage": "hydrate",
            "queue_wait_ns": 378_000_000,
            "share_of_queue_wait": {"hydrate": 0.88},
            "share_of_wait": {"hydrate": 0.72},
            "holders": [
                {"batch": 5, "stage": "hydrate"},
                {"batch": 6, "stage": "forward"},
                {"batch": 9, "stage": "hydrate"},
            ],
        },
    }
    assert lines(report) == [
        "tail: in the slowest 1 %, hydrate holds 94% of the time; in the median request, 12%",
        f"tail: {STACKS_LINE} (sampled stacks of every timed request)",
        "attributes: hydrate tracks keys: p50 9.67 ms at 16 against 323 ms at 640 (33.4x)",
        "blocking: hydrate of other batches held the executor for 88% of the queue wait (72% of all batch and "
        "queue wait); most in batches 5, 9",
    ]


def test_nothing_to_say_says_nothing():
    assert (
        lines({"tail": {}, "stacks": None, "attributes_summary": None, "head_of_line": None}) == []
    )
    no_wait = {
        "stage": None,
        "queue_wait_ns": 0,
        "share_of_queue_wait": {},
        "share_of_wait": {},
        "holders": [],
    }
    assert lines({"head_of_line": no_wait}) == []
