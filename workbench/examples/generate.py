"""Example ``generate``: a small causal language model that streams its answer token by token.

One item is ``{"prompt": [token ids], "answer_tokens": n}`` (or its JSON, as served). Stages:
``tokenize`` (left-padded prompts and mask to the device), ``generate`` (streaming: a prefill
yields the first token, then a greedy decode step per further token, each read back to the host;
with ``kv_cache`` a step runs only the newest token, without it the whole sequence again, so a
step's time grows with its position; a batch runs until its longest answer is done) and
``detokenize`` (one JSON response per item). With ``kv_cache`` the pipeline also offers the step
API of ``_causal_model.GenerateSteps``, which ``load --max-num-seqs`` batches continuously.

Options (``config.options``):
    seed (int, 0): weights and request stream.
    kv_cache (bool, True): decode against a KV cache, or recompute every step.
    prompt_tokens (int, 32), answer_tokens (int, 32): the mean lengths of prompts and answers.
    lengths ("fixed"): every request at the means, or ``"uniform"``: each length drawn uniformly
        from half to one and a half times its mean.
    vocab (int, 512), d_model (int, 128), layers (int, 2), heads (int, 4), ff (int, 4 * d_model).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from ..config import PipelineConfig, Range, option_ranges
from ..errors import ConfigError
from ..pipeline import Pipeline
from ..precision import check_precision, prepare_model
from . import SEED, SIZE, check_batch, example_pipeline, option, to_device

LENGTHS = ("fixed", "uniform")
TOKENS = Range(1, 2_048, integer=True)


@option_ranges(
    seed=SEED,
    prompt_tokens=TOKENS,
    answer_tokens=TOKENS,
    vocab=Range(8, 262_144, integer=True),
    d_model=Range(8, 8_192, integer=True),
    heads=Range(1, 256, integer=True),
    layers=Range(1, 256, integer=True),
    ff=SIZE,
)
def build(config: PipelineConfig) -> Pipeline:
    """The generate pipeline for ``config`` (see the module docstring for stages and options)."""
    import torch  # 1-2 s and 300 MB: only when the pipeline is built

    from ._causal_model import Decoder, GenerateSteps  # imports torch

    check_precision(config)
    seed, kv_cache = option(config, "seed", 0), option(config, "kv_cache", True, bool)
    prompt_n, answer_n = option(config, "prompt_tokens", 32), option(config, "answer_tokens", 32)
    lengths = option(config, "lengths", "fixed", str)
    if lengths not in LENGTHS:
        raise ConfigError(f"option lengths must be one of {', '.join(LENGTHS)}, got {lengths!r}")
    vocab, d_model = option(config, "vocab", 512), option(config, "d_model", 128)
    heads, layers = option(config, "heads", 4), option(config, "layers", 2)
    ff = option(config, "ff", 4 * d_model)
    if d_model % heads:
        raise ConfigError(f"option d_model ({d_model}) must be a multiple of heads ({heads})")
    longest = (prompt_n + answer_n) * (2 if lengths == "uniform" else 1)
    torch.manual_seed(seed)
    model = prepare_model(Decoder(vocab, longest, d_model, layers, heads, ff), config)
    tokenize, generate = _model_stages(torch, model, config, kv_cache)

    def detokenize(steps: list[list[int]]) -> list[bytes]:
        per_item = [list(tokens) for tokens in zip(*steps)]
        return [json.dumps({"tokens": t}, separators=(",", ":")).encode() for t in per_item]

    smoke = {"prompt": [1, 2, 3], "answer_tokens": 2}
    pipe = example_pipeline(
        "generate",
        config,
        model,
        lambda: prompts(seed, vocab, prompt_n, answer_n, lengths),
        lambda: list(generate(tokenize([smoke]))),
    )
    pipe.check_item = lambda body: check_request(request_of(body), vocab, longest)  # serve

    pipe.add("tokenize", tokenize, role="preprocess")
    pipe.add("generate", generate, role="compute", stream=True)
    pipe.add("detokenize", detokenize, role="serialize")
    if kv_cache:  # continuous batching steps sequences against their caches (load --max-num-seqs)
        pipe.steps = lambda max_num_seqs: GenerateSteps(model, max_num_seqs, longest)
    return pipe


def _model_stages(torch, model, config: PipelineConfig, kv_cache: bool):
    """``(tokenize, generate)``: left-padded ids on the device, and the loop yielding each step's."""

    def tokenize(batch: list[dict]):
        batch = [request_of(item) for item in check_batch(batch, "generate")]
        prompts = [item["prompt"] for item in batch]
        width = max(len(p) for p in prompts)
        ids = torch.zeros((len(prompts), width), dtype=torch.int64)
        valid = torch.zeros((len(prompts), width), dtype=torch.bool)
        for row, p in enumerate(prompts):
            ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.int64)
            valid[row, width - len(p) :] = True
        answer = max(item["answer_tokens"] for item in batch)
        return to_device(ids, config), to_device(valid, config), answer

    def generate(prompted) -> Iterator[list[int]]:
        ids, valid, answer = prompted
        one = torch.ones((ids.shape[0], 1), dtype=torch.bool, device=ids.device)
        with torch.inference_mode():
            cache = model.new_cache(ids.shape[0], ids.shape[1] + answer) if kv_cache else None
            logits = model.step(ids, valid, cache) if kv_cache else model(ids, valid)
            for k in range(answer):
                token = logits.argmax(-1, keepdim=True)
                yield token[:, 0].tolist()  # to the host: the token a server would send
                if k + 1 == answer:
                    return
                valid = torch.cat([valid, one], dim=1)
                if kv_cache:
                    logits = model.step(token, valid, cache)
                else:
                    ids = torch.cat([ids, token], dim=1)
                    logits = model(ids, valid)

    return tokenize, generate


def request_of(item) -> dict:
    """An item as the stages take it: a request, or its JSON body (bytes or str, as served)."""
    return json.loads(item) if isinstance(item, (bytes, bytearray, str)) else item


def check_request(item, vocab: int, longest: int) -> None:
    """ValueError naming what is wrong with one request (``serve`` answers 400 before batching: in a
    static batch one bad request would fail every other one, or hold them for an endless answer)."""
    prompt = item.get("prompt") if isinstance(item, dict) else None
    answer = item.get("answer_tokens") if isinstance(item, dict) else None
    ok = isinstance(prompt, list) and 0 < len(prompt) < longest
    if not (ok and all(type(t) is int and 0 <= t < vocab for t in prompt)):
        raise ValueError(
            f"prompt must be a list of 1 to {longest - 1} token ids from 0 to {vocab - 1}"
        )
    if not (type(answer) is int and 1 <= answer <= longest - len(prompt)):
        raise ValueError(
            f"answer_tokens must be a whole number from 1 to {longest - len(prompt)} (the model "
            f"holds {longest} tokens, prompt included)"
        )


def prompts(seed: int, vocab: int, prompt_n: int, answer_n: int, lengths: str) -> Iterator[dict]:
    """An endless, seeded stream of requests: random prompt ids and an answer length."""
    rng = random.Random(seed)

    def draw(mean: int) -> int:
        return mean if lengths == "fixed" else rng.randint(max(1, mean // 2), mean + mean // 2)

    while True:
        prompt = [rng.randrange(1, vocab) for _ in range(draw(prompt_n))]
        yield {"prompt": prompt, "answer_tokens": draw(answer_n)}
