"""``load_trace``: a profiler trace file -> :class:`~.model.Trace`, built chunk by chunk."""

from __future__ import annotations

import os
from operator import attrgetter
from pathlib import Path

import numpy as np

from ..errors import TraceError
from . import schema
from .columns import Columns, Text, factorize, kind_codes, unify
from .decode import Args, decode_events, decode_meta, read_raw
from .model import Trace
from .numbers import NA_INT, TIME_LIMIT_NS, NumberError, _as_int, to_int64_values, us_text_to_ns
from .read import DEFAULT_MAX_TRACE_BYTES

_NO_ARGS = Args()
_INPUT_DIMS = attrgetter("input_dims")


BYTES_LIMIT = 2**62  # all 'bytes' of a trace together: any sum of them fits in int64
CHUNK_EVENTS = 8_192  # typed structs of one chunk at a time: more raise the peak, no faster


def load_trace(
    path: str | os.PathLike,
    *,
    max_bytes: int = DEFAULT_MAX_TRACE_BYTES,
    progress=None,
    decoded: tuple[list, dict] | None = None,
) -> Trace:
    """Read a ``.json`` or ``.json.gz`` trace (either kineto schema, CUDA or ROCm).

    ``max_bytes`` caps the JSON text after decompression (default 4 GiB). Bad input raises
    :class:`~workbench.errors.TraceError` naming the file, the problem and where (event index
    and field, or byte offset). ``progress(stage, done, total)`` hears of ``"read"`` and of each
    chunk of events decoded (``"decode"``). ``decoded``: :func:`read_raw`'s result for this path,
    when the caller read the file itself (``analyze`` does, while pandas imports).
    """
    path = Path(path)
    if progress is not None and decoded is None:
        progress("read", 0, 1)
    raws, raw_meta = read_raw(path, max_bytes) if decoded is None else decoded
    if not raws:
        raise TraceError(f"{path}: empty trace: 'traceEvents' has no events")
    builder = _Columns(path)
    for offset in range(0, len(raws), CHUNK_EVENTS):
        chunk = decode_events(path, raws[offset : offset + CHUNK_EVENTS], offset)
        builder.add([e for e in chunk if e.ph == "X"], chunk, offset)
        if progress is not None:
            progress("decode", offset + len(chunk), len(raws))
    if builder.rows == 0:
        raise TraceError(f"{path}: empty trace: no complete (ph 'X') events among {len(raws)}")
    n_events = len(raws)
    del raws  # frees the JSON text before the table is assembled
    columns = builder.columns()
    meta = decode_meta(path, raw_meta)
    meta |= {
        "schema": "2021" if set(columns.cat.labels) & schema.OLD_SCHEMA_CATEGORIES else "kineto",
        "platform": _platform(columns),
        "event_count": n_events,
        "complete_event_count": len(columns),
    }
    return Trace(columns=columns, path=path, meta=meta)


def load_events(path: str | os.PathLike):
    """Just the events table of :func:`load_trace`."""
    return load_trace(path).events


class _Columns:
    """Accumulates compact column pieces chunk by chunk (structs are dropped after each)."""

    TEXT = schema.TEXT_COLUMNS

    def __init__(self, path: Path):
        self.path = path
        self.rows = 0
        self.dur_total_ns = 0.0
        self.bytes_total = 0
        self._where: tuple = ([], [], 0)
        self.pieces: dict[str, list] = {
            k: [] for k in ("ts_ns", "dur_ns", "args", "shapes", *self.TEXT)
        }

    def add(self, xs: list, chunk: list, offset: int) -> None:
        """Append the complete events ``xs`` of ``chunk`` (whose first event is traceEvents[offset])."""
        if not xs:
            return
        self._where = (xs, chunk, offset)
        ts_ns, dur_ns = self._times(xs, "ts"), self._times(xs, "dur")
        if (dur_ns < 0).any():
            i = int(np.flatnonzero(dur_ns < 0)[0])
            raise TraceError(
                f"{self.path}: {self._event(i)} has a negative duration ({dur_ns[i]} ns)"
            )
        self._check_range(ts_ns, dur_ns)
        self.pieces["ts_ns"].append(ts_ns)
        self.pieces["dur_ns"].append(dur_ns)
        for key in self.TEXT:
            self.pieces[key].append(self._factorized(xs, key))
        args = [e.args or _NO_ARGS for e in xs]
        rows = list(map(attrgetter(*_ARG_KEYS), args))  # int64, NA_INT where absent or not an int
        try:  # the common case, every present value an int: one C conversion
            table = np.array(rows, dtype=np.int64).reshape(len(rows), len(_ARG_KEYS))
        except (TypeError, ValueError, OverflowError):
            table = np.stack(
                [to_int64_values([r[i] for r in rows]) for i in range(len(_ARG_KEYS))], axis=1
            )
        self._check_bytes(table[:, _ARG_KEYS.index("bytes")])
        self.pieces["args"].append(table)
        # operators' ``Input Dims`` as compact JSON text (``[[8,64],[64,64]]``), None when no event
        # has any: an absent key is an empty Raw (falsy), so the common case costs one pass
        dims, shapes = list(map(_INPUT_DIMS, args)), None
        if any(dims):
            shapes = [
                bytes(r).decode("utf-8", "replace").replace(" ", "") if r else None for r in dims
            ]
        self.pieces["shapes"].append(shapes)
        self.rows += len(xs)

    def _event(self, i: int) -> str:
        """``traceEvents[K] ('name')`` for the i-th complete event of the chunk being added."""
        xs, chunk, offset = self._where
        k = next(j for j, e in enumerate(chunk) if e is xs[i])
        return f"traceEvents[{offset + k}] ({xs[i].name!r})"

    def _check_range(self, ts_ns: np.ndarray, dur_ns: np.ndarray) -> None:
        """Times must stay inside (-2**62, 2**62) ns (146 years), so every span and sum fits in int64."""
        bad = (np.abs(ts_ns) >= TIME_LIMIT_NS) | (dur_ns >= TIME_LIMIT_NS)
        bad |= ts_ns + np.minimum(dur_ns, TIME_LIMIT_NS) >= TIME_LIMIT_NS  # wraps where ts failed
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise TraceError(
                f"{self.path}: {self._event(i)}: 'ts' {ts_ns[i]} ns + 'dur' {dur_ns[i]} ns is "
                f"beyond the +-2**62 ns (146 years) that trace times may span"
            )
        self.dur_total_ns += float(dur_ns.sum(dtype=np.float64))
        if self.dur_total_ns >= TIME_LIMIT_NS:
            raise TraceError(
                f"{self.path}: the durations up to {self._event(len(dur_ns) - 1)} add up to over "
                "2**62 ns (146 years): 'dur' values this large are not real"
            )

    def _check_bytes(self, nbytes: np.ndarray) -> None:
        """Sizes are never negative and sum under 2**62 bytes, so every byte total fits in int64."""
        present = nbytes != NA_INT
        negative = present & (nbytes < 0)
        if negative.any():
            i = int(np.flatnonzero(negative)[0])
            raise TraceError(
                f"{self.path}: {self._event(i)}: 'bytes' is {nbytes[i]}, a negative size"
            )
        # exact: Python ints (only copies and memsets carry bytes)
        self.bytes_total += sum(nbytes[present].tolist())
        if self.bytes_total >= BYTES_LIMIT:
            raise TraceError(
                f"{self.path}: the 'bytes' values up to {self._event(len(nbytes) - 1)} add up to over "
                "2**62 bytes (4.6 EB): sizes this large are not real"
            )

    def _times(self, xs: list, key: str) -> np.ndarray:
        try:
            return us_text_to_ns(list(map(attrgetter(key), xs)))
        except NumberError as exc:
            where = self._event(exc.index)
            if not exc.text:
                raise TraceError(f"{self.path}: {where} has no {key!r}") from None
            raise TraceError(
                f"{self.path}: {where}: {key!r} is {exc.text[:40].decode('utf-8', 'replace')}, "
                "not a number of microseconds in range"
            ) from None

    def _factorized(self, xs: list, key: str):
        codes, uniques = factorize(list(map(attrgetter(key), xs)))
        if codes.size and codes.min() < 0:
            i = int(np.argmax(codes < 0))
            raise TraceError(
                f"{self.path}: {self._event(i)} has no {key!r} "
                "(ph 'X' events need name, ts, dur, pid, tid)"
            )
        return codes, uniques

    def columns(self) -> Columns:
        text = {k: unify(self.pieces[k]) for k in self.TEXT}
        kind = kind_codes(text["cat"])
        table = np.concatenate(self.pieces["args"])
        cols = {k: table[:, i].copy() for i, k in enumerate(_ARG_KEYS)}
        del table  # its columns are copied: not held twice while the table is assembled
        correlation = cols["correlation"]  # the 2021 schema names it correlation_id
        correlation = np.where(correlation == NA_INT, cols["correlation_id"], correlation)
        gpu = np.isin(kind, [schema.KINDS.index(k) for k in schema.GPU_WORK_KINDS])
        shapes = None
        if any(p is not None for p in self.pieces["shapes"]):  # traces recorded with record_shapes
            parts = [
                p if p is not None else [None] * len(t)
                for p, t in zip(self.pieces["shapes"], self.pieces["ts_ns"])
            ]
            shapes = np.empty(self.rows, dtype=object)
            shapes[:] = [s for part in parts for s in part]
        return Columns(
            ts_ns=np.concatenate(self.pieces["ts_ns"]),
            dur_ns=np.concatenate(self.pieces["dur_ns"]),
            kind=kind,
            **text,
            device=_with_fallback(cols["device"], gpu, text["pid"]),
            stream=_with_fallback(cols["stream"], gpu, text["tid"]),
            correlation=correlation,
            bytes=cols["bytes"],
            ext_id=cols["external_id"],
            shapes=shapes,
        )


_ARG_KEYS = ("correlation", "device", "stream", "bytes", "external_id", "correlation_id")


def _with_fallback(values: np.ndarray, gpu: np.ndarray, ids: Text) -> np.ndarray:
    """GPU events without the argument take it from pid/tid (device, stream) when numeric."""
    missing = gpu & (values == NA_INT)
    if not missing.any():
        return values
    numbers = [_as_int(label.rsplit(" ", 1)[-1]) for label in ids.labels]
    table = np.array([NA_INT if n is None else n for n in numbers] + [NA_INT], dtype=np.int64)
    return np.where(missing, table[ids.codes], values)


def _platform(columns: Columns) -> str:
    kinds = {schema.KINDS[k] for k in np.unique(columns.kind).tolist()}
    if not kinds & {schema.KIND_RUNTIME, *schema.GPU_WORK_KINDS}:
        return "cpu"
    runtime = columns.name.take(columns.kind == schema.KINDS.index(schema.KIND_RUNTIME))
    names = runtime.labels[np.unique(runtime.codes)] if runtime.codes.size else []
    return "rocm" if any(str(n).startswith("hip") for n in names) else "cuda"
