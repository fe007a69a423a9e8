import gzip

import numpy as np
import pandas as pd

from workbench.trace import COLUMNS, KINDS, load_events, load_trace
from tests.support.synthetic import EPOCH_NS, TraceBuilder, example_trace, us_text


def test_columns_and_dtypes(tmp_path):
    events = load_trace(example_trace().write(tmp_path / "t.json")).events
    assert list(events.columns) == list(COLUMNS)
    assert events["ts_ns"].dtype == np.int64 and events["dur_ns"].dtype == np.int64
    for col in ("device", "stream", "correlation", "bytes", "ext_id"):
        assert events[col].dtype == "Int64"
    assert set(events["kind"].cat.categories) == set(KINDS)


def test_epoch_timestamps_exact_to_the_nanosecond(tmp_path):
    t0 = 1_712_345_678_901_234_567
    b = TraceBuilder().op("a", t0, 1).op("b", t0 + 999, 12_345_678)
    events = load_events(b.write(tmp_path / "t.json"))
    assert events["ts_ns"].tolist() == [t0, t0 + 999]
    assert events["dur_ns"].tolist() == [1, 12_345_678]
    assert float(us_text(t0)) * 1000 != t0  # what float64 would have lost


def test_gzip_and_plain_load_the_same(tmp_path):
    b = example_trace()
    a = load_events(b.write(tmp_path / "t.json"))
    z = load_events(b.write(tmp_path / "t.json.gz"))
    pd.testing.assert_frame_equal(a, z)


def test_old_schema_kinds_and_correlation_id(tmp_path):
    trace = load_trace(example_trace(schema="2021").write(tmp_path / "t.json"))
    events = trace.events
    assert trace.meta["schema"] == "2021"
    assert set(events["cat"].astype(str)) == {
        "user_annotation",
        "Operator",
        "Runtime",
        "Kernel",
        "Memcpy",
        "Memset",
    }
    gemm = events[events["name"] == "gemm"].iloc[0]
    assert (gemm["kind"], gemm["correlation"], gemm["device"], gemm["stream"]) == (
        "kernel",
        1,
        0,
        7,
    )


def test_meta_and_device_properties(tmp_path):
    trace = load_trace(example_trace().write(tmp_path / "t.json"))
    assert [d["name"] for d in trace.device_properties] == ["Example GPU", "Example GPU"]
    assert trace.meta["platform"] == "cuda" and trace.meta["complete_event_count"] == len(
        trace.events
    )
    bare = load_trace(TraceBuilder().op("x", 0, 1).write(tmp_path / "b.json"))
    assert bare.device_properties == [] and bare.meta["platform"] == "cpu"


def test_args_vary_in_type_and_gpu_ids_fall_back(tmp_path):
    text = (
        '{"traceEvents": ['
        '{"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream", "pid": 1, "tid": 1, "ts": 1, "dur": 2,'
        ' "args": {"stream": "0x1f", "correlation": 7, "External id": "8"}},'
        '{"ph": "X", "cat": "Kernel", "name": "k", "pid": 3, "tid": "stream 9", "ts": 5.5, "dur": 1.25,'
        ' "args": {"correlation id": 7, "bytes": 12.0, "device": null}},'
        '{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},'
        '{"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 1, "cat": "ac2g", "name": "ac2g"}],'
        ' "displayTimeUnit": "ms"}'
    )
    path = tmp_path / "t.json"
    path.write_text(text)
    trace = load_trace(path)
    e = trace.events
    assert len(e) == 2 and trace.meta["displayTimeUnit"] == "ms"
    assert e["stream"].tolist() == [31, 9] and e["device"].tolist()[1] == 3
    assert e["correlation"].tolist() == [7, 7] and e["bytes"].tolist()[1] == 12
    assert e["ts_ns"].tolist() == [1_000, 5_500] and e["dur_ns"].tolist() == [
        2_000,
        1_250,
    ]  # ms unit ignored
    assert e["tid"].astype(str).tolist() == ["1", "stream 9"] and e["ext_id"].tolist()[0] == 8


def test_bare_event_array_is_accepted(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(
        '[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 3, "dur": 4}]'
    )
    assert load_events(path)["dur_ns"].tolist() == [4_000]


def test_gz_detected_by_magic_not_suffix(tmp_path):
    data = TraceBuilder().op("a", EPOCH_NS, 10).to_json()
    path = tmp_path / "trace.json"
    path.write_bytes(gzip.compress(data))
    assert load_events(path)["ts_ns"].tolist() == [EPOCH_NS]
