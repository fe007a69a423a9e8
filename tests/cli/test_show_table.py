"""The budget table keeps its columns apart for any duration and any stage name (issue 26: past 10 s they ran
together)."""

import json

from tests.cli.compare_helpers import saved_run

from workbench.cli import main
from workbench.cli.show import render_table


def test_render_table_widens_a_column_to_its_longest_cell_plus_one_space():
    lines = render_table(
        [["stage", "p50"], ["forward", "1.000"], ["a_very_long_stage_name", "123456.789"]], [8, 6]
    )
    assert lines == [
        "stage                         p50",
        "forward                     1.000",
        "a_very_long_stage_name 123456.789",
    ]


def test_a_12_second_stage_keeps_every_column_apart(tmp_path, capsys):
    run = saved_run(
        tmp_path / "slow", 12_345_678_901, noisy=None
    )  # forward: 12.3 s per request (fake clock)
    assert main(["show", str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("stage "))
    forward = lines[head + 2].split()
    assert (
        forward[0] == "forward" and forward[2] == "12345.679" and len(forward) == 9
    )  # name, count, 5 times, share, errors
    assert (
        lines[head + 4].split()[:3] == ["end", "to", "end"]
        and lines[head + 4].split()[4] == "12345.680"
    )
    columns = {len(line.rstrip()) for line in lines[head : head + 3]}
    assert (
        len(columns) == 1
    )  # header and stage rows end at the same column: right-aligned, same widths


def test_a_stage_seen_only_in_failed_requests_has_dashes_not_nan(tmp_path, capsys):
    import json

    from tests.otel.test_ingest_boundary import export
    from tests.otel.test_ingest import span

    spans = [
        span("t1", "r1", None, "GET /", 0, 10),
        span("t1", "a", "r1", "parse", 1, 4),
        span("t2", "r2", None, "GET /", 20, 30, status={"code": 2}),
        span("t2", "b", "r2", "lookup", 21, 24),
    ]
    (tmp_path / "spans.jsonl").write_text(export(spans))
    assert main(["ingest-otel", str(tmp_path / "spans.jsonl"), "--out", str(tmp_path / "run")]) == 0
    assert main(["show", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    lookup = next(line for line in text.splitlines() if line.startswith("lookup "))
    assert (
        lookup.split() == ["lookup", "0", "-", "-", "-", "-", "-", "-", "0"] and "nan" not in text
    )
    assert main(["show", str(tmp_path / "run"), "--json"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    (stage,) = [s for s in stages if s["name"] == "lookup"]
    assert stage["count"] == 0 and stage["mean_ms"] is None and stage["share"] is None


def test_show_says_the_far_tail_and_the_count_p999_needs(tmp_path, capsys):
    run = saved_run(
        tmp_path / "r", 5000, noisy=None, requests=40
    )  # end to end 6000 ns (fake clock)
    assert main(["show", str(run)]) == 0
    assert (
        "end to end p99.9: 40 successful requests; 5661 bound it; "
        "max 0.006 ms (at or above p92.78 with 95% confidence)"  # 100 * 0.05 ** (1 / 40) = 92.784
    ) in capsys.readouterr().out.splitlines()
    assert main(["show", str(run), "--json"]) == 0
    e2e = json.loads(capsys.readouterr().out)["end_to_end"]
    assert {k: e2e[k] for k in ("p999_ms", "p999_ci_low_ms", "p999_ci_high_ms")} == dict.fromkeys(
        ("p999_ms", "p999_ci_low_ms", "p999_ci_high_ms")
    )
    assert (e2e["p999_needs_count"], e2e["max_ms"], e2e["max_above_percentile"]) == (
        5661,
        0.006,
        92.7842,
    )
