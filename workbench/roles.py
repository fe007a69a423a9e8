"""What kind of work a stage does (its role), so the audit can name a bottleneck by what it is.

A stage's role is, in this order: the declared one (``@pipe.stage(role="io")``); the evidence, the
library holding at least :data:`EVIDENCE_SHARE` of its time (:data:`EVIDENCE_ROLES`), which
overrules the name; the name's (:data:`NAME_ROLES`). A run records ``stage_roles`` declared, else
the name's, so a recorded role equal to the name's cannot be told from it: evidence may overrule it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

ROLES = ("io", "remote", "preprocess", "compute", "serialize")

# stage name -> the role the name suggests, written by role
NAME_ROLES = {
    name: role
    for role, names in {
        "serialize": ("parse", "deserialize", "serialize", "encode"),
        "io": ("hydrate", "feature_hydration", "features", "lookup", "fetch"),
        "preprocess": ("preprocess", "tokenize", "decode", "resize"),
        "compute": ("forward", "model", "model_forward", "inference", "postprocess"),
        "remote": ("remote", "rpc", "call"),
    }.items()
    for name in names
}

# library (as workbench.analysis.python_frames names it) -> the role its time is evidence of
EVIDENCE_ROLES = {
    library: role
    for role, libraries in {
        "compute": ("torch",),
        "preprocess": ("PIL", "cv2", "torchvision", "tokenizers"),
        "io": ("redis", "sqlite3"),
        "remote": ("socket",),
        "serialize": ("json", "orjson", "msgspec"),
    }.items()
    for library in libraries
}
LIBRARY_LABELS = {"torch": "torch operators", "socket": "sockets and HTTP clients"}
EVIDENCE_SHARE = 0.5


def stage_role(stage: str, declared: dict[str, str] | None = None) -> str | None:
    """The given role (declared or decided), else the name's, else None."""
    if declared and declared.get(stage):
        return declared[stage]
    return NAME_ROLES.get(stage)


@dataclass(frozen=True)
class RoleDecision:
    """One stage's role; source: "declared", "evidence", "name" or None. library, share: the library
    holding the most of its time; overrules: the name's role where the evidence decided otherwise."""

    stage: str
    role: str | None
    source: str | None
    library: str | None = None
    share: float | None = None
    name_role: str | None = None
    overrules: str | None = None

    @property
    def evidence(self) -> str:
        """``"; 91% of its traced time is in PIL"`` (empty without evidence)."""
        if self.library is None or self.share is None:
            return ""
        return f"; {self.share:.0%} of its traced time is in {LIBRARY_LABELS.get(self.library, self.library)}"

    @property
    def sentence(self) -> str | None:
        """Why, when evidence overruled the name: one sentence for the report."""
        if not self.overrules:
            return None
        suggests = f"{self.stage} is {self.role}, not {self.overrules} as its name suggests"
        return f"{suggests}: {self.evidence.removeprefix('; ')}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evidence_role(shares: dict[str, float] | None) -> tuple[str, str, float] | None:
    """``(role, library, share)`` when one library holds at least ``EVIDENCE_SHARE`` of a stage's time."""
    if not shares:
        return None
    lib = max(shares, key=lambda k: (shares[k], k))
    role = EVIDENCE_ROLES.get(lib)
    return (role, lib, shares[lib]) if role and shares[lib] >= EVIDENCE_SHARE else None


def decide_role(stage: str, recorded: str | None, shares: dict[str, float] | None) -> RoleDecision:
    """The role of one stage from its recorded role and its library shares."""
    name_role = NAME_ROLES.get(stage)
    top = max(shares, key=lambda k: (shares[k], k)) if shares else None
    lib, share = (top, shares[top]) if top else (None, None)
    if recorded and recorded != name_role:
        return RoleDecision(stage, recorded, "declared", lib, share, name_role)
    found = evidence_role(shares)
    if found:
        role, lib, share = found
        overrules = name_role if name_role and name_role != role else None
        return RoleDecision(stage, role, "evidence", lib, share, name_role, overrules)
    return RoleDecision(stage, name_role, "name" if name_role else None, lib, share, name_role)


def decide_roles(
    stages: list[str],
    recorded: dict[str, str] | None,
    libraries: dict[str, dict[str, float]] | None,
) -> dict[str, RoleDecision]:
    """Stage -> :class:`RoleDecision`, for each stage in order."""
    recorded, libraries = recorded or {}, libraries or {}
    return {s: decide_role(s, recorded.get(s), libraries.get(s)) for s in stages}
