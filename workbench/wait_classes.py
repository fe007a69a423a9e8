"""What a sampled thread was doing: on CPU, or waiting, and on what (the sampler's classification).

The classes (:data:`CLASSES`) and their rules: :func:`classify` and docs/audit.md. A wait's ``site``
is the deepest frame of the user's own code, the line the user can change.
"""

from __future__ import annotations

import linecache
import os
import re
import sysconfig

CLASSES = ("cpu", "lock", "gil", "io", "sleep", "device", "gc", "off_cpu")
CODE = {name: i for i, name in enumerate(CLASSES)}
LATE_STAGE = "(waiting to start)"  # a paced request's stage before its first (sampling.mark_due)
# the other threads' busy share of the interval that makes a blocked sample a GIL wait
GIL_SHARE = 0.25

_STDLIB = os.path.normcase(sysconfig.get_paths()["stdlib"])
# the harness (its examples are user code): the core and the wings beside it, found by name
_PACKAGE = os.path.normcase(os.path.dirname(os.path.abspath(__file__)))
_EXAMPLES = os.path.join(_PACKAGE, "examples")


def _harness() -> tuple[str, ...]:
    """The core's folder and each wing package's beside it."""
    root = os.path.dirname(_PACKAGE)
    try:
        names = sorted(n for n in os.listdir(root) if n.startswith("workbench_"))
    except OSError:
        names = []
    wings = [os.path.join(root, n) for n in names]
    return (_PACKAGE, *(w for w in wings if os.path.isfile(os.path.join(w, "__init__.py"))))


# each harness folder (with its separator) and its recorded prefix: <workbench>/..., <workbench_serve>/...
_HARNESS_PREFIXES = tuple((root + os.sep, f"<{os.path.basename(root)}>/") for root in _harness())
_HARNESS_ROOTS = tuple(root for root, _ in _HARNESS_PREFIXES)
# standard-library modules whose frames are a wait of that class
MODULE_KIND = {
    "threading.py": "lock",
    "queue.py": "lock",
    "socket.py": "io",
    "ssl.py": "io",
    "selectors.py": "io",
    "subprocess.py": "io",
    "select.py": "io",
    "client.py": "io",  # http/client.py
}
LIBRARY_IO = ("/redis/", "/urllib3/", "/requests/", "/httpx/", "/aiohttp/", "/psycopg", "/sqlite3/")
LINE_KIND = (  # the first match wins
    ("device", re.compile(r"\.synchronize\(|\.item\(\)|\.cpu\(\)|\.tolist\(\)|\.numpy\(\)")),
    ("sleep", re.compile(r"\bsleep\(")),
    (
        "lock",
        re.compile(
            r"\.acquire\(|\.wait\(|\.wait_for\(|\.join\(|\bwith\s+[\w.]*(lock|mutex|cond|sem|guard)"
            r"|\w*(queue|_q|q)\.(get|put)\(",
            re.IGNORECASE,
        ),
    ),
    (
        "io",
        re.compile(
            r"\b(recv\w*|send\w*|connect|accept|select|poll|read\w*|write\w*|flush|communicate"
            r"|urlopen|execute|fetch\w*)\(|\bopen\(|subprocess\.|requests\.|httpx\.",
        ),
    ),
)


def is_user_file(file: str) -> bool:
    """Not the standard library, a package, a builtin or the harness (but its examples)."""
    norm = os.path.normcase(file)
    if norm.startswith("<workbench"):  # <workbench>/..., a wing's <workbench_serve>/...
        return norm.startswith(WORKBENCH_PREFIX + "examples/")
    return not (
        norm.startswith(_STDLIB)
        or (norm.startswith(_HARNESS_ROOTS) and not norm.startswith(_EXAMPLES))
        or "site-packages" in norm
        or "dist-packages" in norm
        or file.startswith("<")
    )


STDLIB_PREFIX, WORKBENCH_PREFIX = "<stdlib>/", "<workbench>/"


def portable_file(file: str) -> str:
    """A frame's file as a run records it, without the measuring machine's paths: ``<stdlib>/...``,
    ``<workbench>/...``, ``site-packages/...``, relative to the working folder, else as it was."""
    norm = os.path.normcase(file)
    for marker in ("site-packages", "dist-packages"):
        at = norm.rfind(os.sep + marker + os.sep)
        if at >= 0:
            return "site-packages/" + file[at + len(marker) + 2 :].replace(os.sep, "/")
    for root, prefix in (*_HARNESS_PREFIXES, (_STDLIB + os.sep, STDLIB_PREFIX)):
        if norm.startswith(root):
            return prefix + file[len(root) :].replace(os.sep, "/")
    if os.path.isabs(file):
        rel = os.path.relpath(file)
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    return file


def call_kind(frames: tuple) -> tuple[str | None, int]:
    """``(kind or None, site)``: the wait its top calls name, the deepest user frame's index."""
    site = next((i for i in range(len(frames) - 1, -1, -1) if is_user_file(frames[i][0])), -1)
    site = site if site >= 0 else len(frames) - 1
    for file, _, _ in frames[site + 1 :]:  # library or stdlib frames above the user's call
        kind = MODULE_KIND.get(os.path.basename(file)) if not is_user_file(file) else None
        if kind is None and any(lib in file.replace("\\", "/") for lib in LIBRARY_IO):
            kind = "io"
        if kind is not None:
            return kind, site
    if not frames:
        return None, site
    file, _, line = frames[site]
    text = linecache.getline(file, line)
    for kind, pattern in LINE_KIND:
        if pattern.search(text):
            return kind, site
    return None, site


def classify(
    kind: str | None, dt_ns: int, cpu_ns: int | None, others_busy_ns: int, gc_ns: int
) -> int:
    """The class code (index into :data:`CLASSES`) of one sample of a thread in a stage, from the
    time since the previous sample, the thread's CPU time in it (None: no counter), the other
    Python threads' CPU plus run-queue time (a GIL holder's) and the collection time."""
    half = dt_ns // 2
    if gc_ns and gc_ns >= half:
        return CODE["gc"]
    if kind == "device":
        return CODE["device"]
    if cpu_ns is not None and cpu_ns >= half:
        return CODE["cpu"]
    if kind is not None:  # its run-queue time is the wake-up after the wait
        return CODE[kind]
    if cpu_ns is None:
        return CODE["cpu"]
    if others_busy_ns >= dt_ns * GIL_SHARE:  # one of them held the GIL, on a core or waiting
        return CODE["gil"]
    return CODE["off_cpu"]
