"""Loading PyTorch profiler traces (either kineto schema, CUDA or ROCm) into one :class:`Trace`.

Its ``events`` table is described in :mod:`workbench.trace.schema`, its memoised derived tables
in :mod:`workbench.trace.model`; broken input raises :class:`~workbench.errors.TraceError`.
"""

from .load import load_events, load_trace
from .model import Trace, derived
from .schema import (
    COLUMNS,
    GPU_WORK_KINDS,
    HOST_KINDS,
    KIND_CPU_OP,
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    KIND_PYTHON,
    KIND_RUNTIME,
    KIND_SYNC,
    KIND_USER_ANNOTATION,
    KINDS,
)
