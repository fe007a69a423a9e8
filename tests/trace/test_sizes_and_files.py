"""Sizes that cannot wrap, negative sizes refused by name, and files that are not regular files
refused before they are opened (issue 27: a FIFO with no writer blocked ``analyze`` forever;
two copies of 5e18 bytes summed to -8.4e18 and printed a negative bandwidth)."""

import os
from pathlib import Path

import pytest

from tests.support.cli import workbench
from workbench.errors import TraceError
from workbench.trace import load_trace
from tests.support import tables
from tests.support.synthetic import TraceBuilder

REPO = Path(__file__).resolve().parents[2]


def copies(tmp_path, *sizes) -> Path:
    b = TraceBuilder()
    for i, size in enumerate(sizes):
        b.runtime("cudaMemcpyAsync", 10_000 * i, 1_000, i + 1)
        b.memcpy("Memcpy HtoD (Pageable -> Device)", 10_000 * i + 2_000, 4_000, i + 1, nbytes=size)
    return b.write(tmp_path / "copies.json")


def cli(*argv, timeout=60):
    return workbench("analyze", *argv, timeout=timeout, cwd=REPO)


def test_byte_totals_past_int64_are_a_trace_error_not_a_negative_total(tmp_path):
    path = copies(
        tmp_path, 5 * 10**18, 5 * 10**18
    )  # 1e19 > 2**63 - 1: an int64 sum wraps to -8.4e18
    with pytest.raises(
        TraceError,
        match=r"traceEvents\[3\] \('Memcpy HtoD \(Pageable -> Device\)'\) add up to "
        r"over 2\*\*62 bytes",
    ):
        load_trace(path)


def test_large_but_real_byte_totals_are_exact(tmp_path):
    from workbench.analysis import transfers

    trace = load_trace(copies(tmp_path, 2**61, 2**61 - 1))
    assert transfers.memcpy_summary(trace)["bytes"] == 2**62 - 1
    assert (
        tables.memcpy_by_direction(trace).set_index("direction").loc["HtoD", "bytes"] == 2**62 - 1
    )


def test_negative_bytes_are_refused_by_name(tmp_path):
    path = copies(tmp_path, 100, -5)
    with pytest.raises(
        TraceError,
        match=r"traceEvents\[3\] \('Memcpy HtoD \(Pageable -> Device\)'\): 'bytes' is -5, "
        "a negative size",
    ):
        load_trace(path)
    done = cli(path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "'bytes' is -5, a negative size" in done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_with_no_writer_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="is a FIFO \\(named pipe\\), not a regular file"):
        load_trace(fifo)
    done = cli(fifo)  # before: blocked in open() until killed
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{fifo}: is a FIFO (named pipe), not a regular file" in done.stderr


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_device_is_refused_before_reading():
    with pytest.raises(TraceError, match="/dev/zero: is a character device, not a regular file"):
        load_trace("/dev/zero")


def test_a_symlink_to_a_regular_file_still_loads(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(copies(tmp_path, 100))
    assert len(load_trace(link).events) == 2
