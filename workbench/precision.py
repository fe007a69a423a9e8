"""Precision: run a model in fp32, bf16, fp16 or int8, or say clearly why not.

int8 is dynamic quantization of the Linear layers (``quantize_dynamic``, CPU only). A combination
that cannot run raises :class:`PrecisionError`, never a silent fallback to fp32; a partial
quantization is reported (:func:`quantization_report`) and recorded in the run.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings

from .config import PipelineConfig
from .device import cuda_available
from .errors import ConfigError, PrecisionError

_REPORTS: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "workbench_quantization", default=None
)


@contextlib.contextmanager
def collect_quantization():
    """Collect the quantization reports of ``prepare_model`` calls made in the block (a list)."""
    reports: list[dict] = []
    token = _REPORTS.set(reports)
    try:
        yield reports
    finally:
        _REPORTS.reset(token)


def quantization_report(model) -> dict:
    """How much of ``model`` int8 converts (its Linear layers), of the modules holding parameters
    themselves and of the parameter count."""
    import torch  # 1-2 s and 300 MB: only when a model is prepared

    owners = [m for m in model.modules() if any(True for _ in m.parameters(recurse=False))]
    linear = [m for m in owners if isinstance(m, torch.nn.Linear)]
    params = sum(p.numel() for p in model.parameters())
    q_params = sum(p.numel() for m in linear for p in m.parameters(recurse=False))
    share = q_params / params if params else 0.0
    return {
        "model": type(model).__name__,
        "modules": len(owners),
        "quantized_modules": len(linear),
        "params": int(params),
        "quantized_params": int(q_params),
        "quantized_share": round(share, 4),
        "text": f"quantized {len(linear)} of {len(owners)} parameterised modules, "
        f"{share * 100:.0f} % of parameters",
    }


def check_precision(config: PipelineConfig) -> None:
    """PrecisionError if ``config.precision`` cannot run on ``config.device``."""
    p, dev = config.precision, config.device
    if p == "int8" and config.is_cuda:
        raise PrecisionError(
            f"precision int8 on device {dev}: dynamic int8 quantization of Linear layers runs on CPU only; "
            "use --precision fp16 or bf16 on CUDA, or --device cpu for int8"
        )
    if p == "bf16" and config.is_cuda and cuda_available():
        import torch  # 1-2 s and 300 MB: only when a model is prepared

        if not torch.cuda.is_bf16_supported():
            raise PrecisionError(
                f"precision bf16 on device {dev}: this GPU has no bf16 support; use fp16"
            )


def torch_dtype(precision: str):
    """The floating dtype activations use at this precision (int8 keeps fp32 activations)."""
    import torch  # 1-2 s and 300 MB: only when a model is prepared

    return {
        "fp32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
        "int8": torch.float32,
    }[precision]


MODEL_OPTIONS = ("channels_last", "compile")  # prepare_model applies them (audit --try uses them)


def prepare_model(model, config: PipelineConfig):
    """A ``torch.nn.Module`` on the config's device and precision, in eval mode (int8: a new
    module), with options ``channels_last`` (NHWC weights, which convolution kernels prefer) and
    ``compile`` (``torch.compile``: its cost in the cold start and warm-up), for ``audit --try``."""
    import torch  # 1-2 s and 300 MB: only when a model is prepared

    check_precision(config)
    model = model.eval().to(config.device)
    if config.precision == "int8":
        model = _quantize_int8(model)
    else:
        model = model.to(torch_dtype(config.precision))
    for name in MODEL_OPTIONS:
        value = config.options.get(name, False)
        if not isinstance(value, bool):
            raise ConfigError(f"option {name!r} must be true or false, got {value!r}")
    if config.options.get("channels_last"):
        model = model.to(memory_format=torch.channels_last)
    if config.options.get("compile"):
        model = torch.compile(model)
    return model


def _quantize_int8(model):
    import torch  # 1-2 s and 300 MB: only when a model is prepared

    report = quantization_report(model)
    if report["quantized_modules"] == 0:
        raise PrecisionError(
            f"precision int8: model {report['model']} has no Linear layer to quantize "
            f"({report['modules']} parameterised modules, none of them Linear); int8 would run it in fp32. "
            "Use fp32 or bf16 for this model"
        )
    reports = _REPORTS.get()
    if reports is not None:
        reports.append(report)

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated")
        warnings.filterwarnings(
            "ignore", message=".*quantized tensor creation functions.*deprecated"
        )
        try:
            return torch.ao.quantization.quantize_dynamic(
                model, {torch.nn.Linear}, dtype=torch.qint8
            )
        except (RuntimeError, AssertionError) as exc:
            raise PrecisionError(
                f"precision int8 on device cpu: quantize_dynamic failed: {exc}"
            ) from exc
