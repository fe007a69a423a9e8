"""OTLP/JSON span exports from any service -> a run (kind ``ingested``).

A request is a root span (no parent, or a parent outside the export); its
end to end is the root's duration. A stage is the union of the request's
spans mapped to it: with ``stage_map`` (span name -> stage), every
descendant whose name is mapped, at any depth; without one, each direct
child of the root is a stage of its own name. Overlapping spans of one stage
count once (interval union), clipped to the root; time no stage covers is
``unattributed``, as in every budget. A root or mapped span with status
ERROR makes the request failed, charged to that span's stage (``request``
for the root itself).

Times are the spans' Unix ns, from the earliest root's start.
"""
from __future__ import annotations

import re
import statistics
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import ConfigError, TraceError
from ..record import Env, Ingest, Noise, Run, RunMeta, Timing, build_tables
from ..units import ns_to_s
from .otlp_json import read_otlp_json

STATUS_ERROR = 2
_TYPED_MESSAGE = re.compile(r"^(?:[\w.-]+: )?([A-Z]\w*(?:Error|Exception|Timeout|Failure)?): (.*)$", re.S)


def parse_stage_map(pairs: list[str]) -> dict[str, str]:
    """``["span=stage", ...]`` -> ``{span: stage}``; a pair without ``=`` is a ConfigError."""
    out = {}
    for pair in pairs or []:
        span, sep, stage = pair.partition("=")
        if not sep or not span or not stage:
            raise ConfigError(f"--stage-map {pair!r}: expected SPAN_NAME=STAGE")
        out[span] = stage
    return out


def span_files(path: str | Path) -> list[Path]:
    """The file, or the ``*.json`` / ``*.jsonl`` files of a folder (sorted)."""
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix in (".json", ".jsonl") and f.is_file())
        if not files:
            raise ConfigError(f"{p}: no .json or .jsonl span files in this folder")
        return files
    raise ConfigError(f"{p}: no such file or folder (expected OTLP/JSON span exports)")


def ingest_otel(path: str | Path, stage_map: dict[str, str] | None = None):
    """The run of the spans in ``path`` (a file or a folder of them)."""
    files = span_files(path)
    spans = [s for f in files for s in read_otlp_json(f)]
    return ingest_spans(spans, stage_map, sources=[str(f) for f in files])


def ingest_spans(spans: list[dict[str, Any]], stage_map: dict[str, str] | None = None, sources=()):
    """The run of OTLP/JSON span dicts (as :func:`read_otlp_json` yields them)."""
    if not spans:
        raise TraceError("the export holds no spans")
    by_id = {(s.get("traceId"), s.get("spanId")): _span(s) for s in spans}
    children = defaultdict(list)
    roots = []
    for key, s in by_id.items():
        parent = (key[0], s["parent"]) if s["parent"] else None
        if parent in by_id:
            children[parent].append(key)
        else:
            roots.append(key)
    roots.sort(key=lambda k: (by_id[k]["start"], k))
    origin = by_id[roots[0]]["start"]
    req_rows, st_rows, offsets = [], [], defaultdict(list)
    for rid, root_key in enumerate(roots):
        root = by_id[root_key]
        stages = _stage_spans(root_key, by_id, children, stage_map)
        error = ("request", *_error_of(root)) if root["error"] is not None else None
        for stage, members in stages.items():
            first, covered = _union(members, root["start"], root["end"])
            offsets[stage].append(first - root["start"])
            st_rows.append([rid, stage, 0, first - origin, covered, None])
            failed = next((m for m in members if m["error"] is not None), None)
            if failed is not None and (error is None or error[0] == "request"):
                error = (stage, *_error_of(failed))
        stage, kind, message = error or (None, None, None)
        req_rows.append({"request": rid, "warmup": False, "start_ns": root["start"] - origin,
                         "dur_ns": root["end"] - root["start"], "ok": error is None, "error_stage": stage,
                         "error_type": kind, "error_message": message, "batch_size": 1,
                         "request_id": root["trace"], "span_name": root["name"]})
    order = sorted(offsets, key=lambda s: (statistics.median(offsets[s]), s))
    for row in st_rows:
        row[2] = order.index(row[1])
    requests, stage_table = build_tables(req_rows, [tuple(r) for r in st_rows],
                                         {"request_id": "object", "span_name": "object"})
    return Run(meta=_meta(spans, roots, by_id, order, stage_map, sources), requests=requests, stages=stage_table)


def _span(s: dict[str, Any]) -> dict[str, Any]:
    try:
        start, end = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
    except (KeyError, TypeError, ValueError):
        raise TraceError(f"span {s.get('name')!r}: startTimeUnixNano/endTimeUnixNano missing or not integers") from None
    status = s.get("status") or {}
    code = status.get("code", 0)
    error = status.get("message", "") if code in (STATUS_ERROR, "STATUS_CODE_ERROR") else None
    return {"name": s.get("name", ""), "start": start, "end": max(end, start), "parent": s.get("parentSpanId") or "",
            "trace": s.get("traceId"), "error": error, "service": (s.get("resource") or {}).get("service.name")}


def _stage_spans(root_key, by_id, children, stage_map) -> dict[str, list[dict]]:
    """Stage name -> its spans under this root (see the module docstring)."""
    out: dict[str, list[dict]] = defaultdict(list)
    if not stage_map:
        for key in children[root_key]:
            out[by_id[key]["name"]].append(by_id[key])
        return out
    stack = list(children[root_key])
    while stack:
        key = stack.pop()
        span = by_id[key]
        if span["name"] in stage_map:
            out[stage_map[span["name"]]].append(span)
        stack.extend(children[key])
    return out


def _union(spans: list[dict], lo: int, hi: int) -> tuple[int, int]:
    """(first start, covered ns) of the spans' intervals clipped to [lo, hi]."""
    intervals = sorted((max(s["start"], lo), min(s["end"], hi)) for s in spans)
    intervals = [(a, b) for a, b in intervals if b > a] or [(max(intervals[0][0], lo), max(intervals[0][0], lo))]
    covered, cur_a, cur_b = 0, *intervals[0]
    for a, b in intervals[1:]:
        if a > cur_b:
            covered += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    return intervals[0][0], covered + cur_b - cur_a


def _error_of(span: dict) -> tuple[str, str]:
    """(error type, message) from a span's status message (``Type: message`` when it reads so)."""
    message = span["error"] or ""
    m = _TYPED_MESSAGE.match(message)
    if m:
        return m.group(1), m.group(2)
    return "SpanError", message or f"span {span['name']!r} has status ERROR"


def _meta(spans, roots, by_id, order, stage_map, sources) -> RunMeta:
    services = sorted({by_id[k]["service"] or "?" for k in roots})
    first = by_id[roots[0]]["start"]
    return RunMeta(
        kind="ingested", pipeline=services[0] if len(services) == 1 else "+".join(services),
        description=f"spans ingested from {', '.join(Path(s).name for s in sources) or 'memory'}",
        stages=list(order), env=Env(extra={"source": "otlp-json", "services": services}),
        created=datetime.fromtimestamp(ns_to_s(first), timezone.utc).isoformat(),
        timing=Timing(warmup=0, requests=len(roots), clock="span timestamps (Unix ns)"),
        trace=None,
        noise=Noise(noisy=None, reasons=["spans ingested from another service: its machine was not observed"]),
        ingest=Ingest(files=list(sources), spans=len(spans), requests=len(roots), stage_map=dict(stage_map or {}),
                      root_names=sorted({by_id[k]["name"] for k in roots})),
    )
