"""The trace explorer refuses an upload whose JSON passes 256 MiB, while decompressing (a gzip bomb)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trace"))
from test_read import write_bomb  # noqa: E402
from test_traces import small_trace  # noqa: E402

from workbench.trace.read import DEFAULT_MAX_TRACE_BYTES  # noqa: E402
from workbench.widgets import TraceExplorer  # noqa: E402
from workbench.widgets.traces import UPLOAD_MAX_TRACE_BYTES  # noqa: E402


def test_upload_over_256_mib_of_json_is_refused_with_a_message(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    small_trace(traces / "a.json.gz")
    bomb = write_bomb(tmp_path / "bomb.json.gz", UPLOAD_MAX_TRACE_BYTES + 2**20).read_bytes()
    ex = TraceExplorer(traces).wait()
    assert ex._max_bytes(traces / "a.json.gz") == DEFAULT_MAX_TRACE_BYTES
    ex.load_bytes("bomb.json.gz", bomb)
    ex.wait()
    assert UPLOAD_MAX_TRACE_BYTES == 256 * 2**20
    assert ex.message_line.level == "error"
    assert "bomb.json.gz: trace too large for the cap of 268,435,456 bytes" in ex.message
    assert ex.status.value == "uploaded: bomb.json.gz: not loaded"
    ex.close()
