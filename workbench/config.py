"""The configuration a pipeline factory builds a pipeline from.

A factory ``build(config) -> Pipeline`` is called again whenever a slider moves,
so everything that changes the pipeline lives here: device, batch size,
precision, torch CPU threads and free user options.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from .errors import ConfigError, check_int, is_int

DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "bf16", "fp16", "int8")


@dataclass(frozen=True)
class PipelineConfig:
    """What a factory needs to build a pipeline.

    device: ``"cpu"`` or ``"cuda"`` (``"cuda:N"`` picks a GPU).
    batch_size: input items per request (one pipeline call), >= 1.
    precision: one of ``fp32``, ``bf16``, ``fp16``, ``int8``.
    options: free user fields (JSON-serialisable), e.g. ``{"hidden": 256}``.
    threads: torch intra-op CPU threads for the thread that runs the stages, >= 1;
        None keeps torch's default. OpenMP keeps the count per OS thread, so the
        runner applies it in every thread that runs stages (see :meth:`apply_threads`).
    """

    device: str = "cpu"
    batch_size: int = 1
    precision: str = "fp32"
    options: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or self.device.split(":")[0] not in DEVICES:
            raise ConfigError(f"device must be 'cpu' or 'cuda[:N]', got {self.device!r}")
        check_int("batch_size", self.batch_size, 1)
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if not isinstance(self.options, dict):
            raise ConfigError(f"options must be a dict, got {type(self.options).__name__}")
        if self.threads is not None and not (is_int(self.threads) and self.threads >= 1):
            raise ConfigError(
                f"threads must be an integer >= 1 or None (torch's default), got {self.threads!r}"
            )

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def replace(self, **changes: Any) -> "PipelineConfig":
        return replace(self, **changes)

    def apply_threads(self) -> int | None:
        """Set torch's intra-op threads in the calling thread when ``threads`` is set.

        Returns the count in force in this thread afterwards (None without torch).
        Call it in the thread that runs the stages: a worker thread does not
        inherit the count set elsewhere.
        """
        from .device import torch_or_none

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
