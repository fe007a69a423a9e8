"""The events table of :mod:`workbench.trace.schema` as numpy columns, without pandas (slow to
import). ``kind`` is int8, the index into :data:`~workbench.trace.schema.KINDS`; text columns are
:class:`Text` (labels in order of first appearance, as ``pandas.factorize`` gives them); integer
ids are int64, :data:`NA_INT` where absent; ``shapes``: ``Input Dims`` as compact JSON text.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .numbers import NA_INT
from .schema import CATEGORY_KINDS, COLUMNS, INT_COLUMNS, KIND_OTHER, KINDS, TEXT_COLUMNS
from . import schema
from .schema import pd


@dataclass(frozen=True)
class Text:
    """A text column: ``codes`` (int64, -1 = absent) into ``labels`` (object array of str)."""

    codes: np.ndarray
    labels: np.ndarray

    def take(self, rows) -> Text:
        return Text(self.codes[rows], self.labels)

    def values(self) -> np.ndarray:
        """The text of each row (object array; absent rows are None)."""
        absent = np.array([None], dtype=object)
        padded = np.append(self.labels, None) if self.labels.size else absent
        return padded[np.where(self.codes < 0, padded.size - 1, self.codes)]

    def matches(self, predicate) -> np.ndarray:
        """Boolean per row: ``predicate(label)``, evaluated once per distinct label."""
        hits = np.array([bool(predicate(label)) for label in self.labels] + [False], dtype=bool)
        return hits[np.where(self.codes < 0, hits.size - 1, self.codes)]

    def isin(self, names) -> np.ndarray:
        names = frozenset(names)
        return self.matches(names.__contains__)


@dataclass(frozen=True)
class Columns:
    """The normalized events, one numpy array per column."""

    ts_ns: np.ndarray
    dur_ns: np.ndarray
    kind: np.ndarray
    name: Text
    cat: Text
    pid: Text
    tid: Text
    device: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    bytes: np.ndarray
    ext_id: np.ndarray
    shapes: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.ts_ns.size)

    def take(self, rows) -> Columns:
        """The rows ``rows`` (an index array or a boolean mask), every column."""

        def pick(value):
            return value.take(rows) if isinstance(value, Text) else value[rows]

        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return Columns(**{k: None if v is None else pick(v) for k, v in values.items()})

    def of_kinds(self, kinds) -> np.ndarray:
        """Boolean mask of the rows whose kind is in ``kinds``."""
        return np.isin(self.kind, [KINDS.index(k) for k in kinds])

    def to_frame(self):
        """The pandas events table (:mod:`workbench.trace.schema`); imports pandas."""
        texts = {key: getattr(self, key) for key in TEXT_COLUMNS}
        data = {"ts_ns": self.ts_ns, "dur_ns": self.dur_ns, "kind": kinds(self.kind)}
        data |= {key: categorical(text.codes, text) for key, text in texts.items()}
        data |= {key: nullable(getattr(self, key)) for key in INT_COLUMNS}
        table = pd.DataFrame(data, columns=list(COLUMNS))
        if self.shapes is not None:
            table["input_shapes"] = pd.Categorical(list(self.shapes))
        return table

    @classmethod
    def from_frame(cls, table) -> Columns:
        """The columns of a pandas events table (categorical or plain text columns both read)."""

        def text(column) -> Text:
            col = table[column]
            if not isinstance(col.dtype, pd.CategoricalDtype):
                col = col.astype(str).astype("category")
            return Text(
                col.cat.codes.to_numpy().astype(np.int64),
                np.array(list(col.cat.categories), dtype=object),
            )

        kind_col = table["kind"]
        if isinstance(kind_col.dtype, pd.CategoricalDtype):
            lookup = np.array(
                [KINDS.index(str(k)) for k in kind_col.cat.categories] + [-1], dtype=np.int8
            )
            kind = lookup[kind_col.cat.codes.to_numpy()]
        else:
            kind = np.array([KINDS.index(str(k)) for k in kind_col], dtype=np.int8).reshape(-1)
        ints = {
            key: pd.array(table[key], dtype="Int64").to_numpy(dtype=np.int64, na_value=NA_INT)
            if key in table
            else np.full(len(table), NA_INT, np.int64)
            for key in INT_COLUMNS
        }
        shapes = None
        if "input_shapes" in table:
            col = table["input_shapes"]
            shapes = np.array([None if pd.isna(v) else str(v) for v in col], dtype=object)
        return cls(
            ts_ns=table["ts_ns"].to_numpy(np.int64),
            dur_ns=table["dur_ns"].to_numpy(np.int64),
            kind=kind,
            **{k: text(k) for k in TEXT_COLUMNS},
            **ints,
            shapes=shapes,
        )


def totals_by_name(names: Text, dur_ns: np.ndarray) -> list[dict]:
    """``{name, count, total_ns, max_ns}`` per name, largest total first (ties by name)."""
    out = []
    for code in np.unique(names.codes):
        dur = dur_ns[names.codes == code]
        out.append(
            {
                "name": str(names.labels[code]),
                "count": int(dur.size),
                "total_ns": int(dur.sum()),
                "max_ns": int(dur.max()),
            }
        )
    return sorted(out, key=lambda r: (-r["total_ns"], r["name"]))


def factorize(values: list) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` of a list in order of first appearance; None is absent (code -1)."""
    try:
        ints = np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        codes, found = factorize_objects(values)
        uniques = np.empty(len(found), dtype=object)
        uniques[:] = found
        return codes, uniques
    uniq, first, inverse = np.unique(ints, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    uniques = np.empty(order.size, dtype=object)
    uniques[:] = uniq[order].tolist()
    return rank[inverse.reshape(-1)], uniques


def unify(pieces: list[tuple[np.ndarray, np.ndarray]]) -> Text:
    """One text column from per-chunk ``(codes, uniques)``; 7 and "7" name the same thread."""
    all_uniques = [u for _, part in pieces for u in part]
    remap, uniques = factorize_objects(all_uniques)
    starts = np.cumsum([0] + [len(u) for _, u in pieces])
    parts = [remap[start:][c] for (c, _), start in zip(pieces, starts)]
    codes = np.concatenate(parts) if parts else np.empty(0, np.int64)
    labels = [str(int(u)) if isinstance(u, float) and u.is_integer() else str(u) for u in uniques]
    again, distinct = factorize_objects(labels)
    if len(distinct) != len(labels):
        codes = again[codes]
        labels = list(distinct)
    return Text(codes, np.array(labels, dtype=object).reshape(-1))


def factorize_objects(values: list) -> tuple[np.ndarray, list]:
    """``(codes, uniques)`` of hashable values in order of first appearance; None is absent (code -1)."""
    uniques = list(dict.fromkeys(values))  # C loops: a million names in ~0.1 s
    index = {v: i for i, v in enumerate(uniques)}
    if None in index:
        uniques.remove(None)
        index = {v: i for i, v in enumerate(uniques)} | {None: -1}
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), uniques


def kind_codes(cat: Text) -> np.ndarray:
    """The kind (index into KINDS, int8) of each row, from its category."""
    lookup = np.array(
        [KINDS.index(CATEGORY_KINDS.get(c, KIND_OTHER)) for c in cat.labels] + [-1], dtype=np.int8
    )
    return lookup[cat.codes]


# -- numpy columns to pandas columns, for what hands a DataFrame to figures and notebooks


def categorical(codes: np.ndarray, text):
    """A pandas Categorical of ``codes`` (-1 = missing) with a :class:`Text`'s labels."""
    return pd.Categorical.from_codes(
        codes, dtype=pd.CategoricalDtype(pd.Index(list(text.labels), dtype="str"))
    )


def kinds(codes: np.ndarray):
    """The ``kind`` column (int8 codes into KINDS) as the events table's categorical."""
    return pd.Categorical.from_codes(codes.astype(np.int64), dtype=schema.KIND_DTYPE)


def rows_frame(rows: list[dict], dtypes: dict):
    """Dict rows as a DataFrame: one column per key of ``dtypes``, of that dtype."""
    return pd.DataFrame({k: pd.array([r[k] for r in rows], dtype=t) for k, t in dtypes.items()})


def text_frame(table: dict[str, np.ndarray], text: str):
    """A DataFrame of numpy columns, the object column ``text`` as a str column."""
    return pd.DataFrame(
        {k: pd.Series(list(v), dtype=str) if k == text else v for k, v in table.items()}
    )


def nullable(values: np.ndarray):
    """An int64 column with :data:`NA_INT` for missing as a pandas Int64 array."""
    values = np.asarray(values, dtype=np.int64)
    return pd.arrays.IntegerArray(values.copy(), values == NA_INT)
