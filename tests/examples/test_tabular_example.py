import json
import sqlite3

import pytest

from workbench import PipelineConfig
from workbench.errors import ConfigError, PrecisionError
from workbench.examples import data_file, tabular

from examples_helpers import build, stage_medians, take


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16", "int8"])
def test_runs_a_batch_of_one_and_of_batch_size(precision):
    pipe = build("tabular", batch_size=4, precision=precision)
    for n in (1, 4):
        batch = take(pipe, n)
        out = pipe(batch)
        assert isinstance(out, list) and len(out) == n and all(isinstance(b, bytes) for b in out)
        for request, response in zip(batch, out):
            req, resp = json.loads(request), json.loads(response)
            assert resp["request_id"] == req["request_id"] and resp["user_id"] == req["user_id"]
            assert sorted(i["item_id"] for i in resp["items"]) == sorted(req["item_ids"])
            scores = [i["score"] for i in resp["items"]]
            assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
            assert all(i["show"] == (i["score"] >= 0.3) for i in resp["items"])


def test_items_are_deterministic_and_seeded():
    pipe = build("tabular")
    assert take(pipe, 20) == take(pipe, 20)
    assert take(build("tabular", options={"seed": 1}), 20) != take(pipe, 20)
    first = json.loads(take(pipe, 1)[0])
    assert (
        set(first) == {"request_id", "user_id", "item_ids", "context"}
        and 4 <= len(first["item_ids"]) <= 12
    )


def test_same_config_gives_the_same_responses():
    a, b = build("tabular", batch_size=3), build("tabular", batch_size=3)
    assert a(take(a, 3)) == b(take(b, 3))


def test_hydrate_reads_the_store_and_defaults_unknown_ids():
    pipe = build("tabular")
    stages = dict(zip(pipe.stage_names, (s.fn for s in pipe.stages)))
    known = stages["parse"](
        [b'{"user_id": 0, "item_ids": [0, 999999], "context": {"hour": 6, "device": "ios"}}']
    )
    requests, rows = stages["hydrate"](known)
    assert requests == known and len(rows) == 2 and all(len(r) == tabular.N_FEATURES for r in rows)
    conn = sqlite3.connect(data_file("features.sqlite"))
    user = conn.execute(tabular._USER_SQL, (0,)).fetchone()
    item = conn.execute(tabular._ITEM_SQL, (0,)).fetchone()
    conn.close()
    assert rows[0][:5] == list(user) and rows[0][5:8] == list(item[1:])
    known_flags, unknown_flags = rows[0][13:15], rows[1][13:15]
    assert known_flags == [1.0, 1.0] and unknown_flags == [1.0, 0.0]
    assert rows[0][-3:] == [1.0, 0.0, 0.0]  # device one-hot: ios


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"{not json", "tabular request 0: not valid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"item_ids": [1]}', "user_id must be an integer 0..9223372036854775807, got None"),
        (b'{"user_id": 1, "item_ids": []}', "item_ids must be a list of 1..100 integers"),
        (b'{"user_id": true, "item_ids": [1]}', "user_id must be an integer"),
        (
            b'{"user_id": 1, "item_ids": [1], "context": {"hour": 24}}',
            "context.hour must be an integer 0..23",
        ),
        (
            b'{"user_id": 1, "item_ids": [1], "context": {"device": "tv"}}',
            "context.device must be one of ios, android",
        ),
    ],
)
def test_invalid_payload_raises_value_error_naming_the_field(payload, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(".", r"\.")):
        tabular.parse([payload])


def test_check_item_refuses_ids_past_the_stores_range():
    """SQLite keys are signed 64-bit: an id of 2**63 passed the check and failed its batch (500)."""
    tabular.check_item(json.dumps({"user_id": 2**63 - 1, "item_ids": [2**63 - 1]}).encode())
    for body in ({"user_id": 2**63, "item_ids": [1]}, {"user_id": 1, "item_ids": [1, 2**63]}):
        with pytest.raises(ValueError, match=r"integers? 0\.\.9223372036854775807"):
            tabular.check_item(json.dumps(body).encode())


def test_empty_batch_is_refused():
    with pytest.raises(ValueError, match="non-empty list"):
        tabular.parse([])


def test_hidden_option_as_string_or_list_and_bad_values():
    assert build("tabular", options={"hidden": "64,32"}).stage_names[1] == "hydrate"
    assert build("tabular", options={"hidden": [16]}).name == "tabular"
    with pytest.raises(ConfigError, match="option 'hidden'"):
        build("tabular", options={"hidden": "64,x"})
    with pytest.raises(
        ConfigError, match=r"option 'threshold' must be a number in \[0, 1\], got 'high'"
    ):
        build("tabular", options={"threshold": "high"})


def test_int8_on_cuda_is_refused_without_touching_a_gpu():
    with pytest.raises(PrecisionError, match="precision int8 on device cuda"):
        tabular.build(PipelineConfig(device="cuda", precision="int8"))


def test_a_missing_kernel_becomes_a_precision_error_at_build(monkeypatch):
    class NoKernel:
        def __call__(self, x):
            raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'")

    monkeypatch.setattr(tabular, "prepare_model", lambda model, config: NoKernel())
    with pytest.raises(
        PrecisionError, match="example tabular: precision fp16 on device cpu does not run"
    ):
        tabular.build(PipelineConfig(precision="fp16"))


def test_feature_bound_at_batch_one(one_thread):
    med = stage_medians(build("tabular"), batch_size=1)
    assert max(med, key=med.get) == "hydrate", med
