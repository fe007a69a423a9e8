"""``analyze --progress``: a one-line bar on stderr (loading and analysis), stdout unchanged."""

import io
import json

from workbench.cli import main
from workbench.cli.output import ProgressBar
from tests.support.synthetic import example_trace


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_bar_redraws_on_new_stages_and_at_most_every_interval():
    out, clock = io.StringIO(), FakeClock()
    bar = ProgressBar(out, width=10, min_interval_s=0.1, clock=clock)
    bar("decode", 1, 4)
    clock.now = 0.05
    bar("decode", 2, 4)  # too soon: skipped
    clock.now = 0.2
    bar("decode", 3, 4)
    bar("decode", 4, 4)  # the end of a stage is always drawn
    bar("analyze", 1, 3)  # so is a new stage
    bar.close()
    assert out.getvalue().split("\r")[1:] == [
        "decoding   [##........]  25%",
        "decoding   [#######...]  75%",
        "decoding   [##########] 100%",
        "analyzing  [###.......]  33%\n",
    ]


def test_close_without_drawing_writes_nothing():
    out = io.StringIO()
    ProgressBar(out).close()
    assert out.getvalue() == ""


def test_cli_progress_goes_to_stderr_and_json_stays_clean(tmp_path, capsys):
    path = example_trace().write(tmp_path / "t.json")
    assert main(["analyze", str(path), "--json", "--progress"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["launch_pairs"]["count"] == 4
    lines = captured.err.split("\r")
    assert (
        lines[1].startswith("reading")
        and lines[-1] == "analyzing  [##############################] 100%\n"
    )
    assert any(line.startswith("decoding") and line.endswith("100%") for line in lines)
    assert main(["analyze", str(path), "--json", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_an_error_erases_the_bar_so_that_it_is_the_one_line(tmp_path, capsys):
    # a fuzzed `analyze RUN/run.json --json --progress` printed the bar's line, then the error (2 lines)
    path = tmp_path / "run.json"
    path.write_text('{"kind": "profile"}')
    assert main(["analyze", str(path), "--json", "--progress"]) == 2
    err = capsys.readouterr().err
    bar = "reading    [..............................]   0%"
    assert err == f"\r{bar}\r{' ' * len(bar)}\rworkbench analyze: error: {path}: not a PyTorch " + (
        "profiler trace: no 'traceEvents' list\n"
    )
