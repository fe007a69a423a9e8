"""The normalized events table: one row per complete (``ph == "X"``) trace event, in file order.

Columns: ``ts_ns`` and ``dur_ns`` int64 ns (``ts`` read as an exact decimal of microseconds, whatever
``displayTimeUnit`` says; ``dur_ns`` never negative); categorical text ``name``, ``cat`` ("" if
absent), ``kind`` (one of :data:`KINDS`), ``pid`` and ``tid`` (GPU events: device and stream);
nullable Int64 ``device`` and ``stream`` (GPU events fall back to ``pid``/``tid``; hex text such as
ROCm's ``"0x0"`` is a number), ``correlation`` (2021 schema: ``args["correlation id"]``; joins GPU
work to the runtime call that launched it), ``bytes``, ``ext_id`` (``args["External id"]``: joins
runtime calls and GPU work to the operator that issued them). ``kind``: :data:`CATEGORY_KINDS`
of the category (case-sensitive), else ``other``.
"""

from __future__ import annotations


class _LazyPandas:
    """``pd``: pandas imported on first use, so ``analyze`` (numpy end to end) never imports it."""

    def __getattr__(self, name: str):
        import pandas  # 0.3-0.5 s with pyarrow: only for a DataFrame, never in analyze

        return getattr(pandas, name)


pd = _LazyPandas()

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
    """``KIND_DTYPE``, the pandas dtype of the ``kind`` column, made on first use (pandas is slow)."""
    if name == "KIND_DTYPE":
        value = pd.CategoricalDtype(categories=pd.Index(list(KINDS), dtype="str"))
        globals()["KIND_DTYPE"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
