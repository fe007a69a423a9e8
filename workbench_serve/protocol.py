"""The served protocol in plain data: headers, the ``Server-Timing`` format, item bytes.

``POST /predict`` carries one item's bytes; the response carries that item's
serialised output. Stage times travel in the standard ``Server-Timing``
header (W3C Server Timing: ``name;dur=MILLISECONDS``, comma separated), one
metric per server-side stage in order plus ``total`` (the server's end to
end). Durations are written with 6 decimals of a millisecond, so integer
nanoseconds survive the round trip exactly. Nothing here does I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any

from workbench.units import NS_PER_MS

REQUEST_ID_HEADER = "X-Request-Id"
BATCH_HEADER = "X-Workbench-Batch"  # server batch number the request rode in
BATCH_SIZE_HEADER = "X-Workbench-Batch-Size"  # items in that batch
# fraction of that batch's items a prediction cache answered
CACHE_HIT_HEADER = "X-Workbench-Cache-Hit"
TIMING_HEADER = "Server-Timing"
TOTAL = "total"
MAX_DUR_MS = 86_400_000.0  # a day: any longer Server-Timing duration is not a measurement
MAX_METRICS = 256
_TOKEN = re.compile(r"[^!#$%&'*+\-.^_`|~0-9A-Za-z]")


def metric_name(stage: str) -> str:
    """A stage name as a Server-Timing token (characters outside RFC 9110 ``tchar`` become ``_``)."""
    return _TOKEN.sub("_", stage) or "_"


def format_server_timing(stage_dur_ns: list[tuple[str, int]], total_ns: int) -> str:
    """``Server-Timing`` value: ``stage;dur=ms, ..., total;dur=ms`` (ms with 6 decimals)."""
    parts = [f"{metric_name(name)};dur={dur / NS_PER_MS:.6f}" for name, dur in stage_dur_ns]
    return ", ".join(parts + [f"{TOTAL};dur={total_ns / NS_PER_MS:.6f}"])


def parse_server_timing(value: str | None) -> tuple[list[tuple[str, int]], int | None]:
    """``([(stage, dur_ns), ...], total_ns)`` from a ``Server-Timing`` value.

    Metrics without ``dur`` are skipped; an absent header gives ``([], None)``.
    A ``dur`` that is not a finite number from 0 to :data:`MAX_DUR_MS` (a
    day), or a header of more than :data:`MAX_METRICS` metrics, raises
    ValueError naming the metric.
    """
    stages: list[tuple[str, int]] = []
    total = None
    metrics = (value or "").split(",")
    if len(metrics) > MAX_METRICS:
        raise ValueError(f"Server-Timing has {len(metrics)} metrics (the limit is {MAX_METRICS})")
    for metric in metrics:
        name, *params = [p.strip() for p in metric.split(";")]
        if not name:
            continue
        pairs = (p.partition("=") for p in reversed(params))  # reversed: the first dur= counts
        dur = {k.strip().lower(): v.strip().strip('"') for k, _, v in pairs}.get("dur")
        if dur is None:
            continue
        try:
            dur_ms = float(dur[:40])
        except ValueError:
            raise ValueError(
                f"Server-Timing metric {name[:40]!r}: dur={dur[:40]!r} is not a number"
            ) from None
        if not 0 <= dur_ms <= MAX_DUR_MS:  # also false for nan
            raise ValueError(
                f"Server-Timing metric {name[:40]!r}: dur={dur[:40]!r} is not a duration from 0 to "
                f"{MAX_DUR_MS:.0f} ms"
            )
        dur_ns = int(round(dur_ms * NS_PER_MS))
        if name == TOTAL:
            total = dur_ns
        else:
            stages.append((name, dur_ns))
    return stages, total


def item_bytes(item: Any, default=None) -> bytes:
    """An item of a pipeline's source as the request body: bytes as they are, str as UTF-8, else JSON
    (``default``: ``json.dumps``'s, for what JSON cannot hold)."""
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item)
    if isinstance(item, str):
        return item.encode()
    return json.dumps(item, default=default).encode()


def output_bytes(output: Any, index: int, n_items: int) -> bytes:
    """Item ``index``'s response body from a batch's last-stage output.

    A list or tuple of ``n_items`` outputs gives one per item (the examples'
    ``serialize`` returns one JSON ``bytes`` per item); any other output is the
    whole batch's and is sent to every item. bytes go as they are, str as UTF-8,
    anything else as JSON (``str`` for what JSON cannot hold).
    """
    if isinstance(output, (list, tuple)) and len(output) == n_items:
        output = output[index]
    return item_bytes(output, default=str)
