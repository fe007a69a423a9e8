"""Issue 35: a name from data (a span's service.name, a pipeline's name) becomes a safe path component."""

from __future__ import annotations

import pytest

from workbench.naming import SLUG_MAX, slug


@pytest.mark.parametrize(
    "name, expected",
    [
        ("checkout-go", "checkout-go"),
        ("/../../../x", "x"),
        ("..", "unnamed"),
        ("", "unnamed"),
        ("a\x00b", "a-b"),
        ("my service/v2", "my-service-v2"),
        ("-rf", "rf"),
        (".hidden", "hidden"),
        ("café", "caf"),
        (None, "None"),
    ],
)
def test_a_slug_keeps_safe_characters_and_nothing_that_climbs(name, expected):
    assert slug(name) == expected


def test_a_slug_is_bounded():
    assert slug("y" * 300) == "y" * SLUG_MAX and SLUG_MAX == 64
