"""The budget table keeps its columns apart for any duration and any stage name (issue 26: past 10 s they ran
together)."""

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
