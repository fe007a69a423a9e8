"""The configuration a factory builds a pipeline from (again whenever a slider moves), and
:class:`Range`, the one rule for a number a user gives (command line and factory options).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from .device import torch_or_none
from .errors import ConfigError, is_int, is_number

DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "bf16", "fp16", "int8")


@dataclass(frozen=True)
class PipelineConfig:
    """What a factory needs to build a pipeline: ``device`` (``"cuda:N"`` picks a GPU),
    ``batch_size`` (items per request, one pipeline call), ``precision``, ``options`` (free user
    fields, finite JSON) and ``threads`` (torch's intra-op threads; None: its default)."""

    device: str = "cpu"
    batch_size: int = 1
    precision: str = "fp32"
    options: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or self.device.split(":")[0] not in DEVICES:
            raise ConfigError(f"device must be 'cpu' or 'cuda[:N]', got {self.device!r}")
        BATCH_SIZES.check("batch_size", self.batch_size)
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if not isinstance(self.options, dict):
            raise ConfigError(f"options must be a dict, got {type(self.options).__name__}")
        for key, value in dict.items(self.options):  # not a read (pipeline.ReadOptions)
            if not _finite(value):
                raise ConfigError(f"option {key!r} must be finite JSON, got {value!r}")
        if self.threads is not None and not THREAD_COUNTS.holds(self.threads):
            raise ConfigError(
                f"threads must be {THREAD_COUNTS.text()} or None (torch's default), got {self.threads!r}"
            )

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def replace(self, **changes: Any) -> "PipelineConfig":
        return replace(self, **changes)

    def apply_threads(self) -> int | None:
        """Set ``threads`` in the calling thread (OpenMP keeps one per OS thread); the count now."""
        torch = torch_or_none()
        if torch is None:
            return None
        if self.threads is not None and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        return torch.get_num_threads()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PipelineConfig":
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value``: run.json holds only finite JSON."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    return True


@dataclass(frozen=True)
class Range:
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``), said with its ``unit``."""

    lo: float
    hi: float
    integer: bool = False
    unit: str = ""
    lo_open: bool = False

    def holds(self, value: Any) -> bool:
        if not (is_int(value) if self.integer else is_number(value)):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        return (is_int(value) or math.isfinite(value)) and above and value <= self.hi

    def text(self) -> str:
        """``an integer in [0, 100_000]``, ``a number in (0, 3.6e+06] ms``."""
        kind, left = ("an integer" if self.integer else "a number"), "(" if self.lo_open else "["
        show = (lambda v: f"{int(v):_}") if self.integer else (lambda v: f"{v:g}")
        return f"{kind} in {left}{show(self.lo)}, {show(self.hi)}] {self.unit}".rstrip()

    def check(self, name: str, value: Any) -> Any:
        """``value``, or ConfigError: ``{name} must be {text}, got {value}``."""
        if not self.holds(value):
            raise ConfigError(f"{name} must be {self.text()}, got {value!r}")
        return value


BATCH_SIZES = Range(1, 65_536, integer=True, unit="items")
THREAD_COUNTS = Range(1, 4096, integer=True, unit="threads")


def option_value(flag: str, key: str, text: str) -> Any:
    """One ``KEY=VALUE`` value of ``--option``/``--config``: JSON when it parses, else the text; a
    number that is not finite (``NaN``, ``1e400``) is refused."""

    def refuse(_constant: str):
        raise ConfigError(f"{flag} {key}={text}: not a finite number (options are finite JSON)")

    def number(literal: str) -> float:
        value = float(literal)
        return value if math.isfinite(value) else refuse(literal)

    try:
        return json.loads(text, parse_constant=refuse, parse_float=number)
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        return text


def option_ranges(**ranges: Range) -> Callable:
    """Decorate a factory ``build(config)`` with the ranges of its numeric options: a given option outside
    its range is a ConfigError naming it, before the factory runs (``build.option_ranges`` lists them)::

        @option_ranges(hidden=Range(1, 65_536, integer=True), dropout=Range(0, 1))
        def build(config): ...
    """

    def declare(factory: Callable) -> Callable:
        @functools.wraps(factory)
        def build(config: PipelineConfig):
            for key, found in ranges.items():
                if key in dict.keys(config.options):  # not a read: the factory's own reads count
                    found.check(f"option {key!r}", dict.__getitem__(config.options, key))
            return factory(config)

        build.option_ranges = dict(ranges)
        return build

    return declare


def with_overrides(options: Any, cls: type, overrides: dict[str, Any], who: str) -> Any:
    """``options`` (a frozen ``cls``; None: its defaults) with ``overrides`` by field name."""
    names = [f.name for f in fields(cls)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ConfigError(
            f"{who}: unknown option {unknown[0]!r}; the options are {cls.__name__}'s fields: "
            f"{', '.join(names)}"
        )
    return replace(options or cls(), **overrides)
