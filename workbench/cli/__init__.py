"""``python -m workbench``: each subcommand's module has ``register(subparsers)``, which adds its
parser with ``func``, a callable ``(args) -> int``; the exit codes are the README's "Exit codes".
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import functools
import importlib
import os
import select
import signal
import sys
import threading
import traceback

from ..errors import (
    EXIT_TERMINATED,
    WorkbenchError,
    encodable,
    sigterm_as_interrupt,
    terminated,
)
from ..wings import WingMissing, install_hint, wing_commands

# the core's commands; the wings add theirs through entry points (workbench.wings.wing_commands)
SUBCOMMAND_MODULES = (
    "profile",
    "show",
    "analyze",
    "batching",
    "audit",
    "compare",
    "gate",
)

EXIT_BAD_INPUT = 2
EXIT_INTERNAL_ERROR = 3
EXIT_INCONCLUSIVE = 4  # gate: too noisy to tell against a threshold
EXIT_INTERRUPTED = 130
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for `yes | head -1`

# A path the user named that cannot be opened is bad input, not a bug.
_USER_FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)
# a path the user named that the OS cannot follow: too long a name or path, a link loop
_USER_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ELOOP}


def module_of(command: str) -> str | None:
    """The module registering ``command`` (``load`` and ``simulate`` live in ``batching``); None if unknown."""
    if command in ("load", "simulate"):
        return "batching"
    name = command.replace("-", "_")
    return name if name in SUBCOMMAND_MODULES else None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv`` naming a command first, only that command's module is imported
    (``analyze`` then starts without the profiler's imports), else every command is registered."""
    parser = argparse.ArgumentParser(
        prog="python -m workbench",
        description="Inference Latency Workbench: where each request's time goes, stage by stage.",
        epilog="exit codes: 0 ok, 1 measured failure or regression, 2 bad input, 3 internal error "
        "(WORKBENCH_DEBUG=1 prints the traceback), 4 inconclusive (gate), 130 interrupted, 143 terminated (SIGTERM)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    only = module_of(argv[0]) if argv else None
    if only:  # a core command: its module alone
        importlib.import_module(f"{__name__}.{only}").register(subparsers)
        return parser
    wings = wing_commands()
    chosen = [entry for entry in wings if argv and entry.name == argv[0]]
    for name in () if chosen else SUBCOMMAND_MODULES:  # a wing's command: its module alone
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    for entry in chosen or wings:  # where its module cannot load, a stand-in says how to install it
        try:
            entry.load()(subparsers)
        except ModuleNotFoundError as exc:
            name = entry.value.split(".", 1)[0].removeprefix("workbench_")
            hint = install_hint(name)
            why = f"the {name} wing cannot load here (no module named {exc.name!r}): {hint}"
            # every argument taken as it is: the refusal names the wing
            stand_in = subparsers.add_parser(
                entry.name, help=f"needs the {name} wing: {hint}", prefix_chars="\x01"
            )
            stand_in.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
            stand_in.set_defaults(func=functools.partial(_refuse, why))
    return parser


def _refuse(why: str, args) -> int:
    raise WingMissing(why)


def main(argv: list[str] | None = None) -> int:
    """Run one command and return its exit code (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    unfit = unfit_argument(argv)
    if unfit:
        return _fail(argv[0] if argv else "", unfit, EXIT_BAD_INPUT)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)  # usage errors exit 2 through argparse itself
    except WorkbenchError as exc:  # a number outside its range (cli/output.py): one line, exit 2
        return _fail(argv[0] if argv else "", str(exc), EXIT_BAD_INPUT)
    # SIGTERM takes Ctrl-C's path (what was measured is kept), exit 143
    with sigterm_as_interrupt():
        return _run(args)


def unfit_argument(argv: list[str]) -> str | None:
    """What is wrong with the first argument no file name, label or table can hold, else None: a
    caller of :func:`main` (a notebook, a test; never the OS) can pass a NUL byte or a lone
    surrogate, and each would surface deep inside as an internal error."""
    for k, text in enumerate(argv, 1):
        shown = ascii(text)[:80]
        if "\x00" in text:
            return f"argument {k} ({shown}) holds a NUL byte"
        try:
            os.fsencode(text)
        except UnicodeEncodeError:
            return f"argument {k} ({shown}) holds a lone surrogate, which no file name or text can hold"
    return None


def _run(args) -> int:
    try:
        return int(args.func(args) or 0)
    except WorkbenchError as exc:
        return _fail(args.command, str(exc), EXIT_BAD_INPUT)
    except _USER_FILE_ERRORS as exc:
        return _fail(args.command, f"{exc.strerror or exc}: {exc.filename}", EXIT_BAD_INPUT)
    except OSError as exc:
        if exc.errno not in _USER_PATH_ERRNOS:
            return _internal_error(args.command, exc)
        return _fail(args.command, f"{exc.strerror}: {str(exc.filename)[:200]}", EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        if terminated():
            return _fail(args.command, "terminated (SIGTERM)", EXIT_TERMINATED)
        return _fail(args.command, "interrupted", EXIT_INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - the one place a bug becomes an exit code
        return _internal_error(args.command, exc)


def _internal_error(command: str, exc: Exception) -> int:
    """Exit 3 for a bug (one line; the traceback with WORKBENCH_DEBUG=1), or quiet when stdout's reader left."""
    gone = False  # stdout is a pipe whose reader left (``... | head -1``), not ``serve``'s socket
    if isinstance(exc, BrokenPipeError):
        with contextlib.suppress(AttributeError, OSError, ValueError):  # no poll (Windows), no file
            poller = select.poll()
            poller.register(sys.stdout.fileno(), select.POLLOUT)
            gone = any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    if gone:
        # quiet, as Unix tools are when their reader left; stdout on /dev/null, so that the
        # interpreter's final flush does not print a second BrokenPipeError
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_STDOUT_CLOSED
    debug = os.environ.get("WORKBENCH_DEBUG") == "1"
    if debug:
        traceback.print_exc(file=sys.stderr)
    detail = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    hint = "" if debug else " (WORKBENCH_DEBUG=1 shows the traceback)"
    return _fail(command, f"internal error: {detail}; please report it{hint}", EXIT_INTERNAL_ERROR)


def entry() -> int:
    """The process entry point (tests and notebooks call :func:`main`). An interrupted command
    (130, 143) leaves with :func:`_exit_now`: a ``KeyboardInterrupt`` that went through ``exec`` of
    a string (dataclasses build their methods so) leaves CPython's "unhandled KeyboardInterrupt"
    mark set even once caught, and the interpreter then ends itself by SIGINT."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C is KeyboardInterrupt again
    try:
        prepare_process(sys.argv[1:])
        code = exit_past_threads(main())
        if code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            _exit_now(code)
        return code
    except KeyboardInterrupt:  # outside a command's own handling (start-up, imports, leaving): 130
        print("workbench: interrupted", file=sys.stderr)
        _exit_now(EXIT_INTERRUPTED)


def exit_past_threads(code: int) -> int:
    """``code``, or leave at once with it (:func:`_exit_now`) past a stage's thread still alive: an
    abandoned one blocked in C++ (a CUDA synchronize; ended at finalization, it aborts the process:
    exit 134), or a non-daemon one, which would keep the process alive forever (a line on stderr)."""
    guard = sys.modules.get("workbench.guard")  # never imported: no stage ran, no stage thread
    if guard is not None and guard.stage_threads_alive():
        _exit_now(code)
    lingering = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread()
        and t.is_alive()
        and not t.daemon
        and not t.name.startswith("ThreadPoolExecutor")
    ]  # pools are joined at exit by their module
    if not lingering:
        return code
    names = ", ".join(sorted({t.name for t in lingering})[:3])
    print(
        f"workbench: exiting with {len(lingering)} thread(s) still running that a stage started ({names}); "
        "the run was saved first",
        file=sys.stderr,
    )
    _exit_now(code)


def _exit_now(code: int):
    """Flush the streams, run the atexit handlers and leave without joining threads (``os._exit``)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def prepare_process(argv: list[str]) -> None:
    """Process-wide settings that only a fresh process may take: ``analyze`` of a trace *file* reads
    no Parquet, yet pandas imports pyarrow when installed, so pyarrow is hidden from that process
    before pandas loads (a run folder, whose tables are Parquet, keeps it)."""
    fresh = "pandas" not in sys.modules and "pyarrow" not in sys.modules
    if len(argv) >= 2 and argv[0] == "analyze" and fresh:
        trace = next((a for a in argv[1:] if not a.startswith("-")), None)
        if trace is not None and os.path.isfile(trace):
            sys.modules["pyarrow"] = None  # type: ignore[assignment] - import pyarrow now raises ImportError


def _fail(command: str, message: str, code: int) -> int:
    error = "" if code in (EXIT_INTERRUPTED, EXIT_TERMINATED) else "error: "
    # a path from the OS may hold surrogate escapes; a stream opened strict (a notebook's) would refuse them
    print(encodable(f"workbench {command}: {error}{message}"), file=sys.stderr)
    return code
