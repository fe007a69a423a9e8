"""Issue 35: the one way to open a user's file: regular files only, the size capped before reading."""

from __future__ import annotations

import os

import pytest

from workbench.errors import ConfigError
from workbench.files import open_regular, read_capped


def test_a_regular_file_and_a_link_to_one_are_read(tmp_path):
    (tmp_path / "a.json").write_bytes(b"{}")
    os.symlink(tmp_path / "a.json", tmp_path / "link.json")
    assert read_capped(tmp_path / "link.json", 2, ConfigError) == b"{}"


def test_a_fifo_without_a_writer_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ConfigError) as info:
        read_capped(tmp_path / "fifo", 100, ConfigError, "compare file", "give a file")
    assert (
        str(info.value)
        == f"{tmp_path / 'fifo'}: is a FIFO (named pipe), not a regular file; give a file"
    )


def test_a_link_to_a_device_is_refused_by_what_it_points_to(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.json")
    with pytest.raises(ConfigError, match="zero.json: is a character device, not a regular file$"):
        read_capped(tmp_path / "zero.json", 100, ConfigError)


def test_a_folder_and_a_missing_file_are_named(tmp_path):
    with pytest.raises(ConfigError, match="is a folder, not a regular file"):
        open_regular(tmp_path, ConfigError)
    with pytest.raises(ConfigError, match="missing.json: no such sweep file$"):
        open_regular(tmp_path / "missing.json", ConfigError, "sweep file")


def test_a_file_over_its_cap_is_refused_before_reading(tmp_path):
    (tmp_path / "big.json").write_bytes(b" " * 11)
    with pytest.raises(ConfigError) as info:
        read_capped(tmp_path / "big.json", 10, ConfigError, "compare file")
    assert str(info.value) == (
        f"{tmp_path / 'big.json'}: 11 bytes, more than a compare file holds (10); refused before reading"
    )
