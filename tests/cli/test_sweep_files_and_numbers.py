"""Issue 27 (rest): compare/gate/serve/load --sweep numbers with ranges and units, their strict JSON, and sweep
files decoded at the boundary (``batching/capacity.decode_sweep``)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.input_fuzz import (
    BASE_RUN,
    BASE_SWEEP,
    judge,
    mutate_sweep_folder,
    run_cli,
    sweep_folder,
)
from tests.support.cli import main_output as cli, one_line
from workbench.cli import main


def strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} in the output")

    return json.loads(text, parse_constant=refuse)


# -- numbers: a range and a unit in --help, one line outside it ------------------------------------------------

HELP = {
    "compare": ("--resolution", "--max-time", "--requests", "--warmup", "--seed", "--min-effect"),
    "gate": ("--p50", "--p99"),
    "serve": (
        "--port",
        "--max-batch-size",
        "--max-wait-ms",
        "--concurrency",
        "--warmup",
        "--drain-timeout",
        "--max-header-bytes",
        "--max-body-bytes",
        "--max-request-id",
        "--header-timeout",
        "--body-timeout",
        "--keep-alive-timeout",
        "--max-connections",
        "--max-pending",
        "--accept-backlog",
    ),
    "load": (
        "--sweep",
        "--window-s",
        "--stability",
        "--max-windows",
        "--sla-ms",
        "--max-points",
        "--workers",
        "--expect-workers",
        "--master-port",
    ),
}


@pytest.mark.parametrize("command", sorted(HELP))
def test_every_number_option_states_range_and_unit(command):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(out.getvalue().split("options:", 1)[1].split())
    for option in HELP[command]:
        help_line = text.split(f"{option} ", 1)[1][:500]
        assert "[in " in help_line or "in [" in help_line, (command, option, help_line)


SWEEP = ["load", "--example", "tabular", "--out", "/nonexistent-never-written"]


@pytest.mark.parametrize(
    "argv, words",
    [
        (
            ["compare", "a", "b", "--resolution", "nan"],
            ("--resolution must be a number in (0, 10] (ratio units), got nan",),
        ),
        (["compare", "a", "b", "--resolution", "0"], ("--resolution must be a number in (0, 10]",)),
        (
            ["compare", "a", "b", "--max-time", "-1"],
            ("--max-time must be a number in (0, 604800] s, got -1",),
        ),
        (["compare", "a", "b", "--max-time", "inf"], ("--max-time must be a number",)),
        (
            ["compare", "a", "b", "--requests", "0"],
            ("--requests must be an integer in [1, 100_000_000] requests",),
        ),
        (["compare", "a", "b", "--requests", "1e12"], ("--requests must be an integer",)),
        (
            ["compare", "a", "b", "--min-effect", "inf"],
            ("--min-effect must be a number in [0, 10] (ratio units)",),
        ),
        (["compare", "a", "b", "--seed", "-1"], ("--seed must be an integer",)),
        (
            ["gate", "x.json", "--p50", "1e9%"],
            ("--p50 '1e9%': expected a percentage such as +5%, in [0, 1000] %",),
        ),
        (["gate", "x.json", "--p99", "nan"], ("--p99 'nan': expected a percentage",)),
        (["gate", "x.json", "--p99=-5%"], ("--p99 '-5%'",)),
        (["gate", "x.json", "--p50", "five"], ("--p50 'five'",)),
        (
            ["serve", "--example", "tabular", "--port", "70000"],
            ("--port must be an integer in [0, 65_535] (TCP port)",),
        ),
        (["serve", "--example", "tabular", "--port", "-1"], ("--port must be an integer",)),
        (
            ["serve", "--example", "tabular", "--max-wait-ms", "inf"],
            ("--max-wait-ms must be a number in [0, 3.6e+06] ms",),
        ),
        (
            ["serve", "--example", "tabular", "--max-batch-size", "0"],
            ("--max-batch-size must be an integer in [1, 65_536]",),
        ),
        (
            ["serve", "--example", "tabular", "--concurrency", "nan"],
            ("--concurrency must be an integer",),
        ),
        (
            ["serve", "--example", "tabular", "--header-timeout", "nan"],
            ("--header-timeout must be a number in (0, 86400] s",),
        ),
        (
            ["serve", "--example", "tabular", "--keep-alive-timeout", "0"],
            ("--keep-alive-timeout must be a number",),
        ),
        (
            ["serve", "--example", "tabular", "--max-body-bytes", "-5"],
            ("--max-body-bytes must be an integer in [1, ",),
        ),
        (
            ["serve", "--example", "tabular", "--max-pending", "1e30"],
            ("--max-pending must be an integer",),
        ),
        (
            ["serve", "--example", "tabular", "--drain-timeout", "-0.5"],
            ("--drain-timeout must be a number in [0, 86400] s",),
        ),
        (
            [*SWEEP, "--sweep", "rate=10", "--window-s", "0"],
            ("--window-s must be a number in (0, 3600] s, got 0",),
        ),
        ([*SWEEP, "--sweep", "rate=10", "--window-s", "nan"], ("--window-s must be a number",)),
        (
            [*SWEEP, "--sweep", "rate=10", "--stability", "inf"],
            ("--stability must be a number in (0, 200] %",),
        ),
        (
            [*SWEEP, "--sweep", "rate=10", "--max-windows", "2"],
            ("--max-windows must be an integer in [3, 1_000] windows",),
        ),
        (
            [*SWEEP, "--sweep", "rate=auto", "--sla-ms", "inf"],
            ("--sla-ms must be a number in (0, 3.6e+06] ms, got inf",),
        ),
        (
            [*SWEEP, "--sweep", "rate=auto", "--sla-ms", "50", "--max-points", "0"],
            ("--max-points must be an integer",),
        ),
        (
            [*SWEEP, "--sweep", "rate=-5"],
            ("--sweep rate=-5: each rate must be a number in [0.001, 1e+07] requests/s",),
        ),
        ([*SWEEP, "--sweep", "rate=0,10"], ("--sweep rate=0,10: each rate must be", "got '0'")),
        ([*SWEEP, "--sweep", "rate=10,nan"], ("got 'nan'",)),
        ([*SWEEP, "--sweep", "rate=10,inf"], ("got 'inf'",)),
        ([*SWEEP, "--sweep", "rate=1e12"], ("got '1e12'",)),
        ([*SWEEP, "--sweep", "rate=ten"], ("got 'ten'",)),
        (
            [*SWEEP, "--sweep", "concurrency=1.5", "--rate", "5"],
            ("each concurrency must be an integer in [1, 1_024]",),
        ),
        ([*SWEEP, "--sweep", "concurrency=2000", "--rate", "5"], ("got '2000'",)),
        (
            ["load", "--url", "http://127.0.0.1:9", "--engine", "locust", "--workers", "0"],
            ("--workers must be an integer in [1, 1_024] processes, got 0",),
        ),
        (
            ["load", "--url", "http://127.0.0.1:9", "--engine", "locust", "--master-port", "99999"],
            ("--master-port must be an integer in [0, 65_535] (TCP port)",),
        ),
        (
            [*SWEEP, "--sweep", "rate=" + ",".join(str(v) for v in range(1, 100_002))],
            ("100,001 values; at most 100 points per sweep",),
        ),
    ],
)
def test_numbers_outside_their_range_are_one_line(argv, words):
    rc, _, err = cli(argv)
    one_line(rc, err, *words)


def test_whole_concurrencies_written_as_floats_still_sweep():
    from workbench.cli.sweep import sweep_spec

    assert (
        sweep_spec("concurrency=1,2.0,4") == "concurrency=1,2.0,4"
        and sweep_spec("rate=auto") == "rate=auto"
    )


# -- strict JSON -------------------------------------------------------------------------------------------------


def test_compare_json_of_saved_runs_is_strict(monkeypatch):
    import workbench.cli.compare as compare_cli

    monkeypatch.setattr(
        compare_cli,
        "compare_saved",
        lambda *a, **kw: {"end_to_end": {"p50_ratio": math.nan, "p99_ci": [math.inf, 1.0]}},
    )
    rc, out, err = cli(["compare", str(BASE_RUN), str(BASE_RUN), "--json"])
    assert rc == 0, err
    assert strict_json(out) == {"end_to_end": {"p50_ratio": None, "p99_ci": [None, 1.0]}}


def test_sweep_ratios_left_undefined_are_null_not_nan(tmp_path):
    """A point of A with p50 0 has no B/A ratio: NaN in the table, printed as NaN before (not JSON)."""
    a, b = sweep_folder(tmp_path / "a"), sweep_folder(tmp_path / "b")
    doc = json.loads((a / "sweep.json").read_text())
    doc["points"][1]["p50_ms"] = 0.0
    (a / "sweep.json").write_text(json.dumps(doc))
    rc, out, err = cli(["compare", str(a), str(b), "--json"])
    assert rc == 0, err
    points = strict_json(out)["points"]
    assert [p["p50_ratio"] is None for p in points] == [False, True, False, False]
    assert points[0]["p50_ratio"] == 1.0
    rc, out, err = cli(["compare", str(a), str(b)])  # the table shows "-" where there is no ratio
    assert rc == 0 and " nan" not in out, out


def test_load_sweep_json_is_strict(monkeypatch, tmp_path):
    import workbench.cli.sweep as sweep_cli

    record = json.loads(BASE_SWEEP.read_text())
    record["points"][0]["p50_ms"] = math.nan
    record["points"][0]["predicted"]["p99_ratio"] = math.inf
    monkeypatch.setattr(
        sweep_cli, "_in_process", lambda args: (None, {"kind": "load", "pipeline": "t"})
    )
    monkeypatch.setattr(sweep_cli, "run_sweep", lambda *a, **kw: record)
    monkeypatch.setattr(sweep_cli, "_predict", lambda args, plan, rec, out: rec)
    rc, out, err = cli(
        [
            "load",
            "--example",
            "tabular",
            "--sweep",
            "rate=25,50,100,200",
            "--json",
            "--out",
            str(tmp_path / "s"),
        ]
    )
    assert rc == 0, err
    printed = strict_json(out)
    assert (
        printed["points"][0]["p50_ms"] is None
        and printed["points"][0]["predicted"]["p99_ratio"] is None
    )


def test_the_sweep_file_written_is_strict(tmp_path):
    from workbench.batching.capacity import write_sweep

    record = json.loads(BASE_SWEEP.read_text())
    record["points"][0]["p99_ms"], record["knee"] = (
        math.nan,
        {"point": 0, "offered_rps": math.inf, "achieved_rps": 1.0, "p99_ms": 2.0},
    )
    written = strict_json(write_sweep(tmp_path, record).read_text())
    assert written["points"][0]["p99_ms"] is None and written["knee"]["offered_rps"] is None


def test_show_json_of_a_sweep_is_the_decoded_file(tmp_path):
    folder = sweep_folder(tmp_path / "s")
    rc, out, err = cli(["show", str(folder), "--json"])
    assert rc == 0, err
    assert strict_json(out) == json.loads(BASE_SWEEP.read_text())
    doc = json.loads(BASE_SWEEP.read_text())  # a point without a prediction is shown without one
    del doc["points"][1]["predicted"]
    (folder / "sweep.json").write_text(json.dumps(doc))
    rc, out, err = cli(["show", str(folder), "--json"])
    assert rc == 0 and strict_json(out) == doc, err


# -- the sweep file decoded at the boundary ---------------------------------------------------------------------


def _edited(tmp_path: Path, edit) -> Path:
    folder = sweep_folder(tmp_path / "s")
    doc = json.loads((folder / "sweep.json").read_text())
    edit(doc)
    (folder / "sweep.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            lambda d: d["points"][0].update(requests="131"),
            ("field points[0].requests: expected `int`, got `str` (value '131')",),
        ),
        (
            lambda d: d["points"][2].update(p99_ms=-1.5),
            ("field points[2].p99_ms: expected `float` >= 0.0", "(value -1.5)"),
        ),
        (
            lambda d: d["points"][1].update(run="../../elsewhere"),
            (
                "field points[1].run must be a folder inside the sweep folder, got '../../elsewhere'",
            ),
        ),
        (
            lambda d: d["points"][1].update(run="/etc"),
            ("field points[1].run must be a folder inside", "'/etc'"),
        ),
        (
            lambda d: d["points"][0].update(rate_rps=None),
            ("field points[0].rate_rps is null in a rate sweep",),
        ),
        (
            lambda d: d["plan"].update(parameter="speed"),
            ("field plan.parameter: invalid enum value 'speed'",),
        ),
        (lambda d: d.pop("points"), ("the document: object missing required field `points`",)),
        (
            lambda d: d.update(version=2),
            ("field 'format'/'version' must be 'workbench.sweep'/1, got 'workbench.sweep'/2",),
        ),
        (
            lambda d: d.update(
                knee={"point": 0, "offered_rps": "fast", "achieved_rps": 1.0, "p99_ms": 1.0}
            ),
            ("field knee.offered_rps: expected `float`, got `str` (value 'fast')",),
        ),
        (lambda d: d.update(prediction={"source": None}), ("field prediction.why is missing",)),
        (
            lambda d: d["points"][1]["stages"]["forward"].update(p95_ms=[3.0]),
            (
                "field points[1].stages['forward'].p95_ms: expected `float | null`, got `array` (value [3.0])",
            ),
        ),
        (
            lambda d: d["points"][0].update(failures={"forward": 1, "parse": -2}),
            ("field points[0].failures['parse']: expected `int` >= 0 (value -2)",),
        ),
        (
            lambda d: d["points"][3]["window_table"][0].update(start_ns=2**70),
            ("field points[3].window_table[0].start_ns: expected `int` <= 9223372036854775807",),
        ),
    ],
)
@pytest.mark.parametrize("command", ["show", "compare", "audit"])
def test_a_malformed_sweep_file_is_one_line_naming_file_field_and_value(
    tmp_path, edit, words, command
):
    folder = _edited(tmp_path, edit)
    argv = {
        "show": ["show", str(folder), "--json"],
        "audit": ["audit", str(folder), "--json"],
        "compare": ["compare", str(sweep_folder(tmp_path / "ok")), str(folder), "--json"],
    }[command]
    rc, _, err = cli(argv)
    one_line(rc, err, f"{folder / 'sweep.json'}: ", *words)


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda raw: raw.replace(b'"p99_ms": ', b'"p99_ms": NaN, "x": ', 1), ("not valid JSON",)),
        (
            lambda raw: raw.replace(b'"p99_ms": ', b'"p99_ms": 1e400, "x": ', 1),
            ("number out of range",),
        ),
        (lambda raw: raw[:100] + b"\xff\xfe" + raw[100:], ("not valid JSON",)),
        (lambda raw: b"[" * 100_000 + raw + b"]" * 100_000, ("",)),
        (lambda raw: raw[: len(raw) // 2], ("not valid JSON",)),
    ],
)
def test_damaged_sweep_bytes_are_one_line(tmp_path, damage, words):
    folder = sweep_folder(tmp_path / "s")
    (folder / "sweep.json").write_bytes(damage((folder / "sweep.json").read_bytes()))
    rc, _, err = cli(["show", str(folder), "--json"])
    one_line(rc, err, f"{folder / 'sweep.json'}: ", *words)


def test_a_sweep_file_linked_out_of_its_folder_is_refused(tmp_path):
    folder = sweep_folder(tmp_path / "s")
    outside = tmp_path / "elsewhere.json"
    shutil.move(folder / "sweep.json", outside)
    os.symlink(outside, folder / "sweep.json")
    rc, _, err = cli(["show", str(folder)])
    one_line(rc, err, "a symbolic link out of the sweep folder")


def test_the_decoded_sweep_is_typed():
    from workbench.batching.capacity import decode_sweep, read_sweep

    with tempfile.TemporaryDirectory() as tmp:
        record = decode_sweep(sweep_folder(Path(tmp) / "s"))
        assert record.plan.parameter == "rate" and record.plan.values == [25.0, 50.0, 100.0, 200.0]
        assert [p.requests for p in record.points] == [131, 273, 590, 1203]
        assert record.points[3].window_table[1].end_ns == 4_000_000_000 and record.knee is None
        plain = read_sweep(Path(tmp) / "s")
        assert plain["points"][0]["stages"]["network"] == {
            "p50_ms": 0.930106,
            "p95_ms": 10.728321,
            "p99_ms": 16.94615459999995,
        }


def test_audit_of_a_sweep_reads_its_point_runs(tmp_path):
    folder = sweep_folder(tmp_path / "s", with_runs=True)
    rc, out, err = cli(["audit", str(folder), "--json"])
    assert rc == 0, err
    assert len(strict_json(out)["runs"]) == 4


# -- property: any mutation of a real sweep folder -----------------------------------------------------------------


def judged_sweep(rnd: random.Random, command: str) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        root = sweep_folder(Path(tmp) / "sweep", with_runs=command == "audit")
        mutate_sweep_folder(root, rnd)
        argv = {
            "show": ["show", "--json", str(root)],
            "audit": ["audit", "--json", str(root)],
            "compare": ["compare", str(sweep_folder(Path(tmp) / "base")), str(root), "--json"],
        }[command]
        return judge(*run_cli(argv))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from(["show", "compare"]))
def test_a_mutated_sweep_folder_is_strict_json_or_one_line(rnd, command):
    outcome, why = judged_sweep(rnd, command)
    assert outcome != "crash", why


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_a_mutated_sweep_folder_through_audit(rnd):
    outcome, why = judged_sweep(rnd, "audit")
    assert outcome != "crash", why


def test_the_sweep_mutators_reach_both_outcomes():
    outcomes = {judged_sweep(random.Random(seed), "show")[0] for seed in range(40)}
    assert outcomes == {"ok", "clean_error"}
