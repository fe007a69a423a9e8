"""The stage ranges' prefix (like torch's ``ProfilerStep#``) shared by the runner and the trace
analysis, defined here only; and :func:`slug`, the one rule turning a name into a path component."""

import re

STAGE_PREFIX = "workbench.stage::"


def stage_range_name(stage: str) -> str:
    """The ``record_function`` name of a pipeline stage."""
    return STAGE_PREFIX + stage


def stage_from_range_name(name: str) -> str | None:
    """The stage a trace range belongs to, or None when it is not a stage range."""
    if isinstance(name, str) and name.startswith(STAGE_PREFIX):
        return name[len(STAGE_PREFIX) :]
    return None


# characters of a slug: a default folder name stays far below the file system's 255 bytes
SLUG_MAX = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def slug(name: object) -> str:
    """``name`` from data as one safe path component: runs of anything but ``[A-Za-z0-9_.-]`` as
    ``-``, no leading dot or dash, at most :data:`SLUG_MAX` characters, else ``unnamed``."""
    text = _UNSAFE.sub("-", str(name)).lstrip(".-")[:SLUG_MAX].rstrip(".-")
    return text or "unnamed"
