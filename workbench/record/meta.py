"""``RunMeta``: the typed contents of ``run.json``, decoded once at the boundary, and its migration.

Past :func:`decode_meta` code reads attributes and never checks a type; a value that does not fit
is one :class:`MetaError` naming the dotted field and the value (sections: :mod:`.sections`).
Format versions: 1, 2 (adds ``status``, always writes ``kind``) and 3 (every declared field written,
null when unset); :func:`migrate` brings 1 and 2 to 3.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ..errors import is_int
from .sections import (
    Attributes,
    ColdStart,
    Config,
    Env,
    Fingerprint,
    Ingest,
    Json,
    Load,
    Memory,
    MetaError,
    Noise,
    Quantization,
    Section,
    Serving,
    Simulation,
    Sampled,
    Stacks,
    Timing,
    TraceInfo,
    convert_checked,
)

FORMAT = "workbench.run"
VERSION = 3
KINDS = ("profile", "load", "simulation", "served", "ingested")
# a run's status: complete, stopped by a request past --timeout-s, or by Ctrl-C / SIGTERM
STATUS_COMPLETE = "complete"
STATUS_TIMEOUT = "incomplete: timeout"
STATUS_INTERRUPTED = "interrupted"
Kind = Literal["profile", "load", "simulation", "served", "ingested"]
# which section a kind of run cannot do without (its readers rely on it)
REQUIRED_SECTION = {"load": "load", "served": "load", "simulation": "simulation"}


@dataclass(frozen=True)
class RunMeta:
    """What a run was: its kind, pipeline, stages, configuration, environment and what measured it.

    ``stages``: in order (a load run's start with the two waits); ``pipeline_stages``: the
    pipeline's own where ``stages`` adds others; ``sampled``: the sampler's raw rows, saved before
    any analysis; the optional sections are None when not measured; ``extra``: top-level keys this
    version does not know, kept so a load and save loses nothing.
    """

    kind: Kind = "profile"
    pipeline: str | None = None
    description: str | None = None
    stages: list[str] = field(default_factory=list)
    config: Config = field(default_factory=Config)
    env: Env = field(default_factory=Env)
    created: str | None = None
    timing: Timing = field(default_factory=Timing)
    trace: TraceInfo | None = None
    load: Load | None = None
    simulation: Simulation | None = None
    pipeline_stages: list[str] | None = None
    status: str = STATUS_COMPLETE
    fingerprint: Fingerprint | None = None
    noise: Noise | None = None
    quantization: Quantization | None = None
    memory: Memory | None = None
    cold_start: ColdStart | None = None
    attributes: Attributes | None = None
    serving: Serving | None = None
    ingest: Ingest | None = None
    stage_roles: dict[str, str] | None = None
    stacks: Stacks | None = None
    sampled: Sampled | None = None
    extra: Json = field(default_factory=dict)

    @property
    def sync_policy(self) -> str:
        """How GPU stages were timed: ``"stage"`` (the default) or ``"request"`` (notebook 3's wrong
        way: such a run never stands in for a configuration)."""
        return self.timing.sync or "stage"

    def to_dict(self) -> dict[str, Any]:
        """The ``run.json`` object: format, version, every field (sections as objects), the extra keys."""
        out = {k: v for k, v in self.extra.items() if k not in _FIELDS}
        for name in _FIELDS:
            value = getattr(self, name)
            out[name] = value.to_dict() if isinstance(value, Section) else value
        return out | {"format": FORMAT, "version": VERSION}

    @classmethod
    def from_dict(cls, data: Any) -> "RunMeta":
        """A checked RunMeta from a current-version mapping (a producer's dict); raises :class:`MetaError`."""
        if isinstance(data, RunMeta):
            return data
        if not isinstance(data, dict):
            raise MetaError("$", f"must be a JSON object, got {type(data).__name__}")
        body = {k: v for k, v in data.items() if k not in ("format", "version")}
        meta = convert_checked(body, cls, "")
        validate(meta)
        return meta

    def replace(self, **changes: Any) -> "RunMeta":
        """A copy with some fields changed (sections given as dicts are checked and typed)."""
        typed = {
            k: _SECTION_TYPES[k].from_dict(v) if k in _SECTION_TYPES and isinstance(v, dict) else v
            for k, v in changes.items()
        }
        meta = dataclasses.replace(self, **typed)
        validate(meta)
        return meta


_FIELDS = tuple(f.name for f in dataclasses.fields(RunMeta) if f.name != "extra")
_SECTION_TYPES: dict[str, type[Section]] = {c._name: c for c in Section.__subclasses__()}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A format-1 or format-2 ``run.json`` object as format 3 (``kind``, ``status`` and ``trace`` filled in)."""
    out = dict(data)
    out.setdefault("kind", "profile")
    out.setdefault("status", STATUS_COMPLETE)
    out.setdefault("trace", None)
    out["version"] = VERSION
    return out


def decode_meta(raw: bytes) -> RunMeta:
    """The boundary: ``run.json`` bytes (any format version up to this one) -> a checked RunMeta."""
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:  # ValidationError too
        raise MetaError("$", f"is not valid JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise MetaError("$", f"must be a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise MetaError(
            "format", f"must be {FORMAT!r} (not a workbench run), got {data.get('format')!r:.80}"
        )
    version = data.get("version")
    if not (is_int(version) and version >= 1):
        raise MetaError(
            "version", f"must be an integer format version 1..{VERSION}, got {version!r:.80}"
        )
    if version > VERSION:
        raise MetaError(
            "version",
            f"is {version}, newer than this workbench reads ({VERSION}); upgrade the workbench",
        )
    data = migrate(data) if version < VERSION else data
    for section, cls in _SECTION_TYPES.items():  # fields a file may leave out, never write null
        values = data.get(section)
        for name in cls._left_out_when_unset if isinstance(values, dict) else ():
            if name in values and values[name] is None:
                raise MetaError(
                    f"{section}.{name}", "must be a value (may be left out, never null), got None"
                )
    meta = RunMeta.from_dict(data)
    section = REQUIRED_SECTION.get(meta.kind)  # what the commands reading this kind rely on
    if section is not None:
        _expect(
            getattr(meta, section) is not None, section, f"an object on a {meta.kind} run", None
        )
    return meta


def _expect(ok: bool, name: str, what: str, value: Any) -> None:
    if not ok:
        raise MetaError(name, f"must be {what}, got {value!r:.80}")


def validate(meta: RunMeta) -> None:
    """Raise :class:`MetaError` naming the first field that breaks a rule between fields (types are msgspec's)."""
    _expect(len(set(meta.stages)) == len(meta.stages), "stages", "unique names", meta.stages)
    _expect(
        meta.status in (STATUS_COMPLETE, STATUS_INTERRUPTED)
        or meta.status.startswith("incomplete"),
        "status",
        "'complete', 'interrupted' or 'incomplete: <why>'",
        meta.status,
    )
    if meta.trace is not None and meta.trace.file is not None:
        _expect(bool(meta.trace.file), "trace.file", "a file name", meta.trace.file)
