"""The crash signatures of issue 11 (each failed before the fix) and odd-but-valid traces giving right numbers."""

from __future__ import annotations

import codecs
import json

import pytest

from workbench.analysis import gpu_timeline
from workbench.analysis.trace_report import analyze
from workbench.errors import TraceError
from workbench.trace import load_trace
from tests.support import tables
from tests.support.synthetic import EPOCH_NS, TraceBuilder, example_trace

OP = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
KERNEL = {
    "ph": "X",
    "cat": "kernel",
    "name": "k",
    "pid": 0,
    "tid": 7,
    "ts": 5,
    "dur": 0,
    "args": {"device": 0, "stream": 7, "correlation": 1},
}


def write(tmp_path, data: bytes, name="t.json"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def trace_json(*events, **top) -> bytes:
    return json.dumps({"traceEvents": list(events), **top}).encode()


def error_of(path) -> str:
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(path) in str(info.value)
    return str(info.value).removeprefix(f"{path}: ")


def test_deep_nesting_at_top_level_names_depth_and_byte(tmp_path):
    head = b'{"traceEvents": [' + json.dumps(OP).encode() + b'], "x": '
    path = write(tmp_path, head + b"[" * 3000 + b"]" * 3000 + b"}")
    assert error_of(path) == (
        f"JSON nested 3,001 levels deep at byte {len(head) + 2999:,} (in 'x'), too deep "
        "to decode; a profiler trace is never nested like this"
    )


def test_deep_nesting_in_metadata_is_a_trace_error(tmp_path):
    path = write(
        tmp_path, trace_json(OP)[:-1] + b', "traceName": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    )
    assert "too deep to decode" in error_of(path)


def test_invalid_utf8_in_an_event_names_the_event_and_field(tmp_path):
    data = trace_json(OP, OP | {"name": "ZZ"}).replace(b"ZZ", b"\xff\xfe")
    assert error_of(write(tmp_path, data)) == (
        "traceEvents[1]: invalid UTF-8 at byte 38 of the event (in 'name'): "
        "byte 0xff, invalid start byte; re-export the trace as UTF-8"
    )


def test_invalid_utf8_in_metadata_names_the_key(tmp_path):
    data = trace_json(OP, traceName="ZZ").replace(b"ZZ", b"a\xc3")
    assert error_of(write(tmp_path, data)) == (
        "unreadable 'traceName': invalid UTF-8 at byte 2: byte 0xc3, "
        "invalid continuation byte; re-export the trace as UTF-8"
    )


@pytest.mark.parametrize(
    "encode",
    [
        lambda t: codecs.BOM_UTF8 + t.encode("utf-8"),
        lambda t: t.encode("utf-16"),  # with a BOM
        lambda t: codecs.BOM_UTF16_BE + t.encode("utf-16-be"),
        lambda t: t.encode("utf-16-le"),  # no BOM: recognized by its zero bytes
        lambda t: t.encode("utf-32"),
    ],
)
def test_bom_and_utf16_traces_load_like_utf8(tmp_path, encode):
    text = (
        example_trace().to_json().decode().replace('"aten::linear"', '"aten::lin\\u00e9ar \u00e9"')
    )
    expected = load_trace(write(tmp_path, text.encode(), "utf8.json")).events
    got = load_trace(write(tmp_path, encode(text))).events
    assert got.equals(expected)
    assert "aten::lin\u00e9ar \u00e9" in set(got["name"])


def test_invalid_utf16_is_a_trace_error(tmp_path):
    data = (
        codecs.BOM_UTF16_LE + trace_json(OP).decode().encode("utf-16-le") + b"\x00\xd8"
    )  # a lone surrogate
    assert error_of(write(tmp_path, data)).startswith("invalid UTF-16 text at byte")


def test_twenty_digit_profiler_step(tmp_path):
    number = 12345678901234567890  # past int64
    b = (
        TraceBuilder()
        .annotation(f"ProfilerStep#{number}", 1_000, 5_000)
        .op("aten::mm", 2_000, 1_000)
    )
    path = b.write(tmp_path / "t.json")
    assert tables.profiler_steps(load_trace(path))["step"].tolist() == [number]
    report = analyze(path)
    assert [s["name"] for s in report["steps"]] == [f"ProfilerStep#{number}"]
    assert (
        report["step_breakdown"][0]["step"] == number
        and report["step_breakdown"][0]["total_us"] == 5.0
    )


def zero_duration_gpu(tmp_path, kernel_ts=(5, 5)):
    events = [OP] + [KERNEL | {"ts": ts} for ts in kernel_ts]
    return load_trace(write(tmp_path, trace_json(*events)))


def test_all_gpu_events_zero_duration_at_one_instant(tmp_path):
    events = zero_duration_gpu(tmp_path)
    assert gpu_timeline.gpu_time_summary(events) == {
        "start_ns": 5_000,
        "end_ns": 5_000,
        "span_ns": 0,
        "busy_ns": 0,
        "idle_ns": 0,
        "idle_fraction": 0.0,
    }
    busy = gpu_timeline.busy_over_time(events, bins=10)
    assert busy.to_dict("list") == {
        "bin_start_ns": [5_000],
        "bin_end_ns": [5_000],
        "busy_ns": [0],
        "busy_fraction": [0.0],
    }


def test_zero_duration_gpu_events_draw_in_the_dashboard(tmp_path):
    pytest.importorskip("plotly")
    from workbench.plots.timeline import gpu_timeline_figure, step_breakdown_figure

    for kernel_ts in [(5, 5), (5, 9)]:
        events = zero_duration_gpu(tmp_path, kernel_ts)
        fig = gpu_timeline_figure(events)
        assert list(fig.data[0].y) == [0.0] * len(fig.data[0].y)
        assert fig.layout.title.text.startswith("GPU busy 0")
        step_breakdown_figure(events).to_dict()


def test_epoch_sized_span_of_decades_bins_without_overflow(tmp_path):
    century_ns = 50 * 365 * 86_400 * 10**9  # half a century: EPOCH_NS + this stays under 2**62
    b = TraceBuilder().op("a", EPOCH_NS, 1_000)
    b.kernel("k1", EPOCH_NS, 1_000, None).kernel("k2", EPOCH_NS + century_ns, 1_000, None)
    busy = gpu_timeline.busy_over_time(load_trace(b.write(tmp_path / "t.json")), bins=200)
    assert (
        busy["bin_start_ns"].iloc[0] == EPOCH_NS
        and busy["bin_end_ns"].iloc[-1] == EPOCH_NS + century_ns + 1_000
    )
    assert busy["busy_ns"].tolist() == [1_000] + [0] * 198 + [1_000]
    assert busy["bin_start_ns"].iloc[1] == EPOCH_NS + (century_ns + 1_000) // 200


@pytest.mark.parametrize(
    "ts, dur, problem",
    [
        (
            "9223372036854775",
            "5",
            "traceEvents[1] ('k'): 'ts' 9223372036854775000 ns + 'dur' 5000 ns is beyond",
        ),
        (
            "4611686018427387.904",
            "0",
            "traceEvents[1] ('k'): 'ts' 4611686018427387904 ns + 'dur' 0 ns is beyond",
        ),
        (
            "-4611686018427388",
            "0",
            "traceEvents[1] ('k'): 'ts' -4611686018427388000 ns + 'dur' 0 ns is beyond",
        ),
        (
            "1",
            "4611686018427388",
            "traceEvents[1] ('k'): 'ts' 1000 ns + 'dur' 4611686018427388000 ns is beyond",
        ),
        (
            "9223372036854775.808",
            "0",
            "traceEvents[1] ('k'): 'ts' is 9223372036854775.808, not a number",
        ),
        ("1e400", "0", "traceEvents[1] ('k'): 'ts' is 1e400, not a number"),
    ],
)
def test_times_past_the_int64_ns_range_are_trace_errors(tmp_path, ts, dur, problem):
    data = trace_json(OP, KERNEL | {"ts": "TS", "dur": "DUR"}).replace(b'"TS"', ts.encode())
    message = error_of(write(tmp_path, data.replace(b'"DUR"', dur.encode())))
    assert message.startswith(problem), message


def test_durations_summing_past_the_range_are_a_trace_error(tmp_path):
    huge = OP | {"ts": 0, "dur": 2**61 // 1000}
    assert "add up to over 2**62 ns" in error_of(write(tmp_path, trace_json(huge, huge, huge)))


def test_largest_allowed_times_give_exact_spans(tmp_path):
    last_us = (2**62 - 1) // 1000 - 1
    events = load_trace(
        write(tmp_path, trace_json(KERNEL | {"ts": -last_us}, KERNEL | {"ts": last_us, "dur": 1}))
    )
    summary = gpu_timeline.gpu_time_summary(events)
    assert summary["span_ns"] == 2 * last_us * 1000 + 1000 and summary["busy_ns"] == 1000


@pytest.mark.parametrize(
    "token, field", [(b"NaN", "ts"), (b"Infinity", "dur"), (b"-Infinity", "ts"), (b"-NaN", "dur")]
)
def test_nan_and_infinity_name_the_byte_and_field(tmp_path, token, field):
    data = b'{"traceEvents": [{"ph": "X", "name": "a", "ts": ' + (token if field == "ts" else b"1")
    data += b', "dur": ' + (token if field == "dur" else b"1") + b', "pid": 1, "tid": 1}]}'
    assert error_of(write(tmp_path, data)).startswith(
        f"invalid JSON at byte {data.index(token)} (in {field!r}): {token.decode()} is not a JSON number"
    )


def test_truncated_json_says_truncated(tmp_path):
    assert error_of(write(tmp_path, trace_json(OP)[:30])).startswith(
        "invalid JSON: the text ends (at byte 30) in the middle of a value; the file is truncated"
    )


def test_duplicated_keys_take_the_last_value(tmp_path):
    data = b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "dur": 7}]}'
    assert load_trace(write(tmp_path, data)).events["dur_ns"].tolist() == [7_000]


def test_dangling_flows_and_unicode_names_load(tmp_path):
    flows = [
        {"ph": "s", "id": 9, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": 1},
        {
            "ph": "f",
            "id": 10,
            "bp": "e",
            "cat": "ac2g",
            "name": "ac2g",
            "pid": 0,
            "tid": 7,
            "ts": 5,
        },
    ]
    path = write(
        tmp_path, trace_json(OP | {"name": "\u00e9\u4e2d\U0001f600"}, *flows, KERNEL | {"dur": 3})
    )
    report = analyze(path)
    assert report["trace"]["events"] == 2
    assert report["gpu"]["span_us"] == 3.0 and report["gpu"]["idle_fraction"] == 0.0
