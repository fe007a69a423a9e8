"""The examples on a GPU: fp16/bf16, pinned vs pageable host->device copies.

Skipped cleanly without CUDA.
"""

import json

import pytest

from workbench import PipelineConfig
from workbench.device import cuda_available
from workbench.errors import ConfigError
from workbench.examples import EXAMPLES

from examples_helpers import build, take

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")]
SMALL = {
    "tabular": {},
    "text": {"d_model": 64, "layers": 1},
    "image": {"image_size": 64, "width": 8},
}


def scores_by_key(name: str, response: bytes) -> dict:
    """Comparable scores of one response: item id -> score, or label -> score."""
    obj = json.loads(response)
    if name == "tabular":
        return {i["item_id"]: i["score"] for i in obj["items"]}
    return {x["label"]: x["score"] for x in obj["labels" if name == "text" else "classes"]}


def copy_kinds(pipe, batch) -> set[str]:
    """Names of the host->device memcpy events while the preprocess stage runs."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    first = pipe.stages[0].fn(batch)
    hydrated = pipe.stages[1].fn(first) if pipe.stage_names[1] == "hydrate" else first
    preprocess = pipe.stages[pipe.stage_names.index("preprocess")].fn
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        preprocess(hydrated)
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if e.name.startswith("Memcpy HtoD")}


@pytest.mark.parametrize("name", list(EXAMPLES))
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_pinned_and_pageable_give_the_same_answers(name, precision):
    pinned = build(name, device="cuda", batch_size=4, precision=precision, options=SMALL[name])
    pageable = build(
        name,
        device="cuda",
        batch_size=4,
        precision=precision,
        options={**SMALL[name], "pin_memory": False},
    )
    for n in (1, 4):
        batch = take(pinned, n)
        a, b = pinned(batch), pageable(batch)
        assert len(a) == len(b) == n and all(isinstance(x, bytes) for x in a)
        for ra, rb in zip(a, b):
            sa, sb = scores_by_key(name, ra), scores_by_key(name, rb)
            assert sa.keys() == sb.keys() and all(abs(sa[k] - sb[k]) < 1e-3 for k in sa)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_preprocess_copies_from_pinned_or_pageable_memory(name):
    import torch

    pinned = build(name, device="cuda", batch_size=2, options=SMALL[name])
    batch = take(pinned, 2)
    out = pinned.stages[pinned.stage_names.index("preprocess")].fn(
        pinned.stages[1].fn(pinned.stages[0].fn(batch))
        if name == "tabular"
        else pinned.stages[0].fn(batch)
    )
    tensors = [
        t for t in (out if isinstance(out, tuple) else (out,)) if isinstance(t, torch.Tensor)
    ]
    assert tensors and all(t.is_cuda for t in tensors)
    pageable = build(
        name, device="cuda", batch_size=2, options={**SMALL[name], "pin_memory": False}
    )
    pinned_kinds, pageable_kinds = copy_kinds(pinned, batch), copy_kinds(pageable, batch)
    if not pinned_kinds and not pageable_kinds:
        pytest.skip("the profiler recorded no CUDA memcpy events (CUPTI unavailable?)")
    assert pinned_kinds == {"Memcpy HtoD (Pinned -> Device)"}
    assert pageable_kinds == {"Memcpy HtoD (Pageable -> Device)"}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_fp32_on_cuda_matches_cpu(name):
    cpu = build(name, batch_size=2, options=SMALL[name])
    gpu = build(name, device="cuda", batch_size=2, options=SMALL[name])
    batch = take(cpu, 2)
    for rc, rg in zip(cpu(batch), gpu(batch)):
        sc, sg = scores_by_key(name, rc), scores_by_key(name, rg)
        common = sc.keys() & sg.keys()
        assert len(common) >= len(sc) - 1 and all(abs(sc[k] - sg[k]) < 5e-3 for k in common)


def test_text_cuda_graph_replays_the_eager_forward():
    """Option cuda_graph: the same scores as eager, one graph per batch shape, graph launches in the trace."""
    from workbench import profile
    from workbench.trace import load_trace
    from workbench.analysis.launches import launch_summary
    from tests.support.tables import launch_calls

    options = {**SMALL["text"], "seed": 3}
    eager = build("text", device="cuda", batch_size=4, options=options)
    graphed = build("text", device="cuda", batch_size=4, options={**options, "cuda_graph": True})
    for n in (1, 4, 4, 1):  # a second call at a shape replays the graph captured by the first
        batch = take(eager, n)
        for ra, rb in zip(eager(batch), graphed(batch)):
            sa, sb = scores_by_key("text", ra), scores_by_key("text", rb)
            assert sa.keys() == sb.keys() and all(abs(sa[k] - sb[k]) < 1e-4 for k in sa)
    config = PipelineConfig(device="cuda", batch_size=1, options={**options, "cuda_graph": True})
    run = profile("text", config, requests=5, warmup=2, traced=2)
    assert run.meta.config.options["cuda_graph"] is True
    summary = launch_summary(launch_calls(load_trace(run.trace_path)))
    assert (
        summary["graph_count"] >= 2 and summary["graph_gpu_count"] > 0
    )  # one replay per traced request
    run.close()


def test_text_cuda_graph_needs_fixed_shapes():
    with pytest.raises(ConfigError, match="cuda_graph needs padding='max_len'"):
        build("text", device="cuda", options={"cuda_graph": True, "padding": "longest"})
