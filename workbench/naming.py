"""The one naming contract between the runner and the trace analysis.

The runner wraps every stage of a traced request in
``torch.profiler.record_function(stage_range_name(stage))``; the trace analysis
finds stage ranges with :func:`stage_from_range_name`. Like torch's
``ProfilerStep#N``, the prefix is defined here and nowhere else.

:func:`slug` is the one rule that turns a name from data into a path component.
"""

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


# -- names from data as path components ---------------------------------------------------------------------------

# characters of a slug: a default folder name stays far below the file system's 255 bytes
SLUG_MAX = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def slug(name: object) -> str:
    """``name`` (a span's ``service.name``, a pipeline's name) as one safe path component.

    Runs of anything but ASCII letters, digits, ``_``, ``.`` and ``-`` become one ``-``; leading
    dots and dashes go (no ``..``, no hidden file, no option-like name); at most :data:`SLUG_MAX`
    characters; ``unnamed`` when nothing is left. ``"/../../../x"`` is ``x``, ``"checkout go"`` is
    ``checkout-go``. Every name taken from data that becomes a folder name goes through here.
    """
    text = _UNSAFE.sub("-", str(name)).lstrip(".-")[:SLUG_MAX].rstrip(".-")
    return text or "unnamed"
