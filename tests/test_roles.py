"""Roles from evidence: declared, else the library holding half the stage's time, else the name."""

from __future__ import annotations

import pytest

from workbench.roles import (
    EVIDENCE_ROLES,
    NAME_ROLES,
    ROLES,
    decide_role,
    decide_roles,
    evidence_role,
)


@pytest.mark.parametrize(
    "library, role",
    [
        ("torch", "compute"),
        ("PIL", "preprocess"),
        ("cv2", "preprocess"),
        ("tokenizers", "preprocess"),
        ("socket", "remote"),
        ("redis", "io"),
        ("sqlite3", "io"),
        ("json", "serialize"),
        ("orjson", "serialize"),
        ("msgspec", "serialize"),
    ],
)
def test_each_library_is_evidence_of_its_role(library, role):
    assert evidence_role({library: 0.5}) == (role, library, 0.5)
    assert evidence_role({library: 0.4999}) is None


def test_every_role_named_anywhere_is_a_known_role():
    assert set(EVIDENCE_ROLES.values()) <= set(ROLES) and set(NAME_ROLES.values()) <= set(ROLES)


def test_a_torch_decode_stage_is_compute_and_overrules_its_name():
    d = decide_role("decode", "preprocess", {"torch": 1.0})  # the pipeline recorded the name's role
    assert (d.role, d.source, d.overrules, d.name_role) == (
        "compute",
        "evidence",
        "preprocess",
        "preprocess",
    )
    assert d.sentence == (
        "decode is compute, not preprocess as its name suggests: "
        "100% of its traced time is in torch operators"
    )


def test_declared_wins_over_evidence_and_name_is_the_fallback():
    declared = decide_role("decode", "io", {"torch": 1.0})
    assert (declared.role, declared.source, declared.overrules) == ("io", "declared", None)
    assert declared.evidence == "; 100% of its traced time is in torch operators"
    named = decide_role("hydrate", "io", None)
    assert (named.role, named.source, named.evidence, named.sentence) == ("io", "name", "", None)
    agreeing = decide_role("hydrate", "io", {"redis": 0.9, "json": 0.05})
    assert (agreeing.role, agreeing.source, agreeing.overrules, agreeing.sentence) == (
        "io",
        "evidence",
        None,
        None,
    )
    assert decide_role("mystery", None, {"PIL": 0.3}).role is None


def test_decide_roles_keeps_the_stage_order():
    out = decide_roles(
        ["parse", "mystery", "forward"], {"parse": "serialize"}, {"mystery": {"sqlite3": 0.8}}
    )
    assert list(out) == ["parse", "mystery", "forward"]
    assert [(d.role, d.source) for d in out.values()] == [
        ("serialize", "name"),
        ("io", "evidence"),
        ("compute", "name"),
    ]
    assert out["mystery"].to_dict() == {
        "stage": "mystery",
        "role": "io",
        "source": "evidence",
        "library": "sqlite3",
        "share": 0.8,
        "name_role": None,
        "overrules": None,
    }
