"""Decide "is there a GPU" once, in one place (:func:`cuda_available`); torch imported lazily."""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import sys
from importlib import metadata

from .errors import ConfigError


def torch_or_none():
    """The torch module, or None when torch is not installed."""
    try:
        import torch  # 1-2 s and 300 MB: only where a pipeline runs
    except ImportError:
        return None
    return torch


def torch_threads() -> int | None:
    """torch's intra-op thread count in this thread (None without torch)."""
    torch = torch_or_none()
    return torch.get_num_threads() if torch is not None else None


def require_torch():
    torch = torch_or_none()
    if torch is None:
        raise ConfigError("this needs PyTorch: pip install torch==2.13.0 (or run `make test` once)")
    return torch


def torch_version() -> str | None:
    """``torch.__version__``, from the wheel's metadata until torch is imported; None without it."""
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            return metadata.version("torch")
        except metadata.PackageNotFoundError:
            torch = torch_or_none()
    return getattr(torch, "__version__", None)


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """True when torch sees a CUDA device (a ``+cpu`` build or macOS tells without importing it)."""
    if "torch" not in sys.modules:
        try:
            build = metadata.version("torch").partition("+")[2].split(".")[0]
        except metadata.PackageNotFoundError:
            build = None
        if build == "cpu" or (build is not None and sys.platform == "darwin"):
            return False
    torch = torch_or_none()
    return bool(torch is not None and torch.cuda.is_available())


def available_devices() -> list[str]:
    """Devices a user can pick: always ``cpu``, plus ``cuda`` when present."""
    return ["cpu", "cuda"] if cuda_available() else ["cpu"]


def check_device(device: str) -> None:
    """Raise a ConfigError when the device cannot be used on this machine."""
    if device.startswith("cuda") and not cuda_available():
        raise ConfigError(
            f"device {device!r} requested but no CUDA GPU is available here; use --device cpu"
        )


def device_name(device: str) -> str:
    """A human name of the device: the GPU model, or the CPU model."""
    if device.startswith("cuda"):
        torch = require_torch()
        return torch.cuda.get_device_name(torch.device(device))
    return cpu_model()


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def quiet_profiler() -> None:
    """Silence kineto's stderr lines for this process (a user's ``KINETO_LOG_LEVEL`` wins)."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


@functools.cache
def prime_profiler() -> None:
    """One empty profiler session here, once a process (kineto registers on the first's thread)."""
    quiet_profiler()
    torch = torch_or_none()
    if torch is None:
        return
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        pass
