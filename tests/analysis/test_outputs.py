"""B's outputs against A's, item by item: errors, argmax agreement, JSON responses, a pipeline's agree=."""

import json

import numpy as np
import pytest

from workbench.analysis.outputs import agreement_text, item_view, output_agreement, split_items


def test_arrays_of_logits_errors_and_argmax_agreement_exact():
    a = {
        0: np.array([[1.0, 2.0, 0.5], [3.0, 1.0, 0.0]]),
        2: np.array([[0.0, 0.1, 0.2], [4.0, 0.0, 0.0]]),
    }
    b = {
        0: np.array([[1.0, 2.5, 0.5], [3.0, 1.0, 0.0]]),
        2: np.array([[0.0, 0.3, 0.2], [4.0, 0.0, 0.0]]),
    }
    found = output_agreement(a, b)
    # |b - a| max 0.5 (item 0); relative: 0.2 / max(0.1, 1e-3 * 4) = 2.0 on item 2's second logit
    assert found == {
        "max_abs_error": 0.5,
        "max_rel_error": 2.0,
        "argmax_agreement": 0.75,
        "items": 4,
    }


def test_items_line_up_across_batch_sizes():
    # A batches 1 item per request, B 2: items 0..3 are compared item by item
    a = {i: np.array([[float(i), 0.0]]) for i in range(4)}
    b = {0: np.array([[0.0, 0.0], [1.0, 0.0]]), 2: np.array([[2.0, 0.0], [0.0, 3.0]])}
    found = output_agreement(a, b)
    assert (
        found["items"] == 4 and found["argmax_agreement"] == 0.75 and found["max_abs_error"] == 3.0
    )


def test_json_responses_compare_scores_rank_by_rank_and_the_top_label():
    def response(*pairs):
        return json.dumps(
            {"labels": [{"label": k, "score": v} for k, v in pairs], "tokens": 5}
        ).encode()

    a = {0: [response(("cat", 0.6), ("dog", 0.4)), response(("dog", 0.7), ("cat", 0.3))]}
    b = {0: [response(("cat", 0.55), ("dog", 0.45)), response(("cat", 0.51), ("dog", 0.49))]}
    found = output_agreement(a, b)
    assert found["argmax_agreement"] == 0.5 and found["items"] == 2
    assert found["max_abs_error"] == pytest.approx(
        0.19
    )  # rank 1 of item 2: 0.51 vs 0.7; labels are not numbers


def test_identity_fields_are_classes_not_numbers():
    numbers, cls = item_view(
        b'{"user_id": 7, "items": [{"item_id": 829, "score": 0.25, "show": false}]}'
    )
    assert numbers.tolist() == [0.25] and cls == 829


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (
            {0: ["x", "y"]},
            {0: ["x", "z"]},
            {"max_abs_error": None, "max_rel_error": None, "argmax_agreement": None},
        ),
        (
            {0: np.array([[1.0, 2.0]])},
            {0: np.array([[1.0, 2.0, 3.0]])},
            {"max_abs_error": None, "max_rel_error": None, "argmax_agreement": 0.0},
        ),  # 1 vs 2
        (
            {0: np.array([1, 2, 3])},
            {0: np.array([1, 2, 4])},
            {
                "max_abs_error": 1.0,
                "max_rel_error": pytest.approx(1 / 3),
                "argmax_agreement": pytest.approx(2 / 3),
            },
        ),
    ],
)
def test_what_cannot_be_compared_is_null(a, b, expected):
    found = output_agreement(a, b)
    assert {k: found[k] for k in expected} == expected


def test_a_pipeline_agree_function_replaces_argmax():
    calls = []

    def agree(out_a, out_b):
        calls.append((out_a, out_b))
        return 0.5

    found = output_agreement({0: [1.0], 1: [2.0]}, {0: [1.0], 1: [2.5]}, agree)
    assert found["argmax_agreement"] == 0.5 and calls == [([1.0], [1.0]), ([2.0], [2.5])]
    assert found["max_abs_error"] == 0.5


def test_nothing_shared_and_the_text():
    assert output_agreement({}, {0: [1]}) == {
        "max_abs_error": None,
        "max_rel_error": None,
        "argmax_agreement": None,
        "items": 0,
    }
    assert (
        agreement_text(
            {
                "max_abs_error": 0.0123,
                "max_rel_error": 0.02,
                "argmax_agreement": 0.984375,
                "items": 64,
            }
        )
        == "argmax agrees on 98.4 % of 64 items, max abs error 0.0123 (rel 0.02)"
    )
    assert split_items(np.float64(3.0)) == [np.float64(3.0)]
