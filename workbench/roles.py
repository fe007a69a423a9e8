"""What kind of work a stage does: its role, declared or defaulted from the standard stage names.

Roles let the audit name a bottleneck by what it is (a slow ``lookup`` that
talks to Redis is ``io``; one that calls a web service is ``remote``) instead of
guessing from the name. ``@pipe.stage(role="io")`` declares one; stages named
like the standard ones get a default; any other stage has none.
"""
from __future__ import annotations

ROLES = ("io", "remote", "preprocess", "compute", "serialize")

DEFAULT_ROLES = {
    "parse": "serialize", "deserialize": "serialize", "serialize": "serialize", "encode": "serialize",
    "hydrate": "io", "feature_hydration": "io", "features": "io", "lookup": "io", "fetch": "io",
    "preprocess": "preprocess", "tokenize": "preprocess", "decode": "preprocess", "resize": "preprocess",
    "forward": "compute", "model": "compute", "model_forward": "compute", "inference": "compute",
    "postprocess": "compute", "remote": "remote", "rpc": "remote", "call": "remote",
}


def stage_role(stage: str, declared: dict[str, str] | None = None) -> str | None:
    """The declared role, else the default for a standard name, else None."""
    if declared and declared.get(stage):
        return declared[stage]
    return DEFAULT_ROLES.get(stage)
