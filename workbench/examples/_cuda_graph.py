"""Replay a model's forward from a CUDA graph (imports torch; loaded by an example's ``build`` only).

Why: at batch 1 the text encoder launches about 245 small kernels per call. On a fast GPU each
kernel ends before the host has launched the next, so the GPU idles and the forward's time is the
host's launch time (launch-bound, notebook 4). A CUDA graph records the launches once and replays
them all with one ``cudaGraphLaunch``: the same kernels, one launch.

One graph is captured per input signature (shapes and dtypes), on the first call that meets it: a
few eager calls on a side stream first (lazy initialisation, cuBLAS workspaces), then the capture.
Each call copies its inputs into the graph's static buffers, replays, and returns a clone of the
static output, so the next replay cannot overwrite a result still in use. Capture happens inside the
run's warm-up when the batch size is fixed; the fixed shapes are why the text example allows the
option only with ``padding="max_len"``.
"""

from __future__ import annotations

from typing import Any

import torch


class GraphedForward:
    """``GraphedForward(module)(*tensors)`` == ``module(*tensors)``, replayed from a CUDA graph."""

    def __init__(self, module: torch.nn.Module, warmup_calls: int = 3):
        self.module, self.warmup_calls = module, warmup_calls
        self.graphs: dict[tuple, tuple[Any, list[torch.Tensor], torch.Tensor]] = {}

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        key = tuple((tuple(t.shape), t.dtype, str(t.device)) for t in inputs)
        entry = self.graphs.get(key)
        if entry is None:
            entry = self.graphs[key] = self._capture(inputs)
        graph, static_inputs, static_output = entry
        for static, tensor in zip(static_inputs, inputs):
            static.copy_(tensor, non_blocking=True)
        graph.replay()
        return static_output.clone()

    def _capture(self, inputs: tuple[torch.Tensor, ...]):
        static_inputs = [t.clone() for t in inputs]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup_calls):
                self.module(*static_inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_output = self.module(*static_inputs)
        return graph, static_inputs, static_output
