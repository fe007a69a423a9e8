"""Precision: run a model in fp32, bf16, fp16 or int8 -- or say clearly why not.

int8 uses ``torch.ao.quantization.quantize_dynamic`` on the model's Linear
layers (dynamic quantization: int8 weights, activations quantized per batch).
It runs on CPU only. torch 2.13 still ships it but warns that it is deprecated
in favour of torchao; we silence only that deprecation warning, so the rest of
the run's warnings stay visible. A combination that cannot run (int8 on CUDA,
bf16 on a GPU without bf16) raises :class:`PrecisionError`, never a silent
fallback to fp32.
"""
from __future__ import annotations

import warnings

from .config import PipelineConfig
from .device import cuda_available
from .errors import PrecisionError

INT8_METHOD = "torch.ao.quantization.quantize_dynamic (Linear layers, qint8 weights)"


def check_precision(config: PipelineConfig) -> None:
    """Raise PrecisionError if ``config.precision`` cannot run on ``config.device``."""
    p, dev = config.precision, config.device
    if p == "int8" and config.is_cuda:
        raise PrecisionError(
            f"precision int8 on device {dev}: dynamic int8 quantization of Linear layers runs on CPU only; "
            "use --precision fp16 or bf16 on CUDA, or --device cpu for int8"
        )
    if p == "bf16" and config.is_cuda and cuda_available():
        import torch

        if not torch.cuda.is_bf16_supported():
            raise PrecisionError(f"precision bf16 on device {dev}: this GPU has no bf16 support; use fp16")


def torch_dtype(precision: str):
    """The floating dtype activations use at this precision (int8 keeps fp32 activations)."""
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.float32}[precision]


def prepare_model(model, config: PipelineConfig):
    """Move a ``torch.nn.Module`` to the config's device and precision, in eval mode.

    Returns the model to use (a new quantized module for int8).
    """
    check_precision(config)
    model = model.eval().to(config.device)
    if config.precision == "int8":
        return _quantize_int8(model)
    return model.to(torch_dtype(config.precision))


def _quantize_int8(model):
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated")
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*deprecated")
        try:
            return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        except (RuntimeError, AssertionError) as exc:
            raise PrecisionError(f"precision int8 on device cpu: quantize_dynamic failed: {exc}") from exc
