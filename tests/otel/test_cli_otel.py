"""--otel on profile and on the in-process load: the run folder gains the spans, the numbers do not change."""

import json

from workbench.cli import main
from workbench_serve.otel.export import SPANS_FILE
from workbench_serve.otel.ingest import ingest_otel
from workbench.record import load_run

PIPE = """
import itertools
from workbench import Pipeline

def build(config):
    pipe = Pipeline("tiny", items=lambda: itertools.count())
    pipe.add("double", lambda batch: [x * 2 for x in batch])
    pipe.add("total", sum)
    return pipe
"""


def test_profile_otel_writes_spans_that_ingest_to_the_runs_numbers(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    (tmp_path / "tiny.py").write_text(PIPE)
    out = tmp_path / "run"
    assert (
        main(
            [
                "profile",
                "--closed-loop",
                "--pipeline",
                f"{tmp_path / 'tiny.py'}:build",
                "--requests",
                "7",
                "--warmup",
                "2",
                "--traced",
                "0",
                "--otel",
                "--json",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    json.loads(captured.out)  # still one JSON object; the otel line went to stderr
    assert f"otel: 21 spans of 7 requests to {out / SPANS_FILE}" in captured.err
    run, spans = load_run(out), ingest_otel(out / SPANS_FILE)
    measured = run.requests[~run.requests["warmup"]]
    assert spans.requests["dur_ns"].tolist() == measured["dur_ns"].tolist()
    assert spans.stage_names == ["double", "total"]
    ran = run.stages[run.stages["request"].isin(measured["request"])]
    assert sorted(spans.stages["dur_ns"].tolist()) == sorted(ran["dur_ns"].tolist())


def test_in_process_load_otel(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    (tmp_path / "tiny.py").write_text(PIPE)
    out = tmp_path / "load"
    assert (
        main(
            [
                "load",
                "--pipeline",
                f"{tmp_path / 'tiny.py'}:build",
                "--rate",
                "200",
                "--requests",
                "20",
                "--otel",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "otel: " in capsys.readouterr().out
    spans = ingest_otel(out / SPANS_FILE)
    assert len(spans.requests) == 20 and spans.stage_names == [
        "batch_wait",
        "queue_wait",
        "double",
        "total",
    ]
