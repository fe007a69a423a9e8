"""ingest-otel on a hand-written export from a service that is not Python (a Go checkout service)."""

import json

import pytest

from workbench.analysis.budget import budget
from workbench.cli import main
from workbench.errors import ConfigError, TraceError
from workbench_serve.otel.ingest import ingest_otel, parse_stage_map
from workbench.record import load_run

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def span(trace, sid, parent, name, start_ms, end_ms, status=None, kind=1):
    out = {
        "traceId": trace,
        "spanId": sid,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(T0 + int(start_ms * MS)),
        "endTimeUnixNano": T0 + int(end_ms * MS),
    }
    if parent:
        out["parentSpanId"] = parent
    if status:
        out["status"] = status
    return out


def go_export():
    """Two requests of a Go service (hex ids, one time as a JSON number as some exporters write)."""
    a, b = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b700f067aa0ba902b7"
    spans_a = [
        span(a, "a000000000000001", None, "POST /checkout", 0, 10, kind=2),
        span(a, "a000000000000002", "a000000000000001", "auth", 0.5, 1.5),
        span(a, "a000000000000003", "a000000000000001", "db.query", 2, 5),
        span(
            a, "a000000000000004", "a000000000000001", "db.query", 4, 6
        ),  # overlaps: union 2..6 = 4 ms
        span(a, "a000000000000005", "a000000000000003", "db.conn", 2, 2.5),  # grandchild, unmapped
        span(a, "a000000000000006", "a000000000000001", "render", 7, 9.5),
    ]
    spans_b = [
        span(
            b,
            "b000000000000001",
            None,
            "POST /checkout",
            20,
            26,
            kind=2,
            status={"code": 2, "message": "db.query failed"},
        ),
        span(b, "b000000000000002", "b000000000000001", "auth", 20.5, 21),
        span(
            b,
            "b000000000000003",
            "b000000000000001",
            "db.query",
            21,
            25,
            status={"code": 2, "message": "TimeoutError: deadline exceeded after 4 ms"},
        ),
    ]
    resource = {
        "attributes": [
            {"key": "service.name", "value": {"stringValue": "checkout-go"}},
            {"key": "telemetry.sdk.language", "value": {"stringValue": "go"}},
        ]
    }
    line = lambda spans: json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": resource,
                    "scopeSpans": [{"scope": {"name": "go.opentelemetry.io/otel"}, "spans": spans}],
                }
            ]
        }
    )
    return line(spans_a) + "\n" + line(spans_b) + "\n"


@pytest.fixture
def export(tmp_path):
    path = tmp_path / "checkout.jsonl"
    path.write_text(go_export())
    return path


def test_stage_map_unions_spans_at_any_depth_and_leaves_the_rest_unattributed(export):
    run = ingest_otel(export, {"db.query": "database", "auth": "auth"})
    assert run.kind == "ingested" and run.meta.pipeline == "checkout-go"
    assert run.stage_names == ["auth", "database"]
    assert run.requests["dur_ns"].tolist() == [10 * MS, 6 * MS]
    assert run.requests["start_ns"].tolist() == [0, 20 * MS]
    st = run.stages.sort_values(["request", "stage_index"])
    assert st["stage"].tolist() == ["auth", "database", "auth", "database"]
    assert st["dur_ns"].tolist() == [1 * MS, 4 * MS, MS // 2, 4 * MS]
    bad = run.requests.iloc[1]
    assert (
        not bad["ok"] and bad["error_stage"] == "database" and bad["error_type"] == "TimeoutError"
    )
    assert bad["error_message"] == "deadline exceeded after 4 ms"
    report = budget(run)
    assert [s["name"] for s in report["stages"]] == ["auth", "database"]
    assert report["end_to_end"]["count"] == 1  # the failed request is counted apart
    assert report["unattributed"]["mean_ms"] == 5.0  # 10 - 1 - 4: render and db.conn are not mapped


def test_without_a_map_each_child_of_the_root_is_a_stage(export):
    run = ingest_otel(export)
    assert run.stage_names == ["auth", "db.query", "render"]
    first = run.stages[run.stages["request"] == 0].set_index("stage")["dur_ns"].to_dict()
    assert first == {"auth": MS, "db.query": 4 * MS, "render": 2_500_000}


def test_cli_writes_a_run_that_show_reads(export, tmp_path, capsys):
    assert (
        main(
            [
                "ingest-otel",
                str(export),
                "--stage-map",
                "db.query=database",
                "--out",
                str(tmp_path / "r"),
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["unmatched_stage_map"] == []
    run = load_run(tmp_path / "r")
    assert run.kind == "ingested" and run.stage_names == ["database"]


def test_bad_inputs_name_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="expected SPAN_NAME=STAGE"):
        parse_stage_map(["db.query"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"spans": []}\n')
    with pytest.raises(TraceError, match="bad.jsonl:1: not an ExportTraceServiceRequest"):
        ingest_otel(bad)
    with pytest.raises(ConfigError, match="no such file or folder"):
        ingest_otel(tmp_path / "missing")


def test_a_folder_of_exports_is_one_run_and_an_unmatched_map_is_said(export, tmp_path, capsys):
    folder = tmp_path / "spans"
    folder.mkdir()
    lines = export.read_text().splitlines()
    (folder / "a.jsonl").write_text(lines[0] + "\n")
    (folder / "b.json").write_text(
        json.dumps(json.loads(lines[1]), indent=2)
    )  # one pretty-printed object
    (folder / "notes.txt").write_text("ignored")
    run = ingest_otel(folder, {"auth": "auth"})
    assert run.requests["dur_ns"].tolist() == [10 * MS, 6 * MS] and run.meta.ingest.spans == 9
    assert (
        main(
            [
                "ingest-otel",
                str(folder),
                "--stage-map",
                "auth=auth",
                "cache.get=cache",
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    assert "--stage-map: no span named cache.get under any request" in capsys.readouterr().out
