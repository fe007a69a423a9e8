import pandas as pd
import pytest

from workbench.analysis import transfers
from workbench.trace import load_trace
from tests.support import tables
from tests.support.synthetic import TraceBuilder, example_trace


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    return load_trace(example_trace().write(tmp_path_factory.mktemp("t") / "t.json"))


@pytest.mark.parametrize(
    "name, expected",
    [
        ("Memcpy HtoD (Pageable -> Device)", ("HtoD", "Pageable")),
        ("Memcpy DtoH (Device -> Pinned)", ("DtoH", "Pinned")),
        ("Memcpy HtoD (Host -> Device)", ("HtoD", "Host")),
        ("Memcpy DtoD (Device -> Device)", ("DtoD", None)),
        ("Memcpy HtoH (Pinned -> Pageable)", ("HtoH", "Pinned")),
        ("Memcpy PtoP (Device -> Device)", ("PtoP", None)),
        ("something else", ("other", None)),
    ],
)
def test_classify_copy(name, expected):
    assert transfers.classify_copy(name) == expected


def test_memcpy_by_direction_always_lists_the_three(events):
    by = tables.memcpy_by_direction(events).set_index("direction")
    assert set(by.index) == {"HtoD", "DtoH", "DtoD"}
    assert (by.loc["HtoD", "count"], by.loc["HtoD", "total_ns"], by.loc["HtoD", "bytes"]) == (
        1,
        12_000,
        1_200_000,
    )
    assert by.loc["HtoD", "gb_per_s"] == pytest.approx(100.0)
    assert by.loc["DtoH", "count"] == 0 and by.loc["DtoH", "bytes"] is pd.NA


def test_host_memory_split_and_amd_host(tmp_path):
    b = example_trace(rocm=True)
    b.memcpy("Memcpy DtoH (Device -> Pinned)", 10, 1_000, None)
    events = load_trace(b.write(tmp_path / "t.json"))
    split = transfers.memcpy_by_host_memory(events).set_index("key")
    assert split.loc["HtoD Host", "bytes"] == 1_200_000
    assert split.loc["DtoH Pinned", "count"] == 1
    assert transfers.memcpy_summary(events) == {"count": 2, "total_ns": 13_000, "bytes": 1_200_000}


def test_bytes_null_when_no_copy_carries_them(tmp_path):
    b = TraceBuilder().memcpy("Memcpy HtoD (Host -> Device)", 0, 500, 1)
    events = load_trace(b.write(tmp_path / "t.json"))
    assert transfers.memcpy_summary(events)["bytes"] is None


def test_memset_and_sync_calls(events):
    assert transfers.memset_summary(events) == {"count": 1, "total_ns": 250, "bytes": 4096}
    sync = transfers.sync_calls(events)
    assert sync.to_dict("records") == [
        {"name": "cudaStreamSynchronize", "count": 1, "total_ns": 24_000, "max_ns": 24_000}
    ]
