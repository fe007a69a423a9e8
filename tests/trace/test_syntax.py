"""Locating JSON trouble for error messages: nesting depth, the key at an offset, NaN/Infinity tokens."""

from __future__ import annotations

import pytest

from workbench.trace import decode
from workbench.trace.decode import deepest_nesting, key_before, non_json_token, syntax_offset


@pytest.mark.parametrize(
    "text, expected",
    [
        (b"", (0, 0)),
        (b"[]", (1, 0)),
        (b'{"a": [[1], {"b": [2]}]}', (4, 18)),
        (b'{"s": "[[[[ {{{{ ]]]]", "t": [[0]]}', (3, 30)),  # brackets in strings do not count
        (b'{"s": "a \\" [[[[", "t": [0]}', (2, 24)),  # nor after an escaped quote
        (b'{"s": "a \\\\", "t": [[0]]}', (3, 20)),  # an escaped backslash ends the string
    ],
)
def test_deepest_nesting(text, expected):
    assert deepest_nesting(text) == expected


def test_deepest_nesting_across_blocks(monkeypatch):
    monkeypatch.setattr(
        decode, "_BLOCK", 4
    )  # string state, depth and backslash runs carry over block ends
    text = b'{"x": "\\\\\\"]]]]", "y": [[[0]]], "z": "[[[[[[[["}'
    assert deepest_nesting(text) == (4, 25)


def test_key_before_and_tokens():
    text = b'{"traceEvents": [{"name": "a", "ts": NaN}]}'
    at = text.index(b"NaN")
    assert key_before(text, at) == "ts"
    assert non_json_token(text, at) == ("NaN", at)
    assert non_json_token(b'{"a": -Infinity}', 7) == ("-Infinity", 6)
    assert non_json_token(b'{"a": 1}', 6) is None
    assert syntax_offset("JSON is malformed: invalid character (byte 74)") == 74
    assert syntax_offset("Input data was truncated") is None
