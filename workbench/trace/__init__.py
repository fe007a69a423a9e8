"""Loading PyTorch profiler traces into one normalized events table.

``load_trace(path)`` reads ``.json``/``.json.gz`` traces of either kineto schema
(2021 ``Operator``/``Runtime``/``Kernel``... or today's ``cpu_op``/``cuda_runtime``/
``kernel``...), CUDA or ROCm, and returns a :class:`Trace` whose ``events`` table
is described in :mod:`workbench.trace.schema` (the one trace model, with memoised
derived tables: :mod:`workbench.trace.model`). Broken input raises
:class:`~workbench.errors.TraceError` naming the file and the place (event index
and field, or byte offset); ``load_trace(path, max_bytes=...)`` caps the JSON text
while decompressing (default 4 GiB). ``tests/support/fuzz.py`` makes seeded broken
variants of traces to check all that.
"""

from .load import load_events, load_trace
from .model import Trace, derived
from .schema import (
    COLUMNS,
    GPU_WORK_KINDS,
    HOST_KINDS,
    KIND_CPU_OP,
    KIND_GPU_ANNOTATION,
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    KIND_OTHER,
    KIND_PYTHON,
    KIND_RUNTIME,
    KIND_SYNC,
    KIND_USER_ANNOTATION,
    KINDS,
)

__all__ = [
    "COLUMNS",
    "GPU_WORK_KINDS",
    "HOST_KINDS",
    "KINDS",
    "KIND_CPU_OP",
    "KIND_GPU_ANNOTATION",
    "KIND_KERNEL",
    "KIND_MEMCPY",
    "KIND_MEMSET",
    "KIND_OTHER",
    "KIND_PYTHON",
    "KIND_RUNTIME",
    "KIND_SYNC",
    "KIND_USER_ANNOTATION",
    "Trace",
    "derived",
    "load_events",
    "load_trace",
]
