"""A CUDA stage that outlasts --timeout-s (scripts/gpu_checks.sh): about 2 s of torch.cuda._sleep from request 1 on."""

import itertools

import torch

from workbench import Pipeline


def build(config):
    pipe = Pipeline("gpu-sleep", items=lambda: itertools.count(), config=config)
    pipe.add("launch", lambda b: (torch.cuda._sleep(4_000_000_000) if b[0] >= 1 else None, b)[1])
    pipe.add("host", lambda b: b)
    return pipe
