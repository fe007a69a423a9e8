"""TraceExplorer through its widget state: pick, upload, broken upload, cache."""

from __future__ import annotations

import gzip
from datetime import datetime, timezone

import pytest

from tests.support.synthetic import EPOCH_NS, TraceBuilder
from workbench.widgets import TraceExplorer, trace_choices


def small_trace(path, kernel_ns: int = 40_000, steps: int = 2):
    """Steps of: stage range -> aten::mm -> cudaLaunchKernel -> a kernel, plus one pageable HtoD copy."""
    b = TraceBuilder()
    t = EPOCH_NS
    for step in range(steps):
        b.annotation(f"ProfilerStep#{step}", t, 200_000)
        b.stage("forward", t + 1_000, 150_000)
        b.op("aten::mm", t + 2_000, 100_000)
        corr = 10 + 2 * step
        b.runtime("cudaLaunchKernel", t + 3_000, 5_000, correlation=corr)
        b.kernel("gemm_kernel", t + 20_000, kernel_ns, correlation=corr)
        b.runtime("cudaMemcpyAsync", t + 110_000, 4_000, correlation=corr + 1)
        b.memcpy("Memcpy HtoD (Pageable -> Device)", t + 120_000, 10_000, corr + 1, nbytes=1 << 20)
        t += 300_000
    return b.write(path)


@pytest.fixture
def traces(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    small_trace(folder / "a.json.gz")
    small_trace(folder / "b.json", kernel_ns=80_000)
    return folder


def test_choices_list_trace_files_of_folders(traces):
    assert list(trace_choices(traces)) == ["a.json.gz", "b.json"]


def test_first_trace_is_drawn_in_every_view(traces):
    ex = TraceExplorer(traces).wait()
    assert ex.loads == 1
    assert all(p.updates == 1 for p in ex.panes.values())
    assert "a.json.gz: 14 events, cuda" in ex.status.value
    flame = ex.panes["flame"].figure.data[0]
    assert flame.type == "icicle"
    assert "gemm_kernel" in flame.labels
    assert ex.panes["launches"].figure.layout.title.text  # a verdict in the title
    assert ex.message == ""


def test_picking_another_trace_loads_it_and_going_back_uses_the_cache(traces):
    ex = TraceExplorer(traces).wait()
    ex.picker.value = str(traces / "b.json")
    ex.wait()
    assert ex.loads == 2
    assert "b.json" in ex.status.value
    ex.picker.value = str(traces / "a.json.gz")
    ex.wait()
    assert ex.loads == 2  # from the cache
    assert "a.json.gz" in ex.status.value


def test_upload_of_a_trace_adds_it_to_the_picker(traces, tmp_path):
    ex = TraceExplorer(traces).wait()
    data = (traces / "a.json.gz").read_bytes()
    ex.upload.value = (
        {
            "name": "mine.json.gz",
            "type": "application/gzip",
            "size": len(data),
            "content": memoryview(data),
            "last_modified": datetime.now(timezone.utc),
        },
    )
    ex.wait()
    assert ex.picker.label == "uploaded: mine.json.gz"
    assert "mine.json.gz" in ex.status.value
    assert ex.upload.value == ()  # the widget no longer holds the bytes
    ex.close()


def test_broken_upload_shows_the_trace_error(traces):
    ex = TraceExplorer(traces).wait()
    shown = ex.panes["flame"].figure.to_dict()
    ex.load_bytes("broken.json.gz", gzip.compress(b'{"traceEvents": [{"ph": "X", "name": '))
    ex.wait()
    assert ex.message_line.level == "error"
    assert "broken.json.gz" in ex.message and "Traceback" not in ex.message
    assert ex.panes["flame"].figure.to_dict() == shown
    ex.close()


def test_request_picker_redraws_the_request_chart(traces):
    ex = TraceExplorer(traces).wait()
    ex.request.value = 1
    assert "ProfilerStep#1" in ex.panes["request"].figure.layout.title.text
    ex.request.value = 5
    assert (
        "5" in ex.panes["request"].figure.layout.annotations[0].text
    )  # out of range: said, not raised


@pytest.mark.parametrize(
    "name", ["../../up.json.gz", "a\x00b.json.gz", "x" * 300 + ".json.gz", ".."]
)
def test_an_uploaded_name_is_not_a_path(traces, name):
    """The browser sends the file's name: a NUL, 300 characters or ``..`` used to raise or name no file."""
    ex = TraceExplorer(traces).wait()
    ex.load_bytes(name, (traces / "a.json.gz").read_bytes())
    ex.wait()
    assert ex.message_line.level != "error", ex.message
    (written,) = ex._upload_dir.iterdir()
    assert written.is_file() and len(written.name) <= 13 + 64  # the digest, "-", the slug
    assert ex.picker.label == f"uploaded: {name}"
    ex.close()
