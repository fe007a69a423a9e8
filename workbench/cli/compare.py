"""``workbench compare``: is configuration B really faster or slower than A? Interleaved, each in
its own worker process, or two saved runs as "separate runs"; exit 0 whatever the verdict (``gate``
turns a real regression into exit 1).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.budget import END_TO_END
from ..analysis.outputs import agreement_text
from ..analysis.stats import far_tail_text
from ..analysis.tokens import compare_tokens, run_token_blocks
from ..analysis.verdicts import FASTER, METRICS, MIN_EFFECT, SLOWER, separate_comparison
from ..interleave import DEFAULT_COMPARE_REQUESTS, DEFAULT_MAX_TIME_S, DEFAULT_RESOLUTION, compare
from ..config import option_value
from ..errors import ConfigError, RunRecordError
from ..fingerprint import differences, fingerprint_of
from ..noise import noise_line
from ..record import load_run
from ..record.folder import (
    UNITS_FILE,
    META_FILE,
    REQUESTS_FILE,
    STAGES_FILE,
    check_consistent,
    inside,
    open_table,
    read_meta,
    recover,
    table_schemas,
    trace_path,
)
from ..record.tables import TableError, checked_table
from .output import add_number, number, print_result
from .load_args import SEED
from .profile import PROFILE_REQUESTS as REQUESTS
from .profile import WARMUP, add_pipeline_arguments, config_from_args, factory_from_args
from .show import compare_sweeps_command, is_sweep
import pyarrow as pa
import pyarrow.parquet as pq

_PAIRS = {"[": "]", "{": "}", "(": ")"}
RESOLUTION = number("--resolution", 0, 10, "(ratio units)", lo_open=True)
MAX_TIME_S = number("--max-time", 0, 7 * 86_400, "s", lo_open=True)
MIN_EFFECT_RATIO = number("--min-effect", 0, 10, "(ratio units)")
NOISE_FLAG = {True: "NOISY", False: "quiet", None: "unknown"}  # a run's noise.noisy, as printed


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare configurations interleaved (one worker process each), or two saved runs",
        description="Ratios B/A of p50 and p99 per stage with 95 % bootstrap intervals (Holm-corrected) and a "
        "verdict: too noisy to tell, slower, faster, no detectable difference.",
    )
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="two saved run folders (instead of --example/--pipeline)",
    )
    add_pipeline_arguments(p).required = False  # --example/--pipeline: optional with RUN_A RUN_B
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="K=V[,K=V...]",
        help="one configuration (repeat: the first is A); values are JSON; batch_size, precision, "
        "threads, device are built in, other keys go to the factory's options",
    )
    add_number(
        p,
        RESOLUTION,
        DEFAULT_RESOLUTION,
        "rounds go on until every interval (the --metric's, every stage) is narrower than "
        f"this, in ratio units; default {DEFAULT_RESOLUTION} (5 %%)",
    )
    add_number(
        p,
        MAX_TIME_S,
        DEFAULT_MAX_TIME_S,
        f"... or until this many seconds of measuring, default {DEFAULT_MAX_TIME_S:g}",
        metavar="SECONDS",
    )
    add_number(
        p,
        REQUESTS,
        None,
        "a fixed number of measured requests per configuration instead (not adaptive; "
        f"{DEFAULT_COMPARE_REQUESTS} found a 10 %% slower stage 95 %% of the time on a quiet "
        "machine, benchmarks/results/compare.md)",
    )
    add_number(p, WARMUP, 10, "warm-up requests per configuration, default 10")
    add_number(p, SEED, 0, "seed of the round order and the bootstrap, default 0")
    p.add_argument(
        "--metric", choices=tuple(METRICS), default="p50", help="which ratio the verdict follows"
    )
    add_number(
        p,
        MIN_EFFECT_RATIO,
        MIN_EFFECT,
        "smallest relative difference that counts, default 0.02 (2 %%)",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    p.set_defaults(func=run)


def split_config(text: str) -> list[str]:
    """Split ``K=V,K=V`` on commas outside brackets and quotes (``a=[6,3],b="c,d"``: two parts)."""
    parts, current, stack, quote, escaped = [], [], [], None, False
    for ch in text:
        if quote:
            escaped = ch == "\\" and not escaped
            if ch == quote and not escaped:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in _PAIRS:
            stack.append(_PAIRS[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif ch == "," and not stack:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    if quote or stack:
        raise ConfigError(f"--config {text!r}: unbalanced {'quote' if quote else 'bracket'}")
    parts.append("".join(current))
    return parts


def parse_config(text: str) -> dict[str, Any]:
    """One ``--config`` value as a dict; each value JSON when it parses, else text ('x': x)."""
    out: dict[str, Any] = {}
    for part in split_config(text):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--config {text!r}: expected K=V[,K=V...], got {part!r}")
        if key in out:
            raise ConfigError(f"--config {text!r}: key {key!r} given twice")
        value = value.strip()
        quoted = len(value) >= 2 and value[0] == value[-1] == "'"
        out[key] = value[1:-1] if quoted else option_value("--config", key, value)
    return out


def run(args) -> int:
    if len(args.runs) == 2 and all(is_sweep(p) for p in args.runs):  # two load --sweep folders
        return compare_sweeps_command(args.runs, args.json)
    if args.runs:
        if len(args.runs) != 2 or args.example or args.pipeline or args.config:
            raise ConfigError(
                "saved runs: give exactly two run folders (RUN_A RUN_B) and no --example/--pipeline/--config"
            )
        options = {"metric": args.metric, "min_effect": args.min_effect, "seed": args.seed}
        print_result(compare_saved(*args.runs, **options), args.json, print_separate)
        return 0
    if not (args.example or args.pipeline):
        raise ConfigError(
            "give --example NAME or --pipeline SPEC with two or more --config, or two run folders"
        )
    if len(args.config) < 2:
        raise ConfigError(f"give at least two --config (the first is A), got {len(args.config)}")

    configs = [parse_config(text) for text in args.config]
    result = compare(
        factory_from_args(args),
        configs,
        base=config_from_args(args),  # the flags outside --config
        requests=args.requests,
        warmup=args.warmup,
        seed=args.seed,
        metric=args.metric,
        min_effect=args.min_effect,
        resolution=args.resolution,
        max_time_s=args.max_time,
    ).result
    result["configs"] = [c | {"label": text} for c, text in zip(result["configs"], args.config)]
    print_result(result, args.json, print_interleaved)
    all_failed = [c["label"] for c in result["configs"] if c["failed"] == c["requests"]]
    if all_failed:
        print(
            f"workbench compare: every measured request failed for {', '.join(all_failed)}",
            file=sys.stderr,
        )
        return 1
    return 0


def compare_saved(
    path_a: str, path_b: str, *, metric: str = "p50", min_effect: float = MIN_EFFECT, seed: int = 0
) -> dict[str, Any]:
    """Two saved runs of one pipeline compared as separate runs, streamed to bound memory for large
    runs (``benchmarks/bench_scale.py``)."""
    (meta_a, cols_a), (meta_b, cols_b) = saved_columns(path_a), saved_columns(path_b)
    diffs = differences(fingerprint_of(meta_a), fingerprint_of(meta_b))
    if meta_a.pipeline != meta_b.pipeline or list(meta_a.stages) != list(meta_b.stages):
        raise ConfigError(
            f"{path_a} and {path_b} are not comparable: pipeline {meta_a.pipeline!r} "
            f"stages {list(meta_a.stages)} vs {meta_b.pipeline!r} stages {list(meta_b.stages)}"
        )
    names = list(meta_a.stages)
    noise = [m.noise.noisy if m.noise else None for m in (meta_a, meta_b)]
    found = separate_comparison(
        cols_a,
        cols_b,
        names,
        metric=metric,
        min_effect=min_effect,
        noisy=tuple(noise),
        # the part of the machine other processes used during each run (None: unknown)
        shares=tuple(
            n.other_cores / n.cores if n and n.other_cores is not None and n.cores else None
            for n in (meta_a.noise, meta_b.noise)
        ),
        seed=seed,
    )
    tokens = saved_tokens(
        path_a,
        path_b,
        metric=metric,
        min_effect=found["min_effect"],
        noisy=any(flag is True for flag in noise),
        seed=seed,
        widen=found["taken_apart"]["widen"],
    )
    return {
        "configs": [
            {"label": str(p), "run": str(p), "requests": int(len(c[END_TO_END])), "noisy": n}
            for p, c, n in zip((path_a, path_b), (cols_a, cols_b), noise)
        ],
        "metric": metric,
        "differences": [{"field": f, "a": a, "b": b} for f, a, b in diffs],
        **found,
        **({"tokens": tokens} if tokens else {}),
    }


def saved_tokens(path_a: str, path_b: str, **kwargs) -> dict[str, Any] | None:
    """TTFT, TPOT and ITL of two saved streaming runs compared as the stages are (separate runs: the
    same widening and minimum effect, ``kwargs``); None unless both have a units table."""
    if not all((Path(p) / UNITS_FILE).exists() for p in (path_a, path_b)):
        return None
    runs = [load_run(p) for p in (path_a, path_b)]
    blocks = [run_token_blocks(r.requests, r.stages, r.units) for r in runs]
    if any(b is None for b in blocks):
        return None
    return compare_tokens(blocks[0], blocks[1], paired=False, **kwargs)


def saved_columns(path: str) -> tuple[Any, dict[str, np.ndarray]]:
    """``(meta, {stage: ns, ..., "end_to_end": ns})`` of a run's measured successful requests."""
    root = Path(path)
    recover(root)
    if not root.is_dir():
        raise RunRecordError(f"{root}: not a folder (expected a run folder with {META_FILE})")
    meta = read_meta(inside(root, META_FILE))
    schemas = table_schemas(meta)
    req = _read_columns(inside(root, REQUESTS_FILE), *schemas[REQUESTS_FILE], _REQUEST_KEPT)
    st = _read_columns(inside(root, STAGES_FILE), *schemas[STAGES_FILE], _STAGE_KEPT)
    check_consistent(root, meta, req, st)
    trace_path(root, meta)  # a trace run.json names must be in the folder, as for show
    keep = (~req["warmup"] & req["ok"]).to_numpy()
    ids = req["request"].to_numpy()[keep]
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    request, stage = st["request"].to_numpy(), st["stage"].array
    pos = np.minimum(np.searchsorted(sorted_ids, request), max(ids.size - 1, 0))
    valid = (sorted_ids[pos] == request) if ids.size else np.zeros(request.size, dtype=bool)
    dur = st["dur_ns"].to_numpy().astype("float64")
    cols = {}
    for code, name in enumerate(stage.categories):
        if name in meta.stages:
            mine = valid & (stage.codes == code)
            where = order[pos[mine]]
            sums = np.bincount(where, weights=dur[mine], minlength=ids.size)
            seen = np.bincount(where, minlength=ids.size) > 0
            cols[name] = np.where(seen, sums, np.nan)
    cols = {name: cols.get(name, np.full(ids.size, np.nan)) for name in meta.stages}
    cols[END_TO_END] = req["dur_ns"].to_numpy()[keep].astype("float64")

    pa.default_memory_pool().release_unused()  # the reader's freed buffers (else its allocator keeps them)
    return meta, cols


_REQUEST_KEPT = ("request", "warmup", "ok", "dur_ns")
_STAGE_KEPT = ("request", "stage", "dur_ns")


def _read_columns(
    path: Path, columns: dict[str, str], optional: tuple[str, ...], kept: tuple[str, ...]
) -> pd.DataFrame:
    """The ``kept`` columns of a run table, read and checked batch by batch."""
    text = [c for c in kept if columns[c] == "object"]
    try:
        with open_table(path) as stream:
            table = pq.ParquetFile(
                stream, read_dictionary=text, pre_buffer=False, buffer_size=1 << 20
            )
            missing = [
                c for c in columns if c not in table.schema_arrow.names and c not in optional
            ]
            if missing:
                raise TableError(missing[0], "is missing")
            rows = table.metadata.num_rows
            parts: dict[str, list[np.ndarray]] = {c: [] for c in kept}
            names: dict[str, int] = {}
            for batch in table.iter_batches(batch_size=1 << 19, use_threads=False):
                for c in text:
                    parts[c].append(_codes(batch.column(c), c, names))
                plain = batch.drop_columns(text).to_pandas()
                checked = checked_table(plain, columns, optional=(*optional, *text), rows=rows)
                for c in kept:
                    if c not in text:
                        parts[c].append(checked[c].to_numpy(copy=True))  # not a view of the batch
    except (RunRecordError, TableError) as exc:
        raise RunRecordError(
            f"{path}: {exc}" if isinstance(exc, TableError) else str(exc)
        ) from None
    except Exception as exc:  # pyarrow raises several unrelated types for a damaged file
        raise RunRecordError(f"{path}: unreadable Parquet: {str(exc)[:200]}") from None
    pa.default_memory_pool().release_unused()
    out = {}
    for c in kept:  # one column at a time, its batches freed before the next is joined
        batches = parts.pop(c)
        empty = np.empty(0, {"bool": bool, "object": "int32"}.get(columns[c], "int64"))
        joined = np.concatenate(batches) if batches else empty
        out[c] = pd.Categorical.from_codes(joined, list(names)) if c in text else joined
    return pd.DataFrame(out, copy=False)


def _codes(col, name: str, names: dict[str, int]) -> np.ndarray:
    """A dictionary-encoded text column's codes into ``names`` (the names of every batch so far)."""
    if not pa.types.is_dictionary(col.type) or not pa.types.is_string(col.dictionary.type):
        raise TableError(name, f"must hold text with no nulls, found {col.type}")
    if col.null_count:
        raise TableError(name, f"must hold text with no nulls, found {col.null_count} nulls")
    ours = np.array([names.setdefault(n, len(names)) for n in col.dictionary.to_pylist()], "int32")
    return ours[col.indices.to_numpy(zero_copy_only=False)]


def _stage_label(name: str) -> str:
    return "end to end" if name == END_TO_END else name


def _fmt_ci(ci) -> str:
    return "[  n/a  ]" if ci[0] is None or ci[1] is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _fmt(x) -> str:
    return "  n/a" if x is None else f"{x:.3f}"


def print_rows(found: dict[str, Any], metric: str, out, *, noisy: bool = False) -> None:
    """The per-stage table of ratios B/A, then a streaming pipeline's TTFT, TPOT and ITL ratios."""
    print(
        f"  {'stage':<16} {'p50 B/A':>8} {'interval':>17} {'p99 B/A':>8} {'interval':>17}  verdict ({metric})",
        file=out,
    )
    for e in [*found["stages"], found["end_to_end"]]:
        print(_ratio_row(_stage_label(e["name"]), e, noisy), file=out)
    for side in ("a", "b"):
        far = far_tail_text(found["end_to_end"][f"tail_{side}"])
        if far:
            print(f"  {side.upper()} end to end {far}", file=out)
    tokens = found.get("tokens")
    if not tokens:
        return
    (ra, rb), (ga, gb) = tokens["requests"], tokens["gaps"]
    print(
        f"  tokens (A {ra} requests, {ga} gaps; B {rb} requests, {gb} gaps: requests of 2+ tokens)",
        file=out,
    )
    for e in tokens["metrics"]:
        print(_ratio_row(e["name"].upper(), e, noisy), file=out)


def _ratio_row(name: str, e: dict[str, Any], noisy: bool) -> str:
    """One row of :func:`print_rows`: p50 and p99 ratios B/A with their intervals, the verdict."""
    where = " on a noisy machine" if noisy and e["verdict"] in (SLOWER, FASTER) else ""
    return (
        f"  {name:<16} {_fmt(e['p50_ratio']):>8} {_fmt_ci(e['p50_ci']):>17} {_fmt(e['p99_ratio']):>8} "
        f"{_fmt_ci(e['p99_ci']):>17}  {e['verdict']}{where}"
    )


def print_interleaved(result: dict[str, Any], out) -> None:
    cfgs = result["configs"]
    where = {"one": "in one process"}.get(
        result.get("processes"), "one worker process per configuration"
    )
    print(
        f"compare: interleaved, {where}, {result['requests']} requests per configuration in blocks of "
        f"{result['block']}, seed {result['seed']}; ratios B/A, Holm-corrected intervals, "
        f"min effect {100 * result['min_effect']:.1f} %",
        file=out,
    )
    if result.get("processes_note"):
        print(f"  note: {result['processes_note']}", file=out)
    print(noise_line(result.get("noise")), file=out)
    if result.get("stopped"):
        print(stopped_line(result["stopped"]), file=out)
    for i, c in enumerate(cfgs):
        errors = ", ".join(f"{n} {t}" for t, n in (c.get("errors") or {}).items())
        failed = f", {c['failed']} failed: {errors}" if c["failed"] else ""
        print(
            f"  {'A' if i == 0 else 'B' + (str(i) if len(cfgs) > 2 else '')}: {c['label']} "
            f"({c['requests']} requests{failed})",
            file=out,
        )
    noisy = bool((result.get("noise") or {}).get("noisy"))
    for comp in result.get("comparisons") or [{"b": 1, **result}]:
        print(f"\n{cfgs[comp['b']]['label']} against {cfgs[0]['label']}:", file=out)
        if comp.get("end_to_end") is None:
            print(f"  not compared: {comp.get('error')}", file=out)
            continue
        print_rows(comp, result["metric"], out, noisy=noisy)
        outputs = cfgs[comp["b"]].get("outputs")
        if outputs is not None:
            print(f"  outputs against A: {agreement_text(outputs)}", file=out)


def stopped_line(stopped: dict[str, Any]) -> str:
    """Why the rounds ended: the fixed count, the resolution reached, the time limit, or the items."""
    widest = stopped.get("widest") or {}
    size = widest.get("width")
    width = ""
    if size is not None and math.isfinite(size):
        width = f"; widest interval {size:.3f} ({_stage_label(widest['name'])})"
    by = stopped["by"]
    if by == "resolution":
        why = f"every interval narrower than {stopped['resolution']}"
    elif by == "max_time":
        why = (
            f"--max-time {stopped['max_time_s']:g} s reached before every interval was narrower than "
            f"{stopped['resolution']}: rerun quieter or longer for a finer answer"
        )
    else:
        why = {"requests": "the --requests asked", "items": "the item source ran out"}.get(
            by, str(by)
        )
    return f"stopped after {stopped['rounds']} rounds, {stopped['seconds']:.1f} s: {why}{width}"


def print_separate(result: dict[str, Any], out) -> None:
    a, b = result["configs"]
    res = result["resolution"]
    print(f"compare: separate runs (not interleaved): B {b['run']} against A {a['run']}", file=out)
    print(f"  noise: A {NOISE_FLAG[a['noisy']]}, B {NOISE_FLAG[b['noisy']]}", file=out)
    print(
        f"  smallest difference these runs can resolve: {_pct(res['min_difference'])} "
        f"({res['how']}: interval {_pct(res['ci_half_width'])}, drift A {_pct(res['drift_a'])}, "
        f"B {_pct(res['drift_b'])})",
        file=out,
    )
    apart = result.get("taken_apart")
    if apart:
        shares = " and ".join(f"{side} {_pct(x)}" for side, x in zip("AB", apart["shares"]))
        noisy = "; a run flagged noisy: too noisy to tell, rerun both interleaved"
        print(
            f"  taken apart: intervals widened x{apart['widen']:.3f} for what other processes took "
            f"({shares} of the machine){noisy if apart['noisy'] else ''}",
            file=out,
        )
    for d in result["differences"]:
        print(f"  differs: {d['field']}: {d['a']!r} vs {d['b']!r}", file=out)
    noisy = any(flag is True for flag in result["noisy"])
    print_rows(result, result["metric"], out, noisy=noisy)


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"
