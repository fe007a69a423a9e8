"""The normalized events table: one row per complete (``ph == "X"``) trace event.

Columns (in this order):

==============  ==============  ===================================================
column          dtype           meaning
==============  ==============  ===================================================
``ts_ns``       int64           start, integer nanoseconds on the trace's clock
                                (``ts`` read as an exact decimal of microseconds)
``dur_ns``      int64           duration, integer nanoseconds (never negative)
``name``        category (str)  event name, JSON escapes decoded
``cat``         category (str)  raw category (``cpu_op``, ``Kernel``, ...); "" if absent
``kind``        category (str)  normalized kind, one of :data:`KINDS`
``pid``         category (str)  process id as text (Chrome traces allow numbers or
                                strings; GPU events use the device id)
``tid``         category (str)  thread id as text (GPU events: the stream id)
``device``      Int64           ``args.device`` (GPU events: falls back to ``pid``)
``stream``      Int64           ``args.stream`` (GPU events: falls back to ``tid``);
                                hex text such as ``"0x0"`` (ROCm) is read as a number
``correlation`` Int64           ``args.correlation`` (2021 schema:
                                ``args["correlation id"]``): joins GPU work to the
                                runtime call that launched it
``bytes``       Int64           ``args.bytes`` (copies, memsets); null when absent
``ext_id``      Int64           ``args["External id"]``: joins runtime calls and GPU
                                work to the operator that issued them
==============  ==============  ===================================================

Rows keep the file's order. Missing integer arguments are ``<NA>``.
``displayTimeUnit`` never changes the unit: ``ts``/``dur`` are always microseconds.

Kinds come from the category, matched case-sensitively (both kineto schemas):
``cpu_op``/``Operator`` -> cpu_op; ``user_annotation`` -> user_annotation;
``cuda_runtime``/``Runtime``/``cuda_driver`` -> runtime; ``kernel``/``Kernel`` ->
kernel; ``gpu_memcpy``/``Memcpy`` -> memcpy; ``gpu_memset``/``Memset`` -> memset;
``gpu_user_annotation`` -> gpu_annotation; ``cuda_sync`` -> sync (not runtime,
though it carries a correlation); ``python_function`` -> python; anything else
(``Trace``, ``cuda_profiler_range``, ...) -> other.
"""

from __future__ import annotations


from .lazy import pd

KIND_CPU_OP = "cpu_op"
KIND_USER_ANNOTATION = "user_annotation"
KIND_RUNTIME = "runtime"
KIND_KERNEL = "kernel"
KIND_MEMCPY = "memcpy"
KIND_MEMSET = "memset"
KIND_GPU_ANNOTATION = "gpu_annotation"
KIND_SYNC = "sync"
KIND_PYTHON = "python"
KIND_OTHER = "other"

KINDS = (
    KIND_CPU_OP,
    KIND_USER_ANNOTATION,
    KIND_RUNTIME,
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    KIND_GPU_ANNOTATION,
    KIND_SYNC,
    KIND_PYTHON,
    KIND_OTHER,
)
GPU_WORK_KINDS = (KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET)
HOST_KINDS = (KIND_CPU_OP, KIND_USER_ANNOTATION, KIND_RUNTIME, KIND_PYTHON)

CATEGORY_KINDS = {
    "cpu_op": KIND_CPU_OP,
    "Operator": KIND_CPU_OP,
    "user_annotation": KIND_USER_ANNOTATION,
    "cuda_runtime": KIND_RUNTIME,
    "Runtime": KIND_RUNTIME,
    "cuda_driver": KIND_RUNTIME,
    "kernel": KIND_KERNEL,
    "Kernel": KIND_KERNEL,
    "gpu_memcpy": KIND_MEMCPY,
    "Memcpy": KIND_MEMCPY,
    "gpu_memset": KIND_MEMSET,
    "Memset": KIND_MEMSET,
    "gpu_user_annotation": KIND_GPU_ANNOTATION,
    "cuda_sync": KIND_SYNC,
    "python_function": KIND_PYTHON,
}
OLD_SCHEMA_CATEGORIES = frozenset({"Operator", "Runtime", "Kernel", "Memcpy", "Memset"})

INT_COLUMNS = ("device", "stream", "correlation", "bytes", "ext_id")
TEXT_COLUMNS = ("name", "cat", "pid", "tid")  # categorical text
COLUMNS = ("ts_ns", "dur_ns", "name", "cat", "kind", "pid", "tid", *INT_COLUMNS)


def __getattr__(name: str):
    """``KIND_DTYPE`` (the pandas dtype of the ``kind`` column), made on first use: importing this
    module does not import pandas (``analyze`` reads numpy columns)."""
    if name == "KIND_DTYPE":
        value = pd.CategoricalDtype(categories=pd.Index(list(KINDS), dtype="str"))
        globals()["KIND_DTYPE"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
