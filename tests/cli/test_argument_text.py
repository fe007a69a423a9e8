"""Arguments no file name or text can hold are one line (exit 2) before any command runs; a path the OS
cannot follow (too long a name, a link loop) is one line too, not an internal error (issue 35)."""

import pytest

from workbench.cli import main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["analyze", "a\x00b", "--json"], "argument 2 ('a\\x00b') holds a NUL byte"),
        (["gate", "/tmp/\ud800"], "argument 2 ('/tmp/\\ud800') holds a lone surrogate"),
        (["export-dashboard", "--out", "x\x00"], "argument 3 ('x\\x00') holds a NUL byte"),
    ],
)
def test_a_nul_byte_or_a_lone_surrogate_is_one_line(argv, says, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err
    assert err.count("\n") == 1


def test_a_surrogate_escaped_byte_from_the_os_is_a_name_like_any_other(tmp_path, capsys):
    missing = tmp_path / "caf\udce9"  # os.fsdecode(b"caf\xe9"): a real file name
    assert main(["show", str(missing), "--json"]) == 2
    err = capsys.readouterr().err
    assert "lone surrogate" not in err and "caf\\xe9: not a folder" in err


@pytest.mark.parametrize("command", [["show"], ["ingest-otel"], ["analyze"]])
def test_a_name_longer_than_the_os_allows_is_one_line(command, tmp_path, capsys):
    assert main([*command, str(tmp_path / ("p" * 300))]) == 2
    err = capsys.readouterr().err
    assert "File name too long" in err and "internal error" not in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "says"),
    [  # the long fuzz run's argument sets 1491 and 362 (issue 35): exit 3, and two lines
        (["serve", "--example", "", "--port", "0"], "unknown example ''"),
        (["profile", "--example", ""], "unknown example ''"),
        (
            ["export-dashboard", "--out", "{tmp}/d.html", "--runs", "\n"],
            "--runs '\\n': not a folder",
        ),
    ],
)
def test_an_empty_example_and_a_newline_path_are_one_line(
    argv, says, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # no default run folder is left in the repository
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
