"""The generate example: a causal transformer that streams tokens, its KV cache checked against recomputing."""

import json

import pytest

from examples_helpers import build, take
from workbench import profile
from workbench.errors import ConfigError

TINY = {"vocab": 64, "d_model": 32, "heads": 2, "layers": 1, "prompt_tokens": 6, "answer_tokens": 5}


def answers(pipe, items) -> list[list[int]]:
    return [json.loads(b)["tokens"] for b in pipe(items)]


def test_the_kv_cache_gives_the_tokens_recomputing_gives_batched_or_one_by_one():
    options = TINY | {"lengths": "uniform", "seed": 3}
    cached, recomputed = (
        build("generate", options=options | {"kv_cache": kv}) for kv in (True, False)
    )
    items = take(cached, 4)
    assert len({len(i["prompt"]) for i in items}) > 1  # left padding is exercised
    batched = answers(cached, items)
    assert batched == answers(recomputed, items)
    longest = max(i["answer_tokens"] for i in items)
    assert [len(a) for a in batched] == [longest] * 4  # a batch generates to its longest answer
    # left padding changes nothing: each prompt alone gives its batched answer's first tokens
    for item, answer in zip(items, batched):
        alone = answers(cached, [item])[0]
        assert alone == answer[: item["answer_tokens"]]


def test_a_profile_streams_one_unit_per_answer_token(tmp_path):
    pipe = build("generate", options=TINY, threads=1)
    assert [s.stream for s in pipe.stages] == [False, True, False]
    run = profile(pipe, requests=3, warmup=1, traced=0, sample_stacks=False)
    assert run.requests["ok"].all()
    assert run.units.groupby("request").size().tolist() == [5, 5, 5, 5]
    assert set(run.units["stage"]) == {"generate"}


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_lower_precisions_run_on_cpu(precision):
    pipe = build("generate", options=TINY, precision=precision)
    assert len(answers(pipe, take(pipe, 2))[0]) == 5


def test_bad_options_are_named():
    with pytest.raises(
        ConfigError, match="^option lengths must be one of fixed, uniform, got 'zipf'$"
    ):
        build("generate", options=TINY | {"lengths": "zipf"})
    with pytest.raises(
        ConfigError, match=r"option 'answer_tokens' must be an integer in \[1, 2_048\]"
    ):
        build("generate", options=TINY | {"answer_tokens": 0})


def test_served_bodies_are_json_and_a_bad_one_is_refused_alone():
    pipe = build("generate", options=TINY)  # model length 6 + 5 = 11 tokens, vocab 64
    items = take(pipe, 2)
    assert answers(pipe, [json.dumps(i).encode() for i in items]) == answers(pipe, items)
    pipe.check_item(b'{"prompt": [1, 63], "answer_tokens": 9}')  # 11 tokens: fits
    for body, message in (
        (b"{", "Expecting"),
        (b'{"prompt": [], "answer_tokens": 2}', "prompt must be a list of 1 to 10 token ids"),
        (b'{"prompt": [64], "answer_tokens": 2}', "from 0 to 63"),
        (b'{"prompt": [1.0], "answer_tokens": 2}', "token ids"),
        (
            b'{"prompt": [1, 2], "answer_tokens": 10}',
            "answer_tokens must be a whole number from 1 to 9",
        ),
        (b'{"prompt": [1], "answer_tokens": true}', "answer_tokens"),
        (b"[1]", "prompt"),
    ):
        with pytest.raises(ValueError, match=message):
            pipe.check_item(body)
