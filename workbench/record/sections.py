"""The typed sections of ``run.json``: one frozen dataclass per object (config, timing, noise, load, ...).

msgspec checks the declared types on decode (strict: no text for a number, finite floats only);
undeclared keys are kept in ``extra`` and written back. Units are in the names; counts are integers.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, NotRequired, TypedDict

import msgspec

from ..errors import RunRecordError, value_at

NonNegInt = Annotated[int, msgspec.Meta(ge=0)]
PosInt = Annotated[int, msgspec.Meta(ge=1)]
Number = Annotated[float, msgspec.Meta(ge=-1e300, le=1e300)]  # finite: ints are accepted as floats
NonNegNumber = Annotated[float, msgspec.Meta(ge=0, le=1e300)]
Json = dict[str, Any]


# -- the objects inside sections that readers index by key: typed dicts, checked on decode -------------------------
class FailureRecord(TypedDict):
    """One distinct failure and how often it happened (``runner.failure_records``)."""

    stage: str
    type: str
    message: str
    where: str | None
    count: PosInt


class Policy(TypedDict):
    """A dynamic batching policy (``BatchPolicy.params()``)."""

    max_batch_size: PosInt
    max_wait_ms: NonNegNumber
    concurrency: NotRequired[PosInt]


class Continuous(TypedDict):
    """A continuous batching run's policy and steps (``workbench.batching.continuous_live``)."""

    max_num_seqs: PosInt
    max_batched_tokens: PosInt
    chunk_tokens: PosInt | None
    steps: NonNegInt
    mean_running: Number | None
    mean_step_tokens: Number | None
    step_model: NotRequired[dict[str, Number]]
    step_noise_ns: NotRequired[list[Number]]


class Arrivals(TypedDict, total=False):
    """An arrival process (``Arrivals.params()``)."""

    process: str
    count: NonNegInt | None
    duration_s: NonNegNumber | None
    path: str
    rate_rps: NonNegNumber
    seed: int | None
    on_ms: NonNegNumber
    off_ms: NonNegNumber
    peak_rate_rps: NonNegNumber


class ServerGc(TypedDict, total=False):
    """The server's garbage collections while it served (``serving.server``)."""

    mode: str | None
    frozen_objects: NonNegInt
    collections: NonNegInt
    pause_ms_total: NonNegNumber
    pause_ms_max: NonNegNumber | None


class StackNode(TypedDict):
    """A node of the differential flame graph: its share of the tail set's and the median set's samples."""

    id: int
    parent: int
    name: str
    tail: NonNegNumber
    median: NonNegNumber


class StackStage(TypedDict, total=False):
    """One stage of the sampled stacks (``workbench.analysis.stacks``)."""

    samples: dict[str, NonNegInt]
    enough: bool
    lead: Json | None
    frames: list[Json]
    tree: list[StackNode]


class Stacks(TypedDict, total=False):
    """The timing run's sampled stacks, slow requests against median ones (``workbench.analysis.stacks``)."""

    interval_ms: NonNegNumber
    samples: NonNegInt
    unassigned: NonNegInt
    tail_set: Literal["slowest_1pct", "slowest_5pct"]
    headline: str | None
    stages: dict[str, StackStage]


class Sampled(TypedDict, total=False):
    """The sampler's raw rows: every thread, every sample, with its class (``workbench.sampling``)."""

    interval_ns: NonNegInt
    cpu_source: str | None
    classes: list[str]
    threads: list[str]
    frames: list[tuple[str, str, int]]
    stacks: list[list[int]]
    rows: dict[str, list[int]]
    gc: dict[str, list[int]]


class MetaError(RunRecordError, ValueError):
    """One field of a run record is wrong; ``field`` is its dotted name."""

    def __init__(self, field_name: str, problem: str):
        super().__init__(f"field {field_name!r} {problem}")
        self.field = field_name


@dataclass(frozen=True)
class Section:
    """Base of every run.json section: declared fields plus ``extra`` (keys this version does not know)."""

    extra: Json = field(default_factory=dict, kw_only=True)
    _name: ClassVar[str] = ""  # the section's key in run.json: ``class Env(Section, name="env")``
    # never written as null (a file may not hold null there)
    _left_out_when_unset: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, name: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._name = name

    def to_dict(self) -> Json:
        """The JSON object: every declared field (null when unset), then the extra keys."""
        out = dict(self.extra)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and not (value is None and f.name in self._left_out_when_unset):
                out[f.name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> "Section":
        """A checked section from a mapping (a producer's dict); raises ``MetaError`` naming the field."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise MetaError(cls._name or cls.__name__, f"must be an object, got {data!r:.80}")
        return convert_checked(data, cls, cls._name)


def _plain(value: Any) -> Any:
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Config(Section, name="config"):
    """``PipelineConfig.to_dict()``: device, batch size (items per request), precision, options, torch threads."""

    _left_out_when_unset: ClassVar[tuple[str, ...]] = ("device", "batch_size", "precision")
    device: str | None = None
    batch_size: PosInt | None = None
    precision: str | None = None
    options: Json = field(default_factory=dict)
    threads: PosInt | None = None


@dataclass(frozen=True)
class Env(Section, name="env"):
    """Where the run was measured (host, Python, torch, device); every field may be unknown."""

    python: str | None = None
    platform: str | None = None
    hostname: str | None = None
    pid: int | None = None
    cpu_model: str | None = None
    cores: int | None = None
    threads: int | None = None
    torch: str | None = None
    device: str | None = None
    device_name: str | None = None
    cuda: str | None = None
    gpu_capability: Any = None
    client: str | None = None


@dataclass(frozen=True)
class Timing(Section, name="timing"):
    """Warm-up and measured request counts, the clock and the CUDA sync policy (``stage`` or ``request``)."""

    warmup: NonNegInt = 0
    requests: NonNegInt = 0
    clock: str | None = None
    sync: Literal["stage", "request"] | None = None
    device_timer: str | None = None
    requests_asked: NonNegInt | None = None
    max_duration_s: NonNegNumber | None = None
    stopped_by: str | None = None
    pacing: Json | None = None  # a paced run: schedule, closed-loop reference (docs/json.md)
    _left_out_when_unset: ClassVar[tuple[str, ...]] = ("pacing",)


@dataclass(frozen=True)
class TraceInfo(Section, name="trace"):
    """The traced run: its file (a name inside the run folder), request counts, profiler options, failures."""

    file: str | None = None
    requests: NonNegInt | None = None
    failed_requests: NonNegInt | None = None
    failures: list[FailureRecord] = field(default_factory=list)
    activities: list[str] | None = None
    profiler_warmup: NonNegInt | None = None
    record_shapes: bool | None = None
    with_modules: bool | None = None
    with_stack: bool | None = None
    memory_by_stage: Any = None
    stopped_by: str | None = None


@dataclass(frozen=True)
class Noise(Section, name="noise"):
    """The machine's noise verdict (``noisy`` true/false/null = unknown) with its readings and rule."""

    noisy: bool | None = None
    reasons: list[str] = field(default_factory=list)
    fix: str | None = None
    note: str | None = None
    thresholds: Json | None = None
    cores: int | None = None
    other_cores: Number | None = None
    steal_pct: Number | None = None
    torch_threads: int | None = None
    load_before_1m: Number | None = None
    load_after_1m: Number | None = None
    duration_s: Number | None = None
    governor: str | None = None
    iqr_over_median: Number | None = None
    p99_over_p50: Number | None = None
    server_cores: Number | None = None
    generator_lag_p99_ms: Number | None = None


@dataclass(frozen=True)
class Fingerprint(Section, name="fingerprint"):
    """What must match for two runs to be compared or pooled (``workbench.fingerprint``)."""

    pipeline: str | None = None
    factory: str | None = None
    options: Json = field(default_factory=dict)
    precision: str | None = None
    device: str | None = None
    batch_size: PosInt | None = None
    threads: int | None = None
    torch: str | None = None
    workbench: str | None = None
    host: Json = field(default_factory=dict)
    model: Any = None
    model_note: str | None = None


@dataclass(frozen=True)
class Load(Section, name="load"):
    """A load, served or server run's arrivals, policy and results (throughput, batches, generator lag)."""

    throughput_rps: Number | None = None
    mean_batch_size: Number | None = None
    utilization: Number | None = None
    batch_sizes: dict[str, NonNegInt] | None = None
    requests: NonNegInt | None = None
    failed: NonNegInt | None = None
    batches: NonNegInt | None = None
    generator_lag_ms: Number | None = None
    generator_lag_p99_ms: Number | None = None
    late_requests: NonNegInt | None = None
    late_threshold_ms: Number | None = None
    behind_schedule: bool | None = None
    lag_p99_limit_ms: Number | None = None
    arrivals: Arrivals | None = None
    policy: Policy | None = None
    warmup_calls_per_executor: NonNegInt | None = None
    warmup_failed: NonNegInt | None = None
    warmup_failures: list[FailureRecord] = field(default_factory=list)
    drain_timeout_s: Number | None = None
    switch_interval_s: Number | None = None
    timeout_s: Number | None = None
    dropped: NonNegInt | None = None
    in_flight_at_stop: NonNegInt | None = None
    continuous: Continuous | None = None  # a generative pipeline's tokens scheduled step by step


@dataclass(frozen=True)
class Serving(Section, name="serving"):
    """How a served run was served or driven: role (server/client), URL, stack, GC and cache notes."""

    role: str | None = None
    url: str | None = None
    stopped_by: str | None = None
    stack: str | None = None
    policy: Policy | None = None
    warmup_failed: NonNegInt | None = None
    drain_timeout_s: Number | None = None
    gc: ServerGc | None = None
    cache: Json | None = None
    server_timing: bool | None = None
    request_id_prefix: str | None = None
    client: str | None = None
    generator_lag: dict[str, Number] | None = None
    server_cpu_s: Number | None = None


@dataclass(frozen=True)
class Simulation(Section, name="simulation"):
    """A simulation's model and parameters (``workbench.batching.simulator``)."""

    arrivals: Json | None = None
    seed: int | None = None
    service_model: Any = None
    service_draws: str | None = None
    speed_windows: NonNegInt | None = None
    extrapolated_below_smallest_size: bool | None = None
    policy: Policy | None = None
    capacity_rps: Number | None = None
    rate_rps: Number | None = None
    stable: bool | None = None
    service_runs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Memory(Section, name="memory"):
    """Resident memory over the run (MB) and the leak rule's verdict."""

    samples_mb: list[Number] = field(default_factory=list)
    slope_mb_per_100: Number | None = None
    r2: Number | None = None
    growth_mb: Number | None = None
    leak_suspected: bool | None = None


@dataclass(frozen=True)
class ColdStart(Section, name="cold_start"):
    """Building the pipeline and its first request (ms)."""

    build_ms: Number | None = None
    first_request_ms: Number | None = None
    first_request_ok: bool | None = None


@dataclass(frozen=True)
class Attributes(Section, name="attributes"):
    """Request attributes the pipeline described (names, per-stage values, errors)."""

    names: list[str] = field(default_factory=list)
    stages: Any = None
    errors: Json = field(default_factory=dict)


@dataclass(frozen=True)
class Quantization(Section, name="quantization"):
    """What int8 quantized: the factory's reports and one line of text."""

    models: list[Json] = field(default_factory=list)
    text: str | None = None


@dataclass(frozen=True)
class Ingest(Section, name="ingest"):
    """Where ingested spans came from: files, span and request counts, the stage map, root span names."""

    files: list[str] = field(default_factory=list)
    spans: NonNegInt = 0
    requests: NonNegInt = 0
    stage_map: dict[str, str] = field(default_factory=dict)
    root_names: list[str] = field(default_factory=list)
    dropped: dict[str, NonNegInt] = field(default_factory=dict)  # why -> spans left out
    clamped: dict[str, NonNegInt] = field(default_factory=dict)  # why -> spans clipped in time
    flagged: list[str] = field(default_factory=list)  # spans dropped or clamped (the first 20)


# -- decoding: msgspec checks the declared types; unknown keys go to ``extra`` ----------------------------------
_AT = re.compile(r"^(?P<what>.*?) - at `\$(?P<path>[^`]*)`$")


def convert_checked(data: dict[str, Any], cls: type, prefix: str) -> Any:
    """``data`` as ``cls`` (a frozen dataclass), unknown keys kept in each ``extra``; :class:`MetaError` if it does not fit."""
    # a key named "extra" is data like any other, never the dataclass's own ``extra`` field
    sections = _fields_holding(cls, _is_section)
    plain = {
        k: {i: w for i, w in v.items() if i != "extra"}
        if k in sections and isinstance(v, dict)
        else v
        for k, v in data.items()
        if k != "extra"
    }
    try:
        obj = msgspec.convert(plain, cls, strict=True)
    except msgspec.ValidationError as exc:
        raise _meta_error(exc, data, prefix) from None
    return _with_extras(obj, data)


def _with_extras(obj: Any, data: dict[str, Any]) -> Any:
    """``obj`` with the keys of ``data`` its class does not declare in ``extra`` (sections too)."""
    names = [f.name for f in dataclasses.fields(obj) if f.name != "extra"]
    changes: dict[str, Any] = {"extra": {k: v for k, v in data.items() if k not in names}}
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, Section) and isinstance(data.get(name), dict):
            changes[name] = _with_extras(value, data[name])
        elif name in _fields_holding(type(obj), typing.is_typeddict) and name in data:
            # checked; msgspec drops the keys a TypedDict does not declare
            changes[name] = data[name]
    return dataclasses.replace(obj, **changes)


def _meta_error(exc: msgspec.ValidationError, data: Any, prefix: str) -> MetaError:
    """msgspec's "Expected `int` >= 1 - at `$.config.batch_size`" in this project's words."""
    m = _AT.match(str(exc))
    what, path = (m.group("what"), m.group("path")) if m else (str(exc), "")
    path = path.lstrip(".")
    dotted, _, index = path.partition("[")  # "stages[0]": field "stages", item [0]
    name = ".".join(p for p in (prefix, dotted.rstrip(".")) if p) or "$"
    item = f"item [{index} " if index else ""
    what = re.sub(r", got `[^`]*`$", "", what).replace("`", "")
    if what.startswith("Expected "):
        what = "must be " + what[len("Expected ") :].replace("| null", "or null")
    elif what.startswith("Invalid enum value"):
        what = "must be one of the documented values"
    elif what.startswith("Object missing required field "):
        what = f"must have field {what.rsplit(' ', 1)[-1]!r}"
    return MetaError(name, f"{item}{what}, got {value_at(data, path)!r:.80}")


@functools.cache
def _fields_holding(cls: type, test: Any) -> frozenset[str]:
    """The fields of ``cls`` whose type holds one passing ``test`` (``list[X]``, ``X | None``...)."""
    return frozenset(
        name for name, hint in typing.get_type_hints(cls).items() if _holds(hint, test)
    )


def _holds(hint: Any, test: Any) -> bool:
    return test(hint) or any(_holds(a, test) for a in typing.get_args(hint))


def _is_section(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, Section)
