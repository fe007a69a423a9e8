"""Numbers on the command line: each option a finite number in a stated range, with its unit.

An option built with :func:`number` refuses anything outside its range before the command starts,
and its ``--help`` line ends with the range and the unit.
"""

from __future__ import annotations

import contextlib
import math
import os

from ..config import Range
from ..errors import ConfigError, WorkbenchError, is_int


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


def available_bytes() -> int:
    """Memory available to this process now (Linux MemAvailable; else physical memory)."""
    with contextlib.suppress(OSError), open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(what: str, count: float, bytes_each: int, available: int | None = None) -> None:
    """ConfigError before allocating when ``count`` items of ``bytes_each`` exceed the memory available."""
    need = count * bytes_each
    have = available_bytes() if available is None else available
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
