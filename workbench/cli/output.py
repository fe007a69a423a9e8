"""Strict JSON for every ``--json`` output (RFC 8259: a non-finite number is ``null``, the object
around it says why), the paths a command writes, the progress bar and numbers on the command line.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ..config import Range
from ..errors import ConfigError, RunRecordError, WorkbenchError, is_int
from ..naming import slug
from ..trace.numbers import strict


def pipeline_name(args) -> str:
    """The pipeline's name for a folder: ``--example``, or the stem of ``--pipeline``'s file."""
    if args.example is not None:  # '' included: the factory refuses it by name
        return args.example
    return Path(args.pipeline.split(":")[0]).stem


def default_folder(*parts: str) -> Path:
    """``runs/PART-...-YYYYmmdd-HHMMSS`` (local time, slugged parts): where a command writes by default."""
    return Path("runs") / "-".join([*map(slug, parts), datetime.now().strftime("%Y%m%d-%H%M%S")])


def dumps(value: Any, indent: int | None = None) -> str:
    """``json.dumps`` of :func:`strict` ``(value)``; anything else not JSON is shown as text."""
    return json.dumps(strict(value), allow_nan=False, default=str, indent=indent)


def print_result(value: Any, as_json: bool, show) -> None:
    """``value`` as one JSON object with ``--json``, else printed by ``show(value, sys.stdout)``."""
    if as_json:
        print(dumps(value))
    else:
        show(value, sys.stdout)


# -- a one-line progress bar on stderr (``analyze`` of a gigabyte trace): stdout stays clean ----------------

PROGRESS_STAGES = {"read": "reading", "decode": "decoding", "analyze": "analyzing"}


class ProgressBar:
    """``bar(stage, done, total)`` redraws ``decoding  [#######.......]  48%`` on one line."""

    def __init__(
        self, stream=None, width: int = 30, min_interval_s: float = 0.1, clock=time.monotonic
    ):
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.min_interval_s = min_interval_s
        self.clock = clock
        self._last_s: float | None = None
        self._last_stage: str | None = None
        self.drawn = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        recent = self._last_s is not None and now - self._last_s < self.min_interval_s
        if recent and stage == self._last_stage and done < total:  # a new stage or the end: drawn
            return
        self._last_s, self._last_stage = now, stage
        self.stream.write("\r" + self.line(stage, done, total))
        self.stream.flush()
        self.drawn = True

    def line(self, stage: str, done: int, total: int) -> str:
        """The text of one redraw (no carriage return)."""
        share = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
        filled = int(share * self.width)
        return f"{PROGRESS_STAGES.get(stage, stage):<10} [{'#' * filled}{'.' * (self.width - filled)}] {100 * share:3.0f}%"

    def close(self, *, erase: bool = False) -> None:
        """End the bar's line (nothing when it never drew); ``erase``: blank it instead, the cursor at
        its start, so that an error printed next is the line's one text (exit 2's one line)."""
        if self.drawn:
            width = len(self.line("analyze", 0, 1))
            self.stream.write("\r" + " " * width + "\r" if erase else "\n")
            self.stream.flush()


# -- paths: outputs checked before the work, written beside the target and renamed ------------------------------

# less free space than this where an output goes is refused before measuring
MIN_FREE_BYTES = 64 * 2**20
# a name longer than this in --out is refused: saving adds a prefix and suffix to it (255 bytes at most)
MAX_NAME_BYTES = 200


def check_out(path: Path, *, folder: bool) -> None:
    """ConfigError (exit 2) now, before anything is measured, when ``--out`` could not be written."""
    path = Path(path)
    long = [part for part in path.parts if len(os.fsencode(part)) > MAX_NAME_BYTES]
    if long:
        raise ConfigError(
            f"--out: a file or folder name of {len(os.fsencode(long[0]))} bytes "
            f"({long[0][:20]}...); at most {MAX_NAME_BYTES}"
        )
    if folder and path.exists():
        raise ConfigError(f"--out {path} already exists; pick another folder")
    if not folder and path.is_dir():
        raise ConfigError(
            f"--out {path} is a folder; name the file to write (e.g. {path / 'report.html'})"
        )
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(
            f"--out {path}: {parent} is a file, not a folder; pick a path under a folder"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {path}: {parent} is not writable by this user")
    free = shutil.disk_usage(parent).free
    if free < MIN_FREE_BYTES:
        raise ConfigError(
            f"--out {path}: only {free // 2**20} MiB free on {parent}'s file system "
            f"(at least {MIN_FREE_BYTES // 2**20} MiB needed)"
        )


def save_measured(run, out: Path) -> Path:
    """Save a measured run at ``out``; nothing measured is thrown away: Ctrl-C or SIGTERM waits for
    the save, and a save that fails (a full disk, a second writer) goes to a temporary folder that
    the one-line error names."""
    try:
        with signals_held():
            return run.save(out)
    except (OSError, RunRecordError) as exc:
        fallback = Path(tempfile.mkdtemp(prefix=f"workbench-unsaved-{Path(out).name}-")) / "run"
        why = f"{exc.strerror}: {exc.filename}" if getattr(exc, "strerror", None) else str(exc)
        try:
            with signals_held():
                saved = run.save(fallback)
        except (OSError, RunRecordError) as again:
            raise ConfigError(
                f"--out {out}: could not save the run ({why}), nor to {fallback} ({again})"
            ) from exc
        raise ConfigError(
            f"--out {out}: could not save the run ({why}); it was saved to {saved} instead"
        ) from exc


@contextlib.contextmanager
def signals_held():
    """Ctrl-C or SIGTERM during the block is noted, not acted on; once the block is done each is delivered
    again to the handler it finds (KeyboardInterrupt under :func:`workbench.cli.main`, exit 130 or 143)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.signal(s, lambda signum, _frame: noted.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    for signum in dict.fromkeys(noted):
        signal.raise_signal(signum)  # its handler runs now: the folder is written


@contextlib.contextmanager
def stdout_to_stderr(active: bool):
    """With ``--json``, what stages print (also C writes to fd 1) goes to stderr: stdout is the JSON."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


# -- numbers on the command line: refused outside their range before the command starts ---------------


class OptionError(WorkbenchError):
    """A command-line number outside its range (not a ValueError: argparse lets it through, and the
    command line prints it as one line, exit 2, like every bad input)."""


def number(
    option: str, lo: float, hi: float, unit: str, *, integer: bool = False, lo_open: bool = False
):
    """An argparse ``type`` for ``option``: a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    return ranged(option, Range(lo, hi, integer, unit, lo_open))


def ranged(option: str, allowed: Range):
    """An argparse ``type`` for ``option``: a number :class:`~workbench.config.Range` ``allowed`` holds."""

    def parse(text: str):
        try:
            value = float(text)
            if allowed.integer and math.isfinite(value):
                value = int(text)  # "1e3", "1.5" are not integers
        except ValueError:
            value = None
        if not allowed.holds(value):
            got = text if value is not None and allowed.integer == is_int(value) else repr(text)
            raise OptionError(f"{option} must be {allowed.text()}, got {got}")
        return value

    parse.__name__ = allowed.unit or "number"  # argparse names the type in "invalid <type> value"
    parse.option, parse.range_text = option, allowed.text().split(" ", 2)[2]
    return parse


def add_number(parser, kind, default, help_text: str, **kwargs):
    """The option ``kind`` was made for (:func:`number`), its ``--help`` line ending with the range
    and unit (a ``%`` unit escaped for argparse)."""
    help_text = f"{help_text} [{kind.range_text.replace('%', '%%')}]"
    return parser.add_argument(kind.option, type=kind, default=default, help=help_text, **kwargs)


def check_memory(what: str, count: float, bytes_each: int, available: int | None = None) -> None:
    """ConfigError before allocating when ``count`` items of ``bytes_each`` exceed the memory available."""
    need, have = count * bytes_each, available
    if have is None:  # the memory available now: Linux MemAvailable, else physical memory
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        with contextlib.suppress(OSError), open("/proc/meminfo") as fh:
            have = next(
                (int(x.split()[1]) * 1024 for x in fh if x.startswith("MemAvailable:")), have
            )
    if need > have:
        raise ConfigError(
            f"{what}: {count:.3g} would need about {_size(need)} ({bytes_each} B each), "
            f"more than the {_size(have)} available here; ask for fewer"
        )


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
        n /= 1024
