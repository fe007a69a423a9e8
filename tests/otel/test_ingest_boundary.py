"""Issue 27: malformed OTLP/JSON is one line (exit 2); span trees are checked and what is dropped or clamped is said.

Every case here ended in an internal error (exit 3), a NaN in the JSON, or a silent clamp before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.otel.test_ingest import go_export, span
from tests.support.cli import main_output as cli


def strict_loads(text: str):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def export(spans: list, resource: dict | None = None) -> str:
    resource = resource or {
        "attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]
    }
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]})


def good_spans() -> list[dict]:
    return [span("t1", "r", None, "GET /", 0, 10), span("t1", "c", "r", "db", 1, 4)]


def ingest(tmp_path: Path, text: str | bytes, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "spans.jsonl"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return cli(["ingest-otel", str(path), "--out", str(tmp_path / "run"), "--json", *extra])


def mutate(change) -> str:
    doc = json.loads(export(good_spans()))
    change(doc)
    return json.dumps(doc)


def _spans(doc):
    return doc["resourceSpans"][0]["scopeSpans"][0]["spans"]


BAD = {  # the crash families: one line, exit 2, naming the field where there is one
    "resourceSpans-a-string": (lambda d: d.__setitem__("resourceSpans", "x"), "resourceSpans"),
    "status-a-string": (lambda d: _spans(d)[0].__setitem__("status", "ERROR"), "status"),
    "status-code-a-string": (
        lambda d: _spans(d)[0].__setitem__("status", {"code": "bad"}),
        "status.code",
    ),
    "attribute-value-a-string": (
        lambda d: d["resourceSpans"][0]["resource"].__setitem__(
            "attributes", [{"key": "service.name", "value": "svc"}]
        ),
        "value",
    ),
    "resource-a-list": (lambda d: d["resourceSpans"][0].__setitem__("resource", []), "resource"),
    "span-a-string": (lambda d: _spans(d).append("a span"), "spans[2]"),
    "name-an-int": (lambda d: _spans(d)[0].__setitem__("name", 5), "name"),
    "name-a-dict": (lambda d: _spans(d)[0].__setitem__("name", {"n": 1}), "name"),
    "ids-a-list": (lambda d: _spans(d)[0].__setitem__("spanId", [1, 2]), "spanId"),
    "time-1e300": (
        lambda d: _spans(d)[0].__setitem__("startTimeUnixNano", 1e300),
        "startTimeUnixNano",
    ),
    "time-30-digits": (
        lambda d: _spans(d)[0].__setitem__("endTimeUnixNano", 10**30),
        "endTimeUnixNano",
    ),
    "time-30-digit-text": (
        lambda d: _spans(d)[0].__setitem__("endTimeUnixNano", "1" * 30),
        "endTimeUnixNano",
    ),
    "time-negative": (
        lambda d: _spans(d)[0].__setitem__("startTimeUnixNano", -5),
        "startTimeUnixNano",
    ),
    "time-missing": (lambda d: _spans(d)[0].pop("endTimeUnixNano"), "endTimeUnixNano"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_malformed_document_is_one_line_naming_the_field(tmp_path, case):
    change, field = BAD[case]
    rc, out, err = ingest(tmp_path, mutate(change))
    assert rc == 2 and out == "", err
    assert (
        err.count("\n") == 1
        and err.startswith("workbench ingest-otel: error: ")
        and "spans.jsonl" in err
    )
    assert field in err and "internal error" not in err


@pytest.mark.parametrize(
    "raw, words",
    [
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": Infinity}]}]}]}',
            "not OTLP/JSON",
        ),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "\xff\xfe"}]}]}]}', "not UTF-8"),
        (export(good_spans()).encode("utf-16"), "not"),
        ("[" * 200_000 + "]" * 200_000, "nested deeper"),
        ("{not json", "not OTLP/JSON"),
    ],
)
def test_bytes_that_are_not_otlp_json_are_one_line(tmp_path, raw, words):
    rc, _, err = ingest(tmp_path, raw)
    assert rc == 2 and err.count("\n") == 1 and words in err and "internal error" not in err, err


def test_two_spans_each_others_parent_or_its_own_are_not_requests(tmp_path):
    for spans in (
        [span("t", "a", "b", "x", 0, 1), span("t", "b", "a", "y", 0, 1)],
        [span("t", "a", "a", "x", 0, 1)],
    ):
        rc, _, err = ingest(tmp_path, export(spans))
        assert rc == 2 and err.count("\n") == 1 and "no root span" in err, err


def test_dropped_and_clamped_spans_are_counted_and_named(tmp_path):
    spans = [
        span("t", "r", None, "GET /", 0, 10),
        span("t", "c", "r", "db", 1, 4),
        span("t", "c", "r", "db-duplicate", 2, 3),  # duplicate id: dropped
        span("t", "x", "y", "cycle-a", 1, 2),
        span("t", "y", "x", "cycle-b", 1, 2),  # a cycle beside the root
        span("t", "late", "r", "late-child", 8, 14),  # past its root's end: clipped
        span("u", "neg", None, "backwards", 30, 20),
    ]  # a root ending before it starts: clamped
    rc, out, err = ingest(tmp_path, export(spans))
    assert rc == 0, err
    report = strict_loads(out)
    assert report["ingest"]["dropped"] == {"duplicate span id": 1, "in a parent cycle": 2}
    assert report["ingest"]["clamped"] == {
        "end before start": 1,
        "outside their request's root span": 1,
    }
    assert {"cycle-a", "cycle-b", "late-child", "backwards"} <= set(report["ingest"]["flagged"])
    assert report["end_to_end"]["count"] == 2
    rc, out, _ = cli(
        ["ingest-otel", str(tmp_path / "spans.jsonl"), "--out", str(tmp_path / "run2")]
    )
    assert (
        "spans checked: 7 spans, 1 dropped (duplicate span id), 2 dropped (in a parent cycle), 1 clamped (end "
        "before start), 1 clamped (outside their request's root span); spans named 'backwards', 'cycle-a', "
        "'cycle-b', 'late-child'"
    ) in out


def test_every_request_failed_gives_strict_json_and_exit_1(tmp_path):
    spans = [span("t", "r", None, "GET /", 0, 10, status={"code": 2, "message": "boom"})]
    rc, out, err = ingest(tmp_path, export(spans))
    assert rc == 1, err
    report = strict_loads(out)  # no NaN: a summary of no successful request holds null
    assert report["end_to_end"]["count"] == 0


def test_the_go_export_still_ingests_with_nothing_dropped(tmp_path):
    rc, out, err = ingest(tmp_path, go_export(), "--stage-map", "db.query=db")
    assert rc == 0, err
    report = strict_loads(out)
    assert report["ingest"] == {
        "spans": 9,
        "requests": 2,
        "dropped": {},
        "clamped": {},
        "flagged": [],
    }


def test_a_fifo_is_refused_before_reading(tmp_path):
    fifo = tmp_path / "spans.jsonl"
    os.mkfifo(fifo)
    rc, _, err = cli(["ingest-otel", str(fifo), "--out", str(tmp_path / "run")])
    assert rc == 2 and "not a regular file" in err


@pytest.mark.parametrize(
    "service, folder",
    [("/../../../x", "otel-x-"), ("a\x00b", "otel-a-b-"), ("y" * 300, "otel-" + "y" * 64 + "-")],
)
def test_a_service_name_names_the_default_folder_only_as_a_slug(
    tmp_path, monkeypatch, service, folder
):
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    (work / "spans.jsonl").write_text(export(good_spans(), resource))
    rc, out, err = cli(["ingest-otel", "spans.jsonl", "--json"])
    assert rc == 0, err
    (written,) = (work / "runs").iterdir()
    assert written.name.startswith(folder) and json.loads(out)["run_dir"] == f"runs/{written.name}"
    outside = {
        str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if written not in p.parents
    }
    assert outside == {
        "a",
        "a/b",
        "a/b/c",
        "a/b/c/spans.jsonl",
        "a/b/c/runs",
        f"a/b/c/runs/{written.name}",
    }
    assert json.loads(out)["pipeline"] == service  # the name itself is kept, as data
