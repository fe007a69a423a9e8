"""Broken input gives TraceError naming the file and the problem, never another exception."""

import gzip
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.errors import TraceError
from workbench.trace import load_trace
from tests.support.synthetic import example_trace

GOOD = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}


def write(tmp_path, data, name="t.json"):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def events_json(*events):
    return json.dumps({"traceEvents": list(events)})


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty file"),
        ("   \n", "empty file"),
        ('{"traceEvents": [', "invalid JSON"),
        ("{not json}", "invalid JSON"),
        ("42", "top level must be an object"),
        ('{"foo": []}', "no 'traceEvents'"),
        ('{"traceEvents": {}}', "not a PyTorch profiler trace"),
        ('{"traceEvents": [1, 2]}', "not a PyTorch profiler trace"),
        ('{"traceEvents": []}', "no events"),
        (events_json({"ph": "M", "name": "process_name"}), "no complete"),
        (events_json({k: v for k, v in GOOD.items() if k != "dur"}), "has no 'dur'"),
        (events_json({k: v for k, v in GOOD.items() if k != "ts"}), "has no 'ts'"),
        (events_json({k: v for k, v in GOOD.items() if k != "name"}), "has no 'name'"),
        (events_json({k: v for k, v in GOOD.items() if k != "tid"}), "has no 'tid'"),
        (events_json(GOOD | {"ts": "12"}), "not a number"),
        (events_json(GOOD | {"dur": None}), "not a number"),
        (events_json(GOOD | {"dur": -1}), "negative duration"),
        (events_json(GOOD | {"name": 5}), "not a PyTorch profiler trace"),
        (events_json(GOOD | {"args": [1]}), "args"),
        (events_json(GOOD | {"args": {"correlation": [1]}}), "correlation"),
        (events_json(GOOD | {"ts": 1e30}), "not a number"),
    ],
)
def test_broken_trace_raises_trace_error(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(path) in str(info.value) and problem in str(info.value)


def test_truncated_gzip(tmp_path):
    data = gzip.compress(example_trace().to_json())
    path = write(tmp_path, data[: len(data) // 2], "t.json.gz")
    with pytest.raises(
        TraceError, match=f"truncated gzip data: the file ends after {len(data) // 2} bytes"
    ):
        load_trace(path)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(TraceError, match="no such trace file"):
        load_trace(tmp_path / "nope.json")
    with pytest.raises(TraceError, match="is a folder"):
        load_trace(tmp_path)


def _load_or_trace_error(path):
    try:
        load_trace(path)
    except TraceError as exc:
        assert str(path) in str(exc)


FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FAST
@given(data=st.binary(max_size=300))
def test_random_bytes(tmp_path, data):
    _load_or_trace_error(write(tmp_path, data))


@FAST
@given(cut=st.integers(min_value=0, max_value=2_000))
def test_truncated_json(tmp_path, cut):
    text = example_trace().to_json()
    _load_or_trace_error(write(tmp_path, text[: cut * len(text) // 2_000]))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
event = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "X", "M", "s", "f", "i", 3]),
        "cat": st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "gpu_memcpy", 5]),
        "name": st.one_of(st.text(max_size=10), st.integers()),
        "pid": values,
        "tid": values,
        "ts": st.one_of(st.integers(-10, 2**62), st.floats(allow_nan=False), st.text(max_size=3)),
        "dur": st.one_of(st.integers(-5, 10**9), st.floats(allow_nan=False, allow_infinity=False)),
        "args": st.one_of(
            values,
            st.dictionaries(
                st.sampled_from(["correlation", "device", "stream", "bytes", "External id"]),
                values,
                max_size=4,
            ),
        ),
    },
)


@FAST
@given(
    events=st.lists(event, max_size=6),
    extra=st.dictionaries(
        st.sampled_from(["deviceProperties", "displayTimeUnit"]), values, max_size=2
    ),
)
def test_random_traces(tmp_path, events, extra):
    path = write(tmp_path, json.dumps({"traceEvents": events, **extra}))
    _load_or_trace_error(path)
