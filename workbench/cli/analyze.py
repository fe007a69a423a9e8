"""``python -m workbench analyze TRACE [--json]``: where GPU time and launch overhead go.

TRACE is a profiler trace (``.json``/``.json.gz``) or a run folder whose
``run.json`` names its trace (``run.meta.trace.file``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import threading
from pathlib import Path

from ..errors import RunRecordError
from .output import OptionError, ProgressBar, dumps
from ..trace.decode import read_raw
from ..trace.read import DEFAULT_MAX_TRACE_BYTES


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="summarize a PyTorch profiler trace: kernels, launches, transfers, GPU idle, steps",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("trace", help="trace file (.json or .json.gz) or a run folder with a trace")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the summary"
    )
    parser.add_argument(
        "--max-trace-bytes",
        type=_byte_count,
        default=DEFAULT_MAX_TRACE_BYTES,
        metavar="N",
        help="refuse a trace whose JSON text (after decompression) is larger than N bytes "
        "(default 4 GiB; suffixes K, M, G for KiB, MiB, GiB)",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )
    parser.set_defaults(func=run)


def _byte_count(text: str) -> int:
    """``--max-trace-bytes``: a positive byte count (K/M/G: binary suffixes), else OptionError."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    suffix = text[-1:].upper()
    number, scale = (text[:-1], units[suffix]) if suffix in units else (text, 1)
    try:
        value = int(number) * scale
    except ValueError:
        value = 0
    if value <= 0:
        raise OptionError(
            f"--max-trace-bytes must be a positive byte count (say 4294967296 or 4G), got {text!r}"
        )
    return value


# Imported on a thread while the main thread reads and gunzips the trace (zlib releases the GIL while
# it inflates). The analysis reads numpy columns: neither pandas nor pyarrow is imported.
HEAVY_MODULES = ("workbench.analysis.trace_report", "workbench.trace.load")


def run(args: argparse.Namespace) -> int:
    show = sys.stderr.isatty() if args.progress is None else args.progress
    bar = ProgressBar() if show else None
    try:
        path = Path(args.trace)
        if path.is_dir():  # a run folder: the trace its run.json names
            from ..record import load_run  # pandas and pyarrow (0.4-0.6 s): only for a run folder

            trace = load_run(path).trace_path
            if trace is None:
                raise RunRecordError(
                    f"{path}: this run has no trace (record one with a traced profile run)"
                )
            path = trace
        imports = BackgroundImport(HEAVY_MODULES)
        if bar is not None:
            bar("read", 0, 1)
        decoded = read_raw(path, args.max_trace_bytes)
        imports.wait()
        from ..analysis.trace_report import analyze  # imported on a thread while the trace was read
        from ..trace import load_trace  # (HEAVY_MODULES): here only named

        trace = load_trace(path, max_bytes=args.max_trace_bytes, progress=bar, decoded=decoded)
        del decoded
        report = analyze(trace, progress=bar)
    except BaseException:
        if bar is not None:
            bar.close(erase=True)
        raise
    if bar is not None:
        bar.close()
    if args.json:
        print(dumps(report, indent=2))
    else:
        print(summary_text(report))
    return 0


class BackgroundImport:
    """Import modules on a daemon thread; :meth:`wait` joins it and re-raises what the import raised."""

    def __init__(self, modules: tuple[str, ...]):
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._load, args=(modules,), name="workbench-imports", daemon=True
        )
        self._thread.start()

    def _load(self, modules: tuple[str, ...]) -> None:
        try:
            for name in modules:
                importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread by wait()
            self._error = exc

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def _us(value) -> str:
    if value is None:
        return "n/a"
    return f"{value / 1000:.3f} ms" if value >= 1000 else f"{value:.1f} us"


def summary_text(report: dict) -> str:
    """The readable summary of an :func:`~workbench.analysis.trace_report.analyze` report."""
    t, k, g = report["trace"], report["kernels"], report["gpu"]
    lp, la = report["launch_pairs"], report["launches"]
    cold = la["cold_start"]
    set_apart = f"  cold start {cold['calls']} calls ({_us(cold['dur_us'])}, set apart)"
    lines = [
        f"trace   {t['path']}  ({t['events']} events, {t['schema']} schema, {t['platform']})",
        f"kernels {k['count']}  total {_us(k['total_us'])}  busy {_us(k['busy_us'])}  "
        f"under 10 us: {k['under_10us']}",
        f"launches {la['count']} calls ({_us(la['total_us'])} CPU)  graph launches {la['graph_count']}"
        + (set_apart if cold["calls"] else ""),
        f"         {report['launch_verdict']['sentence']}",
        f"         HTA launch pairs {lp['count']}: GPU work shorter than its launch call "
        f"{lp['gpu_shorter_than_cpu']}, CPU > 50 us {lp['cpu_over_50us']}, delay > 100 us {lp['delay_over_100us']}",
    ]
    memcpy = report["memcpy"]
    for kind, row in (memcpy["by_kind"] | memcpy["by_kind_and_host_memory"]).items():
        if row["count"]:
            rate = "" if row["gb_per_s"] is None else f"  {row['gb_per_s']:.2f} GB/s"
            lines.append(
                f"memcpy  {kind:<16} {row['count']:>6}  {_us(row['total_us'])}  bytes {row['bytes']}{rate}"
            )
    lines.append(f"memset  {report['memset']['count']}  {_us(report['memset']['total_us'])}")
    for sync in report["sync_calls"]:
        lines.append(f"sync    {sync['name']:<24} {sync['count']:>6}  {_us(sync['total_us'])}")
    if g["span_us"] is None:
        lines.append("gpu     no GPU activity in this trace")
    else:
        lines.append(
            f"gpu     span {_us(g['span_us'])}  busy {_us(g['busy_us'])}  idle {_us(g['idle_us'])} "
            f"({100 * g['idle_fraction']:.1f} % idle)"
        )
    for step in report["steps"]:
        lines.append(
            f"step    {step['name']:<18} {_us(step['dur_us'])}  kernels {step['kernel_count']} "
            f"({_us(step['kernel_us'])})"
        )
    for stage in report["stages"]:
        flags = [f for f in ("launch_bound", "transfer_bound", "sync_heavy") if stage[f]]
        lines.append(
            f"stage   {stage['stage']:<18} host {_us(stage['host_us'])}  gpu {_us(stage['gpu_us'])}  "
            f"launches {stage['launch_count']}  {' '.join(flags)}"
        )
    if report.get("top_ops"):
        lines.append(
            f"{'top ops':<8}{'self':>11}{'total':>11}{'calls':>7}  {'share':>6}  name [input shapes]"
        )
    for op in report.get("top_ops") or []:
        shapes = f"  {op['input_shapes']}" if op.get("input_shapes") else ""
        lines.append(
            f"{'':<8}{_us(op['self_us']):>11}{_us(op['total_us']):>11}{op['calls']:>7}  "
            f"{op['self_share']:>6.1%}  {op['name']}{shapes}"
        )
    return "\n".join(lines)
