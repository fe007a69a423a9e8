"""``RunMeta``: the typed contents of ``run.json``, its validation and its migration.

Why a stdlib ``dataclass`` and not a msgspec ``Struct``: the record must keep
keys it does not know (``extra``, so a run written by a newer workbench or
another tool survives a load and a save), must act as a read-only mapping while
older code still says ``run.meta["config"]``, and must give errors that name
the file and the field in this project's words ("``run.json``: field
``config.batch_size`` must be an integer >= 1, got 'eight'"). A Struct drops
unknown fields and words its own errors; the few checks below are cheaper to
read than the hooks needed to bend one. ``run.json`` is small, so speed does
not enter.

Format versions: 1 (the first release) and 2 (this one). Version 2 adds
``status`` ("complete", "interrupted" or "incomplete: <why>") and always
writes ``kind``; :func:`migrate` fills both into a version 1 record.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FORMAT = "workbench.run"
VERSION = 2
KINDS = ("profile", "load", "simulation", "served", "ingested")
STATUS_COMPLETE = "complete"

# (field, accepted types, may be None): checked on every load and every Run built from a dict.
_OPTIONAL_DICTS = ("trace", "load", "simulation", "fingerprint", "noise", "quantization", "memory",
                   "cold_start", "attributes", "serving")


class MetaError(ValueError):
    """One field of a run record is wrong; ``field`` is its dotted name."""

    def __init__(self, field_name: str, problem: str):
        super().__init__(f"field {field_name!r} {problem}")
        self.field = field_name


@dataclass
class RunMeta:
    """What a run was: its kind, pipeline, stages, configuration, environment and policy.

    kind: profile | load | simulation | served | ingested.
    stages: stage names in pipeline order (a load run's start with the two waits).
    config: ``PipelineConfig.to_dict()`` (device, batch_size, precision, options, threads).
    timing: warm-up and measured request counts, clock, CUDA sync policy.
    trace: the traced run's facts and ``file`` (a file name inside the run folder), or None.
    load / simulation: the load generator's or the simulator's parameters and results.
    status: "complete", "interrupted" or "incomplete: <why>" (e.g. "incomplete: timeout").
    The other optional sections are filled by the features that measure them.
    extra: keys this version does not know, kept so a load and save loses nothing.
    """

    kind: str = "profile"
    pipeline: str | None = None
    description: str | None = None
    stages: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    created: str | None = None
    timing: dict[str, Any] = field(default_factory=dict)
    trace: dict[str, Any] | None = None
    load: dict[str, Any] | None = None
    simulation: dict[str, Any] | None = None
    pipeline_stages: list[str] | None = None
    status: str = STATUS_COMPLETE
    fingerprint: dict[str, Any] | None = None
    noise: dict[str, Any] | None = None
    quantization: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    cold_start: dict[str, Any] | None = None
    attributes: dict[str, Any] | None = None
    serving: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sync_policy(self) -> str:
        """How GPU stages were timed: ``"stage"`` (the default, and every CPU run) or ``"request"``.

        ``"request"`` (one synchronize per request) is notebook 3's wrong way to time
        asynchronous GPU work; such a run never stands in for a configuration.
        """
        return str((self.timing or {}).get("sync") or "stage")

    # -- the read-only mapping view older code uses (run.meta["config"], run.meta.get("noise")) --
    def __getitem__(self, key: str) -> Any:
        if key in _FIELDS:
            value = getattr(self, key)
            if value is None and key not in _ALWAYS:
                raise KeyError(key)
            return value
        if key == "format":
            return FORMAT
        if key == "version":
            return VERSION
        return self.extra[key]

    def __setitem__(self, key: str, value: Any) -> None:
        """Transitional: code that still assigns ``meta[key]`` sets the field (or an extra key)."""
        if key in _FIELDS:
            setattr(self, key, value)
        elif key not in ("format", "version"):
            self.extra[key] = value

    def __iter__(self):
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def __contains__(self, key: object) -> bool:
        return key in self.to_dict()

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def keys(self):
        return self.to_dict().keys()

    def items(self):
        return self.to_dict().items()

    def values(self):
        return self.to_dict().values()

    def to_dict(self) -> dict[str, Any]:
        """The ``run.json`` object: format, version, every set field, the extra keys at top level."""
        out = {k: v for k, v in self.extra.items() if k not in _FIELDS}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is not None or name in _ALWAYS:
                out[name] = value
        return out | {"format": FORMAT, "version": VERSION}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunMeta":
        """A validated RunMeta from a current-version mapping; raises :class:`MetaError`."""
        if isinstance(data, RunMeta):
            return dataclasses.replace(data, extra=dict(data.extra))
        if not isinstance(data, Mapping):
            raise MetaError("$", f"must be a JSON object, got {type(data).__name__}")
        known = {k: data[k] for k in _FIELDS if k in data}
        extra = {k: v for k, v in data.items() if k not in _FIELDS and k not in ("format", "version")}
        meta = cls(**known, extra=extra)
        validate(meta)
        return meta


_FIELDS = tuple(f.name for f in dataclasses.fields(RunMeta) if f.name != "extra")
_ALWAYS = ("kind", "pipeline", "description", "stages", "config", "env", "created", "timing", "trace", "status")
Mapping.register(RunMeta)


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A format-1 ``run.json`` object as format 2: ``kind`` and ``status`` filled in."""
    out = dict(data)
    out.setdefault("kind", "profile")
    out.setdefault("status", STATUS_COMPLETE)
    out.setdefault("trace", None)
    out["version"] = VERSION
    return out


def check_version(data: dict[str, Any]) -> dict[str, Any]:
    """The object at the current version, or :class:`MetaError` for a foreign, older or newer one."""
    if data.get("format") != FORMAT:
        raise MetaError("format", f"must be {FORMAT!r} (not a workbench run), got {data.get('format')!r}")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise MetaError("version", f"must be an integer format version 1..{VERSION}, got {version!r}")
    if version > VERSION:
        raise MetaError("version", f"is {version}, newer than this workbench reads ({VERSION}); upgrade the workbench")
    return migrate(data) if version < VERSION else data


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _expect(ok: bool, name: str, what: str, value: Any) -> None:
    if not ok:
        raise MetaError(name, f"must be {what}, got {value!r:.80}")


def validate(meta: RunMeta) -> None:
    """Raise :class:`MetaError` naming the first wrong field (types the readers rely on)."""
    _expect(meta.kind in KINDS, "kind", f"one of {', '.join(KINDS)}", meta.kind)
    for name in ("pipeline", "description", "created"):
        value = getattr(meta, name)
        _expect(value is None or isinstance(value, str), name, "a string", value)
    for name in ("stages", "pipeline_stages"):
        value = getattr(meta, name)
        ok = (value is None and name == "pipeline_stages") or (
            isinstance(value, list) and all(isinstance(s, str) for s in value))
        _expect(ok, name, "a list of stage names", value)
    _expect(len(set(meta.stages)) == len(meta.stages), "stages", "unique names", meta.stages)
    for name in ("config", "env", "timing", "extra"):
        _expect(isinstance(getattr(meta, name), dict), name, "an object", getattr(meta, name))
    for name in _OPTIONAL_DICTS:
        value = getattr(meta, name)
        _expect(value is None or isinstance(value, dict), name, "an object or null", value)
    _expect(isinstance(meta.status, str) and (meta.status in (STATUS_COMPLETE, "interrupted")
                                              or meta.status.startswith("incomplete")),
            "status", "'complete', 'interrupted' or 'incomplete: <why>'", meta.status)
    _validate_config(meta.config)
    _validate_timing(meta.timing)
    if meta.trace is not None and "file" in meta.trace:
        _expect(isinstance(meta.trace["file"], str), "trace.file", "a file name", meta.trace["file"])


def _validate_config(cfg: dict[str, Any]) -> None:
    if "device" in cfg:
        _expect(isinstance(cfg["device"], str), "config.device", "a string such as 'cpu' or 'cuda:0'", cfg["device"])
    if "batch_size" in cfg:
        _expect(_is_int(cfg["batch_size"]) and cfg["batch_size"] >= 1, "config.batch_size", "an integer >= 1",
                cfg["batch_size"])
    if "precision" in cfg:
        _expect(isinstance(cfg["precision"], str), "config.precision", "a string such as 'fp32'", cfg["precision"])
    if "options" in cfg:
        _expect(isinstance(cfg["options"], dict), "config.options", "an object", cfg["options"])
    if cfg.get("threads") is not None:
        _expect(_is_int(cfg["threads"]) and cfg["threads"] >= 1, "config.threads", "an integer >= 1 or null",
                cfg["threads"])


def _validate_timing(timing: dict[str, Any]) -> None:
    for key in ("warmup", "requests"):
        if key in timing:
            _expect(_is_int(timing[key]) and timing[key] >= 0, f"timing.{key}", "an integer >= 0", timing[key])
