"""Reading trace files: streamed gzip with a size cap checked while decompressing, gzip damage, encodings."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import pytest

from workbench.cli import analyze as analyze_cli
from workbench.errors import TraceError
from workbench.trace import load_trace
from workbench.trace.read import DEFAULT_MAX_TRACE_BYTES, read_bytes
from tests.support.synthetic import example_trace

ROOT = Path(__file__).resolve().parents[2]
MiB = 2**20


def write_bomb(path: Path, json_bytes: int) -> Path:
    """A gzip of a trace whose JSON is ``json_bytes`` long, almost all whitespace (compresses ~1000:1)."""
    head, tail = b'{"traceEvents": [', b"]}"
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    blank = b" " * MiB
    with open(path, "wb") as out:
        out.write(squeeze.compress(head))
        left = json_bytes - len(head) - len(tail)
        while left > 0:
            out.write(squeeze.compress(blank[: min(left, MiB)]))
            left -= MiB
        out.write(squeeze.compress(tail) + squeeze.flush())
    return path


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    return write_bomb(tmp_path_factory.mktemp("bomb") / "bomb.json.gz", 200 * MiB)


def test_gzip_bomb_stops_at_the_cap_with_memory_near_the_cap(bomb):
    assert bomb.stat().st_size < 300_000
    tracemalloc.start()
    try:
        with pytest.raises(TraceError) as info:
            load_trace(bomb, max_bytes=16 * MiB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value) == (
        f"{bomb}: trace too large for the cap of 16,777,216 bytes: it holds more JSON than "
        "that (reading stopped at the cap); if the trace is genuine, raise the cap (analyze "
        "--max-trace-bytes, load_trace(max_bytes=...))"
    )
    # the capped text (bytearray over-allocates by 1/8) plus one 8 MiB output piece and one input chunk
    assert peak < 16 * MiB * 1.125 + 24 * MiB


@pytest.mark.skipif(
    not os.path.exists("/proc/self/status"), reason="reads VmHWM from /proc (Linux)"
)
def test_cli_gzip_bomb_is_one_line_and_exit_2(bomb):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    # The CLI runs in a fresh process that prints its own peak RSS on stdout after the command: the
    # pytest process's RUSAGE_CHILDREN would also count every earlier subprocess of the session.
    # VmHWM, not getrusage: Linux carries ru_maxrss across exec from a vfork'ed parent (the test session).
    wrapper = (
        "import runpy, sys\n"
        "sys.argv = ['workbench', 'analyze', sys.argv[1], '--max-trace-bytes', '16M']\n"
        "try:\n    runpy.run_module('workbench', run_name='__main__')\n"
        "except SystemExit as stop:\n    code = stop.code\n"
        "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, str(bomb)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert (
        done.stderr.count("\n") == 1
        and "trace too large for the cap of 16,777,216 bytes" in done.stderr
    )
    assert int(done.stdout.split()[-1]) < 600 * 1024  # KiB: far from the 200 MB text


def test_cap_is_exact_for_plain_and_gzip_files(tmp_path):
    text = example_trace().to_json()
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    for path in (plain, packed):
        assert bytes(read_bytes(path, max_bytes=len(text))) == text
        with pytest.raises(TraceError, match="trace too large for the cap of"):
            read_bytes(path, max_bytes=len(text) - 1)
    with pytest.raises(TraceError, match=f"{len(text):,} bytes of JSON"):
        read_bytes(plain, max_bytes=100)


def test_a_pipe_is_refused_even_with_a_writer(tmp_path):
    """Non-regular files are refused before opening (a FIFO without a writer blocked forever)."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="is a FIFO"):
        read_bytes(fifo, max_bytes=100)


def test_default_cap_is_4_gib_in_the_api_and_the_cli():
    assert DEFAULT_MAX_TRACE_BYTES == analyze_cli.DEFAULT_MAX_TRACE_BYTES == 4 * 2**30


@pytest.mark.parametrize(
    "text, expected", [("4G", 4 * 2**30), ("16M", 16 * MiB), ("100k", 102_400), ("123", 123)]
)
def test_max_trace_bytes_suffixes(text, expected):
    assert analyze_cli._byte_count(text) == expected


def test_gzip_members_and_zero_padding_are_read_like_gzip(tmp_path):
    text = example_trace().to_json()
    half = len(text) // 2
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]) + b"\x00" * 3000)
    assert bytes(read_bytes(path)) == text


@pytest.mark.parametrize(
    "damage, problem",
    [
        (
            lambda d: d + b"garbage",
            "corrupt gzip data: unexpected bytes after the compressed stream (at byte {n}",
        ),
        (
            lambda d: d[:-8] + bytes([d[-8] ^ 1]) + d[-7:],
            "corrupt gzip data (Error -3 while decompressing data: incorrect data check)",
        ),
        (
            lambda d: d[:12] + b"\xff" * 8 + d[20:],
            "corrupt gzip data (Error -3 while decompressing data: invalid",
        ),
        (lambda d: d[:-3], "truncated gzip data: the file ends after {m} bytes"),
        (lambda d: d[:5], "truncated gzip data: the file ends after 5 bytes"),
    ],
)
def test_damaged_gzip_is_a_trace_error(tmp_path, damage, problem):
    data = gzip.compress(example_trace().to_json())
    path = tmp_path / "t.json.gz"
    path.write_bytes(damage(data))
    with pytest.raises(TraceError) as info:
        read_bytes(path)
    assert str(info.value).startswith(f"{path}: " + problem.format(n=len(data), m=len(data) - 3))
