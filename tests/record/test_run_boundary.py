"""Issue 27: hand-edited run folders through the commands that crashed on them (exit 2 with one line, or a skip).

Each case starts from a shipped run (``data/runs``) copied and edited the way
the issue's attack did; the commands are the real command line, in process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.support.cli import main_output as cli

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "data" / "runs" / "tabular-cpu-bs4-fp32"


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return Path(shutil.copytree(SOURCE, tmp_path / "runs" / SOURCE.name))


def edit_meta(root: Path, change) -> None:
    meta = json.loads((root / "run.json").read_text())
    change(meta)
    (root / "run.json").write_text(json.dumps(meta))


def edit_table(root: Path, name: str, change) -> None:
    df = pd.read_parquet(root / name)
    change(df)
    df.to_parquet(root / name, index=False)


def one_line_error(rc: int, err: str, command: str, *words: str) -> None:
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith(f"workbench {command}: error: "), err
    assert "Traceback" not in err and "internal error" not in err
    for word in words:
        assert word in err, (word, err)


def test_export_dashboard_skips_a_run_without_batch_size_with_a_note(run_dir, tmp_path):
    edit_meta(run_dir, lambda m: m["config"].pop("batch_size"))
    rc, out, err = cli(
        ["export-dashboard", "--runs", str(run_dir.parent), "--out", str(tmp_path / "site")]
    )
    assert rc == 0 and "internal error" not in err and "Traceback" not in err
    page = (tmp_path / "site" / "index.html").read_text()
    assert f"skipped {run_dir.name}: run.json has no config.batch_size" in page


@pytest.mark.parametrize("command", [["show"], ["audit", "--json"], ["analyze"]])
@pytest.mark.parametrize(
    "change, words",
    [
        (
            lambda m: m.__setitem__("noise", dict(m["noise"] or {}, noisy="yes")),
            ("run.json", "'noise.noisy'", "'yes'"),
        ),
        (lambda m: m.__setitem__("load", [1, 2]), ("run.json", "'load'", "[1, 2]")),
        (lambda m: m.__setitem__("load", "fast"), ("run.json", "'load'", "'fast'")),
        (  # format 4: a run holds only its kind's sections
            lambda m: m.__setitem__("kind", "load"),
            ("run.json", "'cold_start'", "absent on a load run"),
        ),
    ],
)
def test_a_wrong_section_is_one_line_naming_file_field_and_value(run_dir, command, change, words):
    edit_meta(run_dir, change)
    rc, _, err = cli([*command, str(run_dir)])
    one_line_error(rc, err, command[0], *words)


def test_simulate_refuses_a_profile_run_marked_load_and_zero_durations(run_dir):
    simulate = ["simulate", "--service", str(run_dir), "--rate", "100", "--requests", "50"]
    simulate += ["--max-batch-size", "4"]
    edit_meta(run_dir, lambda m: m.__setitem__("kind", "load"))
    rc, _, err = cli(simulate)
    one_line_error(rc, err, "simulate", "run.json", "absent on a load run")
    edit_meta(run_dir, lambda m: m.__setitem__("kind", "profile"))
    for name in ("requests.parquet", "stages.parquet"):
        edit_table(run_dir, name, lambda df: df.__setitem__("dur_ns", 0))
    rc, _, err = cli(simulate)
    one_line_error(rc, err, "simulate", "requests.parquet", "'dur_ns'")


def test_a_stage_listed_but_absent_is_refused_not_nan(run_dir):
    edit_meta(run_dir, lambda m: m["stages"].append("ghost"))
    rc, out, err = cli(["show", "--json", str(run_dir)])
    one_line_error(rc, err, "show", "stages.parquet", "'ghost'")
    assert "NaN" not in out


def test_stage_times_above_the_request_are_refused_not_a_negative_unattributed_time(run_dir):
    edit_table(run_dir, "stages.parquet", lambda df: df.__setitem__("dur_ns", df["dur_ns"] * 50))
    rc, out, err = cli(["show", str(run_dir)])
    one_line_error(rc, err, "show", "stages.parquet", "more than the request's dur_ns")
    assert out == ""


def test_requests_parquet_linked_to_another_run_is_refused_by_name(run_dir, tmp_path):
    other = Path(
        shutil.copytree(REPO / "data" / "runs" / "tabular-cpu-bs8-fp32", tmp_path / "other")
    )
    (run_dir / "requests.parquet").unlink()
    (run_dir / "requests.parquet").symlink_to(other / "requests.parquet")
    rc, _, err = cli(["show", str(run_dir)])
    one_line_error(rc, err, "show", "requests.parquet", "outside the run folder")


def test_a_link_inside_the_folder_is_read(run_dir):
    (run_dir / "requests.parquet").rename(run_dir / "kept.parquet")
    (run_dir / "requests.parquet").symlink_to("kept.parquet")
    rc, _, err = cli(["show", "--json", str(run_dir)])
    assert rc == 0, err


def test_an_output_that_fails_to_land_leaves_no_temporary_file(tmp_path, monkeypatch):
    from workbench.record import folder

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(folder.os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        folder.write_text_atomically(tmp_path / "site" / "index.html", "x" * 1000)
    assert list((tmp_path / "site").iterdir()) == []
