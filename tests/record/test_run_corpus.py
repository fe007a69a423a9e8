"""Issue 11: every corrupted run folder gives one RunRecordError naming the file and the field.

Through ``load_run``, and through ``workbench show`` and ``workbench analyze``
(exit 2, one line on stderr, no traceback). The corpus is built in code
(``run_corpus.py``) from one good run that has a trace.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from run_corpus import corpus
from tests.conftest import toy_pipeline
from workbench import profile
from workbench.cli import main
from workbench.errors import RunRecordError
from workbench.record import load_run

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "data" / "traces" / "cpu_stages.pt.trace.json.gz"
CASES = corpus()


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    from tests.conftest import FakeClock

    clock = FakeClock()
    run = profile(
        toy_pipeline(clock, {"parse": 100, "forward": 300}, fail={"forward": {4}}),
        requests=6,
        warmup=1,
        traced=0,
        clock=clock,
    )
    trace_dir = tmp_path_factory.mktemp("trace")
    run.trace_path = Path(shutil.copy(TRACE, trace_dir / TRACE.name))
    return run.save(tmp_path_factory.mktemp("runs") / "good")


@pytest.fixture
def damaged(request, good_run, tmp_path):
    case = request.param
    root = Path(shutil.copytree(good_run, tmp_path / "run"))
    case.apply(root)
    return case, root


def cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    return rc, err.getvalue()


def test_the_corpus_covers_the_issue_families():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 77
    for family in ("deleted-", "truncated-", "meta-", "trace-path-", "-no-", "-type-warmup"):
        assert any(family in i for i in ids), family


def test_the_good_run_loads_and_shows(good_run):
    run = load_run(good_run)
    assert run.trace_path.parent == good_run and len(run.requests) == 7
    assert cli(["show", str(good_run), "--json"]) == (0, "")


@pytest.mark.parametrize("damaged", CASES, ids=[c.id for c in CASES], indirect=True)
def test_load_run_names_file_and_field(damaged):
    case, root = damaged
    with pytest.raises(RunRecordError) as info:
        load_run(root)
    message = str(info.value)
    assert case.file in message
    if case.field is not None:
        assert f"'{case.field}'" in message


@pytest.mark.parametrize("damaged", CASES, ids=[c.id for c in CASES], indirect=True)
def test_show_and_analyze_exit_2_with_one_line(damaged):
    case, root = damaged
    for command in ("show", "analyze"):
        rc, err = cli([command, str(root)])
        assert rc == 2, err
        assert (
            err.count("\n") == 1
            and err.startswith(f"workbench {command}: error: ")
            and case.file in err
        )


@pytest.mark.parametrize("damaged", CASES, ids=[c.id for c in CASES], indirect=True)
def test_compare_and_gate_refuse_what_show_refuses(damaged, good_run):
    """Issue 35: compare and gate of two saved runs read them with show's checks (a negative dur_ns
    printed a negative ratio with exit 0, a text request id was exit 3)."""
    case, root = damaged
    for command in ("compare", "gate"):
        rc, err = cli([command, str(good_run), str(root)])
        assert rc == 2, err
        assert err.count("\n") == 1 and err.startswith(f"workbench {command}: error: ")
        assert case.file in err and (case.field is None or case.field in err)
