import json

import pytest

from workbench import PipelineConfig
from workbench.errors import ConfigError, PrecisionError
from workbench.examples import data_file, text

from examples_helpers import build, stage_medians, take


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16", "int8"])
def test_runs_a_batch_of_one_and_of_batch_size(precision):
    pipe = build("text", batch_size=3, precision=precision, options={"d_model": 64, "layers": 1})
    for n in (1, 3):
        out = pipe(take(pipe, n))
        assert isinstance(out, list) and len(out) == n and all(isinstance(b, bytes) for b in out)
        for response in map(json.loads, out):
            assert set(response) == {"labels", "tokens", "truncated"}
            labels = response["labels"]
            assert len(labels) == 3 and all(x["label"] in text.LABELS for x in labels)
            scores = [x["score"] for x in labels]
            assert scores == sorted(scores, reverse=True) and 0.0 < sum(scores) <= 1.0 + 1e-6
            assert 3 <= response["tokens"] <= 64


def test_int8_quantizes_every_projection():
    from workbench.examples._causal_model import Encoder
    from workbench.precision import prepare_model

    model = prepare_model(Encoder(100, 8, 32, 2, 2, 64, 5), PipelineConfig(precision="int8"))
    linears = [m for m in model.modules() if type(m).__name__ == "Linear"]
    assert len(linears) == 2 * 4 + 1  # 4 projections per block and the head
    assert all("quantized.dynamic" in type(m).__module__ for m in linears), {
        type(m) for m in linears
    }


def test_items_are_deterministic_and_seeded():
    pipe = build("text")
    assert take(pipe, 20) == take(pipe, 20)
    assert take(build("text", options={"seed": 3}), 20) != take(pipe, 20)
    assert all(isinstance(t, str) and t for t in take(pipe, 20))


def test_same_config_gives_the_same_responses():
    a, b = build("text", batch_size=2), build("text", batch_size=2)
    assert a(take(a, 2)) == b(take(b, 2))


def test_tokenizer_wordpieces_unknowns_and_truncation():
    tok = text.WordPiece(data_file("vocab.txt"), max_len=16)
    ids = tok.ids
    assert tok.encode("Refund, please!") == (
        [tok.cls, ids["refund"], ids[","], ids["please"], ids["!"], tok.sep],
        False,
    )
    pieces = tok.word_ids("refunding")
    assert pieces[0] == ids["refund"] and all(p != tok.unk for p in pieces)
    assert tok.word_ids("日本") == [tok.unk]
    long, cut = tok.encode("order " * 40)
    assert cut and len(long) == 16 and long[0] == tok.cls and long[-1] == tok.sep
    exact, cut = tok.encode("order " * 14)
    assert not cut and len(exact) == 16


def test_some_requests_are_truncated():
    pipe = build("text", batch_size=20, options={"d_model": 32, "layers": 1, "heads": 2})
    responses = [json.loads(r) for r in pipe(take(pipe, 20))]
    assert any(r["truncated"] for r in responses) and not all(r["truncated"] for r in responses)


@pytest.mark.parametrize(
    "payload, message",
    [
        ("   \n\t ", "text request 0: empty text"),
        (b"\xff\xfe", "not valid UTF-8"),
        (42, "expected a string, got int"),
        ("x" * 5001, "more than max_chars=5000"),
    ],
)
def test_invalid_text_raises_value_error(payload, message):
    with pytest.raises(ValueError, match=message):
        text.parse([payload])


def test_parse_cleans_whitespace_and_control_characters():
    assert text.parse([b"  Hi\x00 there\n\n  friend ", "ｆｕｌｌ\u200b width"]) == [
        "Hi there friend",
        "full width",
    ]


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="d_model .* multiple of heads"):
        build("text", options={"d_model": 30, "heads": 4})
    with pytest.raises(
        ConfigError, match=r"option 'max_len' must be an integer in \[4, 4_096\], got 2"
    ):
        build("text", options={"max_len": 2})
    with pytest.raises(ConfigError, match="option cuda_graph needs device cuda .* got device cpu"):
        build("text", options={"cuda_graph": True})


def test_int8_on_cuda_is_refused_without_touching_a_gpu():
    with pytest.raises(PrecisionError, match="precision int8 on device cuda"):
        text.build(PipelineConfig(device="cuda", precision="int8"))


def test_compute_bound(one_thread):
    pipe = build("text", batch_size=4)
    for batch_size in (1, 4):
        med = stage_medians(pipe, batch_size=batch_size, calls=15)
        assert max(med, key=med.get) == "forward", med
