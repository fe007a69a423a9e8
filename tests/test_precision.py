import pytest
import torch

from workbench import PipelineConfig
from workbench.errors import PrecisionError
from workbench.precision import check_precision, prepare_model


def test_int8_on_cuda_is_refused_by_name():
    with pytest.raises(PrecisionError, match="precision int8 on device cuda"):
        check_precision(PipelineConfig(device="cuda", precision="int8"))


@pytest.mark.parametrize(
    "precision, dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)]
)
def test_float_precisions_cast_the_model(precision, dtype):
    model = prepare_model(torch.nn.Linear(4, 2), PipelineConfig(precision=precision))
    assert model.weight.dtype == dtype
    assert not model.training


def test_int8_quantizes_linear_layers_on_cpu():
    model = prepare_model(
        torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()),
        PipelineConfig(precision="int8"),
    )
    assert "Quantized" in type(model[0]).__name__ or "quantized" in type(model[0]).__module__
    out = model(torch.randn(2, 8))
    assert out.shape == (2, 4) and out.dtype == torch.float32


@pytest.mark.cuda
def test_half_precisions_on_cuda():
    for precision in ("fp16", "bf16"):
        model = prepare_model(
            torch.nn.Linear(4, 2), PipelineConfig(device="cuda", precision=precision)
        )
        assert model.weight.is_cuda


def test_model_options_channels_last_and_compile_are_applied_and_checked():
    torch = pytest.importorskip("torch")
    from workbench import PipelineConfig
    from workbench.errors import ConfigError
    from workbench.precision import prepare_model

    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))
    out = prepare_model(conv, PipelineConfig(options={"channels_last": True}))
    assert out[0].weight.is_contiguous(memory_format=torch.channels_last)
    compiled = prepare_model(torch.nn.Linear(2, 2), PipelineConfig(options={"compile": True}))
    assert type(compiled).__name__ == "OptimizedModule"
    with pytest.raises(ConfigError, match="option 'compile' must be true or false"):
        prepare_model(torch.nn.Linear(2, 2), PipelineConfig(options={"compile": "yes"}))
