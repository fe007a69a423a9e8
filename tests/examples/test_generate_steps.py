"""The generate example's step API: sequences joining and leaving a running batch get the tokens the
generate stage gives each alone."""

import json

import pytest

from examples_helpers import build, take
from workbench.errors import ConfigError

TINY = {"vocab": 64, "d_model": 32, "heads": 2, "layers": 1, "prompt_tokens": 6, "answer_tokens": 5}


def alone(pipe, item) -> list[int]:
    return json.loads(pipe([item])[0])["tokens"]


def test_steps_in_a_running_batch_give_each_sequence_its_own_answer():
    pipe = build("generate", options=TINY | {"lengths": "uniform", "seed": 3})
    items = take(pipe, 3)
    steps = pipe.steps(2)
    a, b = steps.join(items[0]), steps.join(items[1])
    got = {a: [], b: []}
    assert steps.prefill(a, 2) is None  # a chunk of a's prompt, then the rest gives its first token
    got[a].append(steps.prefill(a, 100))
    got[b].append(steps.prefill(b, 100))
    got[a] += steps.decode([a])  # a alone a step, then both at their own positions
    for _ in range(2):
        for slot, token in zip((a, b), steps.decode([a, b])):
            got[slot].append(token)
    steps.leave(b)
    c = steps.join(items[2])  # joins while a is running, in b's slot
    first_c = steps.prefill(c, 100)
    last_a, second_c = steps.decode([a, c])
    assert got[a] + [last_a] == alone(pipe, items[0])[:5]
    assert got[b] == alone(pipe, items[1])[:3]
    assert [first_c, second_c] == alone(pipe, items[2])[:2]


def test_only_a_cached_pipeline_offers_steps_and_a_full_batch_refuses_a_join():
    assert build("generate", options=TINY | {"kv_cache": False}).steps is None
    pipe = build("generate", options=TINY)
    steps = pipe.steps(1)
    item = take(pipe, 1)[0]
    steps.join(item)
    with pytest.raises(ConfigError, match="all 1 sequences are running"):
        steps.join(item)
