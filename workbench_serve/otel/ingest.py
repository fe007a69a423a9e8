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
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from workbench.errors import ConfigError, TraceError
from workbench.record import (
    REQUEST_COLUMNS,
    STAGE_COLUMNS,
    Env,
    Ingest,
    Noise,
    Run,
    IngestedMeta,
    Timing,
    build_tables,
    request_row,
)
from workbench.record.tables import TableError, checked_table
from workbench.timing import StageFailure
from workbench.units import ns_to_s
from .otlp_json import Span, read_otlp_json

_TYPED_MESSAGE = re.compile(
    r"^(?:[\w.-]+: )?([A-Z]\w*(?:Error|Exception|Timeout|Failure)?): (.*)$", re.S
)


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
    if p.exists() and not p.is_file() and not p.is_dir():
        raise ConfigError(f"{p}: not a regular file (a FIFO or device); refused before reading")
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


Key = tuple[str, str]  # (trace id, span id)


@dataclass
class SpanTree:
    """Spans by id, their children, the roots in start order, and what was dropped or clamped (counted).

    Checks: span ids unique within a trace (later duplicates dropped), no span its own parent and no
    parent cycle (spans no root reaches are dropped), end not before start (clamped to the start).
    """

    by_id: dict[Key, Span]
    children: dict[Key, list[Key]]
    roots: list[Key]
    dropped: Counter = field(default_factory=Counter)
    clamped: Counter = field(default_factory=Counter)
    flagged: set[str] = field(default_factory=set)


def span_tree(spans: list[Span]) -> SpanTree:
    """The checked tree of ``spans``; TraceError when no span is a root (every one has a parent)."""
    by_id: dict[Key, Span] = {}
    tree = SpanTree(by_id, defaultdict(list), [])
    for s in spans:
        key = (s.trace, s.span_id)
        if key in by_id:
            tree.dropped["duplicate span id"] += 1
        elif s.parent and s.parent == s.span_id:
            tree.dropped["its own parent"] += 1
            tree.flagged.add(s.name)
        else:
            if s.end_ns < s.start_ns:
                tree.clamped["end before start"] += 1
                tree.flagged.add(s.name)
                s = msgspec.structs.replace(s, end_ns=s.start_ns)
            by_id[key] = s
    for key, s in by_id.items():
        parent = (s.trace, s.parent) if s.parent else None
        (tree.children[parent] if parent in by_id else tree.roots).append(key)
    reached = _reachable(tree.roots, tree.children)
    # the rest hang in parent cycles (A under B under A) below or beside a root
    if len(reached) < len(by_id):
        cycle = [k for k in by_id if k not in reached]
        tree.dropped["in a parent cycle"] += len(cycle)
        tree.flagged.update(by_id[k].name for k in cycle[:5])
    if not tree.roots:
        raise TraceError(
            f"no root span among {len(spans)} spans: every span has a parent in the export "
            "(a parent cycle); a request is a span without a parent"
        )
    tree.roots.sort(key=lambda k: (by_id[k].start_ns, k))
    return tree


def _reachable(roots: list[Key], children: dict[Key, list[Key]]) -> set[Key]:
    seen, stack = set(roots), list(roots)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


def ingest_spans(spans: list[Span], stage_map: dict[str, str] | None = None, sources=()):
    """The run of typed spans (as :func:`read_otlp_json` returns them)."""
    if not spans:
        raise TraceError("the export holds no spans")
    tree = span_tree(spans)
    by_id, roots = tree.by_id, tree.roots
    origin = by_id[roots[0]].start_ns
    req_rows, st_rows, offsets = [], [], defaultdict(list)
    for rid, root_key in enumerate(roots):
        root = by_id[root_key]
        stages = _stage_spans(root_key, by_id, tree.children, stage_map)
        error = ("request", *_error_of(root)) if root.error is not None else None
        for stage, members in stages.items():
            outside = [m for m in members if m.start_ns < root.start_ns or m.end_ns > root.end_ns]
            # a child outside its request's root span: clipped to the root, counted and named
            if outside:
                tree.clamped["outside their request's root span"] += len(outside)
                tree.flagged.update(m.name for m in outside)
            first, covered = _union(members, root.start_ns, root.end_ns)
            offsets[stage].append(first - root.start_ns)
            st_rows.append([rid, stage, 0, first - origin, covered, None])
            failed = next((m for m in members if m.error is not None), None)
            if failed is not None and (error is None or error[0] == "request"):
                error = (stage, *_error_of(failed))
        failure = StageFailure(*error) if error else None
        row = request_row(
            rid, False, root.start_ns - origin, root.end_ns - root.start_ns, failure, 1
        )
        req_rows.append(row | {"request_id": root.trace, "span_name": root.name})
    order = sorted(offsets, key=lambda s: (statistics.median(offsets[s]), s))
    for row in st_rows:
        row[2] = order.index(row[1])
    requests, stage_table = build_tables(
        req_rows, [tuple(r) for r in st_rows], {"request_id": "object", "span_name": "object"}
    )
    for name, table, columns in (
        ("requests", requests, REQUEST_COLUMNS),
        ("stages", stage_table, STAGE_COLUMNS),
    ):
        try:  # the run folder's own range rules: no total of a column may wrap int64
            checked_table(table, columns)
        except TableError as exc:
            raise TraceError(
                f"span times give a {name} {exc}: the export's times are not one service's "
                "nanoseconds"
            ) from None
    return Run(
        meta=_meta(spans, tree, order, stage_map, sources), requests=requests, stages=stage_table
    )


def _stage_spans(
    root_key: Key, by_id: dict[Key, Span], children, stage_map
) -> dict[str, list[Span]]:
    """Stage name -> its spans under this root (see the module docstring)."""
    out: dict[str, list[Span]] = defaultdict(list)
    if not stage_map:
        for key in children.get(root_key, ()):
            out[by_id[key].name].append(by_id[key])
        return out
    stack = list(children.get(root_key, ()))
    while stack:
        key = stack.pop()
        span = by_id[key]
        if span.name in stage_map:
            out[stage_map[span.name]].append(span)
        stack.extend(children.get(key, ()))
    return out


def _union(spans: list[Span], lo: int, hi: int) -> tuple[int, int]:
    """(first start, covered ns) of the spans' intervals clipped to [lo, hi]."""
    intervals = sorted((max(s.start_ns, lo), min(s.end_ns, hi)) for s in spans)
    kept = [(a, b) for a, b in intervals if b > a]
    if not kept:
        return min(intervals[0][0], hi), 0
    covered, reach = 0, kept[0][0]
    for a, b in kept:  # sorted by start: each adds what reaches past the ones before it
        covered += max(0, b - max(a, reach))
        reach = max(reach, b)
    return kept[0][0], covered


def _error_of(span: Span) -> tuple[str, str]:
    """(error type, message) from a span's status message (``Type: message`` when it reads so)."""
    message = span.error or ""
    m = _TYPED_MESSAGE.match(message)
    if m:
        return m.group(1), m.group(2)
    return "SpanError", message or f"span {span.name!r} has status ERROR"


def _meta(spans: list[Span], tree: SpanTree, order, stage_map, sources) -> IngestedMeta:
    by_id, roots = tree.by_id, tree.roots
    services = sorted({by_id[k].service or "?" for k in roots})
    first = by_id[roots[0]].start_ns
    return IngestedMeta(
        pipeline=services[0] if len(services) == 1 else "+".join(services),
        description=f"spans ingested from {', '.join(Path(s).name for s in sources) or 'memory'}",
        stages=list(order),
        env=Env(extra={"source": "otlp-json", "services": services}),
        created=datetime.fromtimestamp(ns_to_s(first), timezone.utc).isoformat(),
        timing=Timing(warmup=0, requests=len(roots), clock="span timestamps (Unix ns)"),
        noise=Noise(
            noisy=None,
            reasons=["spans ingested from another service: its machine was not observed"],
        ),
        ingest=Ingest(
            files=list(sources),
            spans=len(spans),
            requests=len(roots),
            stage_map=dict(stage_map or {}),
            root_names=sorted({by_id[k].name for k in roots}),
            dropped=dict(tree.dropped),
            clamped=dict(tree.clamped),
            flagged=sorted(tree.flagged)[:20],
        ),
    )
