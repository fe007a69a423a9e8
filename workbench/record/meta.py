"""``RunMeta``: the typed contents of ``run.json``, decoded once at the boundary, and its migration.

Past :func:`decode_meta` code reads attributes and never checks a type; a value that does not fit
is one :class:`MetaError` naming the dotted field and the value (sections: :mod:`.sections`).
"""

from __future__ import annotations

import dataclasses
import functools
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
VERSION = 4
KINDS = ("profile", "load", "simulation", "served", "ingested")
# a run's status: complete, stopped by a request past --timeout-s, or by Ctrl-C / SIGTERM
STATUS_COMPLETE = "complete"
STATUS_TIMEOUT = "incomplete: timeout"
STATUS_INTERRUPTED = "interrupted"
Kind = Literal[KINDS]  # type: ignore[valid-type] - the tuple above
# which section a kind of run cannot do without (its readers rely on it)
REQUIRED_SECTION = {"load": "load", "served": "load", "simulation": "simulation"}


@dataclass(frozen=True, kw_only=True)
class RunMeta:
    """What every run records: its kind, pipeline, stages, configuration, environment, timing, status.

    One subclass per kind with only its own sections; :meth:`from_dict` picks it. ``extra``:
    top-level keys this version does not know, kept so a load and save loses nothing.
    """

    kind: Kind = "profile"
    pipeline: str | None = None
    description: str | None = None
    stages: list[str] = field(default_factory=list)
    config: Config = field(default_factory=Config)
    env: Env = field(default_factory=Env)
    created: str | None = None
    timing: Timing = field(default_factory=Timing)
    status: str = STATUS_COMPLETE
    noise: Noise | None = None
    extra: Json = field(default_factory=dict)

    @property
    def sync_policy(self) -> str:
        """How GPU stages were timed: ``"stage"`` (the default) or ``"request"`` (notebook 3's wrong
        way: such a run never stands in for a configuration)."""
        return self.timing.sync or "stage"

    def to_dict(self) -> dict[str, Any]:
        """The ``run.json`` object: format, version, the kind's fields (sections as objects), the extra keys."""
        names = [n for n in _ORDER if n in _fields(type(self))]
        out = {k: v for k, v in self.extra.items() if k not in names}
        for name in names:
            value = getattr(self, name)
            out[name] = value.to_dict() if isinstance(value, Section) else value
        return out | {"format": FORMAT, "version": VERSION}

    @classmethod
    def from_dict(cls, data: Any) -> "RunMeta":
        """A checked meta of the class ``kind`` names, from a current-version mapping; raises :class:`MetaError`."""
        if isinstance(data, RunMeta):
            return data
        if not isinstance(data, dict):
            raise MetaError("$", f"must be a JSON object, got {type(data).__name__}")
        body = {k: v for k, v in data.items() if k not in ("format", "version")}
        kind = body.get("kind", "profile")
        _expect(kind in KINDS, "kind", f"one of {', '.join(KINDS)}", kind)
        own = _fields(META_CLASSES[kind])
        for name in [k for k in body if k in _ORDER and k not in own]:  # another kind's section
            value = body.pop(name)
            _expect(value is None, name, f"absent on a {kind} run (another kind's field)", value)
        meta = convert_checked(body, META_CLASSES[kind], "")
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


@dataclass(frozen=True, kw_only=True)
class ProfileMeta(RunMeta):
    """``profile``: a timing run, its traced run and the readings around them.

    stage_roles: stage name -> role (``forward``, ``preprocess``, ...), as the pipeline declared them.
    stacks, sampled: the summary of :mod:`workbench.analysis.stacks`, the sampler's rows.
    """

    kind: Literal["profile"] = "profile"
    trace: TraceInfo | None = None
    fingerprint: Fingerprint | None = None
    quantization: Quantization | None = None
    memory: Memory | None = None
    cold_start: ColdStart | None = None
    attributes: Attributes | None = None
    stage_roles: dict[str, str] | None = None
    stacks: Stacks | None = None
    sampled: Sampled | None = None


@dataclass(frozen=True, kw_only=True)
class LoadMeta(RunMeta):
    """``load``: a pipeline behind the dynamic batcher in process; ``stages`` adds the two waits to
    ``pipeline_stages``, the pipeline's own."""

    kind: Literal["load"] = "load"
    load: Load | None = None
    pipeline_stages: list[str] | None = None
    fingerprint: Fingerprint | None = None
    sampled: Sampled | None = None


@dataclass(frozen=True, kw_only=True)
class ServedMeta(RunMeta):
    """``served``: a pipeline served over HTTP (the server's run or the client's ``load --url``)."""

    kind: Literal["served"] = "served"
    load: Load | None = None
    serving: Serving | None = None
    pipeline_stages: list[str] | None = None
    sampled: Sampled | None = None


@dataclass(frozen=True, kw_only=True)
class SimulationMeta(RunMeta):
    """``simulation``: the dynamic batcher simulated from profiled service times."""

    kind: Literal["simulation"] = "simulation"
    simulation: Simulation | None = None


@dataclass(frozen=True, kw_only=True)
class IngestedMeta(RunMeta):
    """``ingested``: spans from another service (OTLP/JSON) turned into a run."""

    kind: Literal["ingested"] = "ingested"
    ingest: Ingest | None = None


def profile_part(meta: RunMeta) -> ProfileMeta:
    """``meta`` if a profile run's, else an empty :class:`ProfileMeta` (sections None)."""
    return meta if isinstance(meta, ProfileMeta) else _NO_PROFILE


META_CLASSES: dict[str, type[RunMeta]] = {
    "profile": ProfileMeta,
    "load": LoadMeta,
    "served": ServedMeta,
    "simulation": SimulationMeta,
    "ingested": IngestedMeta,
}
_NO_PROFILE = ProfileMeta()
# run.json's key order (format 3 wrote every kind's fields, null when not its own, in this order)
_ORDER = (
    "kind pipeline description stages config env created timing trace load simulation pipeline_stages"
    " status fingerprint noise quantization memory cold_start attributes serving ingest stage_roles"
    " stacks sampled"
).split()


@functools.cache
def _fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls) if f.name != "extra")


_SECTION_TYPES: dict[str, type[Section]] = {c._name: c for c in Section.__subclasses__()}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """An older ``run.json`` object (formats 1-3) as format 4 (only its kind's fields)."""
    out = dict(data)
    out.setdefault("kind", "profile")
    out.setdefault("status", STATUS_COMPLETE)
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
    trace = meta.trace if isinstance(meta, ProfileMeta) else None
    if trace is not None and trace.file is not None:
        _expect(bool(trace.file), "trace.file", "a file name", trace.file)
