"""Mutated inputs for the boundary decoders (issue 27): OTLP/JSON exports, run folders and sweep folders.

Each mutator takes a ``random.Random`` (hypothesis's ``st.randoms()`` in the test
suite, a seeded one in ``benchmarks/fuzz_inputs.py``) and a real input, and makes
one to three changes of the kinds the issue's attack found: a value of another
type or out of range at any JSON path, a key deleted, duplicated or cyclic span
ids, times swapped or huge, bytes cut, flipped, not UTF-8 or nested 100,000 deep;
for run folders also table columns retyped, scaled, negated or nulled, rows
duplicated, files deleted, linked out or replaced by a FIFO.

:func:`judge` states the invariant: exit 0 (or 1, a measured failure) with
strict JSON on stdout, or exit 2 with one line on stderr; never 3, never a traceback.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
BASE_RUN = REPO / "data" / "runs" / "tabular-cpu-bs4-fp32"
OUTCOMES = ("ok", "clean_error", "crash")

ODD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    7,
    2**31,
    2**63 - 1,
    2**63,
    2**64,
    10**30,
    -(2**63) - 1,
    1e300,
    -1e300,
    0.5,
    -0.0,
    1e-300,
    "",
    "x",
    "9" * 30,
    "-5",
    "1e3",
    "STATUS_CODE_ERROR",
    "ERROR",
    "\u0000",
    "é" * 3,
    [],
    [1, "a"],
    {},
    {"a": 1},
    {"stringValue": 5},
    [[[[]]]],
]


# -- generic JSON mutation -------------------------------------------------------------------------------------


def odd_value(rnd: random.Random) -> Any:
    """A fresh copy of one of :data:`ODD_VALUES` (never the shared object: a later change could make a cycle)."""
    return copy.deepcopy(rnd.choice(ODD_VALUES))


def json_paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indices) in a JSON value, the root included."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += json_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += json_paths(v, (*prefix, i))
    return out


def _parent(doc: Any, path: tuple) -> tuple[Any, Any]:
    node = doc
    for key in path[:-1]:
        node = node[key]
    return node, path[-1]


def mutate_value(doc: Any, rnd: random.Random) -> Any:
    """One change at a random path: replace with an odd value, delete, duplicate a list item, or nest."""
    paths = [p for p in json_paths(doc) if p]
    if not paths:
        return odd_value(rnd)
    path = rnd.choice(paths)
    node, key = _parent(doc, path)
    op = rnd.randrange(5)
    if op <= 1:
        node[key] = odd_value(rnd)
    elif op == 2:
        del node[key]
    elif op == 3 and isinstance(node, list):
        node.insert(key, json.loads(json.dumps(node[key])))
    else:
        node[key] = [node[key]] if rnd.random() < 0.5 else {"value": node[key]}
    return doc


# -- OTLP/JSON exports ---------------------------------------------------------------------------------------


def _spans(doc: Any) -> list[dict]:
    def items(obj: Any, key: str) -> list:
        value = obj.get(key) if isinstance(obj, dict) else None
        return value if isinstance(value, list) else []

    return [
        s
        for resource in items(doc, "resourceSpans")
        for scope in items(resource, "scopeSpans")
        for s in items(scope, "spans")
        if isinstance(s, dict)
    ]


def mutate_span_tree(doc: Any, rnd: random.Random) -> Any:
    """One change to the tree: a span its own parent, two spans each other's, a duplicate id, times swapped."""
    spans = _spans(doc)
    if len(spans) < 2:
        return mutate_value(doc, rnd)
    a, b = rnd.sample(spans, 2)
    op = rnd.randrange(5)
    if op == 0:
        a["parentSpanId"] = a.get("spanId")
    elif op == 1:
        a["parentSpanId"], b["parentSpanId"] = b.get("spanId"), a.get("spanId")
        b["traceId"] = a.get("traceId")
    elif op == 2:
        b["spanId"], b["traceId"] = a.get("spanId"), a.get("traceId")
    elif op == 3:
        a["startTimeUnixNano"], a["endTimeUnixNano"] = (
            a.get("endTimeUnixNano"),
            a.get("startTimeUnixNano"),
        )
    else:
        a["endTimeUnixNano"] = (
            str(int(str(a.get("endTimeUnixNano", "0")).strip() or 0) * rnd.choice((10, 10**6)))
            if str(a.get("endTimeUnixNano", "")).isdigit()
            else a.get("endTimeUnixNano")
        )
    return doc


def mutate_bytes(raw: bytes, rnd: random.Random) -> bytes:
    """Damage the file's bytes: cut, flip a byte, invalid UTF-8, UTF-16, deep nesting, NaN/Infinity."""
    op = rnd.randrange(6)
    if op == 0:
        return raw[: rnd.randrange(len(raw) + 1)]
    if op == 1 and raw:
        i = rnd.randrange(len(raw))
        return raw[:i] + bytes([rnd.randrange(256)]) + raw[i + 1 :]
    if op == 2:
        i = rnd.randrange(len(raw) + 1)
        return raw[:i] + b"\xff\xfe\xc3" + raw[i:]
    if op == 3:
        return raw.decode("utf-8", "replace").encode("utf-16")
    if op == 4:
        depth = rnd.choice((1_000, 100_000))
        return b"[" * depth + raw + b"]" * depth
    return raw.replace(
        b'"endTimeUnixNano": ',
        rnd.choice((b'"endTimeUnixNano": NaN, "x": ', b'"endTimeUnixNano": Infinity, "x": ')),
        1,
    )


def mutated_otlp(text: str, rnd: random.Random) -> bytes:
    """A mutated OTLP/JSON export (one JSON object per line in ``text``)."""
    docs = [json.loads(line) for line in text.splitlines() if line.strip()]
    for _ in range(rnd.randint(1, 3)):
        k = rnd.randrange(len(docs))
        docs[k] = (mutate_span_tree if rnd.random() < 0.4 else mutate_value)(docs[k], rnd)
    raw = "\n".join(json.dumps(d) for d in docs).encode()
    return mutate_bytes(raw, rnd) if rnd.random() < 0.15 else raw


# -- run folders ---------------------------------------------------------------------------------------------


def _table_change(df: pd.DataFrame, rnd: random.Random) -> pd.DataFrame:
    if not len(df.columns):
        return df
    col = rnd.choice(list(df.columns))
    op = rnd.randrange(8)
    if op == 0:
        return df.drop(columns=[col])
    if op == 1:
        df[col] = df[col].astype(str)
    elif op == 2 and df[col].dtype.kind in "iu":
        df[col] = df[col] * rnd.choice((-1, 0, 50, 2**40))
    elif op == 3 and len(df):
        values = df[col].astype(object)
        values.iloc[rnd.randrange(len(values))] = None
        df[col] = values
    elif op == 4 and df[col].dtype.kind in "iu":
        df[col] = df[col].astype("float64") + 0.5
    elif op == 5:
        return pd.concat([df, df.iloc[: rnd.randint(1, 3)]], ignore_index=True)
    elif op == 6 and df[col].dtype.kind in "iu":
        df[col] = 2**62
    else:
        return df.iloc[: rnd.randrange(len(df) + 1)]
    return df


def mutate_run_folder(root: Path, rnd: random.Random) -> None:
    """One to three changes to a copy of a run folder (run.json, the two tables, the files themselves)."""
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(10)
        if op <= 3 and (root / "run.json").is_file() and not (root / "run.json").is_symlink():
            try:
                meta = json.loads((root / "run.json").read_text())
            except ValueError:
                continue
            (root / "run.json").write_text(json.dumps(mutate_value(meta, rnd)))
        elif op <= 6:
            name = rnd.choice(("requests.parquet", "stages.parquet"))
            path = root / name
            try:
                df = pd.read_parquet(path)
            except Exception:  # noqa: BLE001 - an earlier change made it unreadable: leave it so
                continue
            _table_change(df, rnd).to_parquet(path, index=False)
        elif op == 7:
            name = rnd.choice(("run.json", "requests.parquet", "stages.parquet"))
            if (root / name).exists():
                (root / name).unlink()
        elif op == 8:
            name = rnd.choice(("run.json", "requests.parquet", "stages.parquet"))
            if (root / name).is_file():
                outside = root.parent / f"outside-{name}"
                shutil.move(root / name, outside)
                os.symlink(outside, root / name)
        else:
            name = rnd.choice(("run.json", "requests.parquet", "stages.parquet"))
            path = root / name
            if path.is_file():
                data = path.read_bytes()
                path.write_bytes(data[: rnd.randrange(len(data) + 1)])


# -- sweep folders (load --sweep) ---------------------------------------------------------------------------

BASE_SWEEP = (
    REPO / "tests" / "support" / "sweeps" / "sweep.json"
)  # a served sweep of 4 rates (benchmarks/bench_sweep)
SWEEP_ODD_RUNS = [
    "../outside",
    "/etc",
    "",
    "a/../../b",
    "point-00-rate-25/../../x",
    "\\\\server\\share",
    ".",
]


def sweep_folder(dest: Path, *, with_runs: bool = False) -> Path:
    """A sweep folder at ``dest``: :data:`BASE_SWEEP`, and with ``with_runs`` each point's folder (a copy of
    :data:`BASE_RUN`, so that ``audit SWEEP`` has runs to read)."""
    dest.mkdir(parents=True)
    shutil.copyfile(BASE_SWEEP, dest / "sweep.json")
    if with_runs:
        for p in json.loads(BASE_SWEEP.read_text())["points"]:
            shutil.copytree(BASE_RUN, dest / p["run"])
    return dest


def mutate_sweep_doc(doc: Any, rnd: random.Random) -> Any:
    """One change that a sweep file's readers care about, else a generic :func:`mutate_value`."""
    points = doc.get("points") if isinstance(doc, dict) else None
    points = [p for p in points if isinstance(p, dict)] if isinstance(points, list) else []
    plan = doc.get("plan") if isinstance(doc, dict) else None
    op = rnd.randrange(8)
    if op == 0 and points:
        rnd.choice(points)["run"] = rnd.choice(SWEEP_ODD_RUNS)
    elif op == 1 and points:
        rnd.choice(points)[
            rnd.choice(("rate_rps", "concurrency", "p50_ms", "p99_ms", "achieved_rps"))
        ] = rnd.choice((None, 0, -1, 0.0, 1e308, "1", True))
    elif op == 2 and isinstance(plan, dict):
        plan[rnd.choice(("parameter", "values", "sla_ms", "window_s", "max_windows"))] = rnd.choice(
            ("concurrency", "auto", "speed", None, 0, [], [-1.0], 1e308)
        )
    elif op == 3 and isinstance(doc, dict):
        doc[rnd.choice(("knee", "prediction", "policy", "stopped"))] = rnd.choice(
            (
                None,
                {},
                {"source": None},
                {"point": 0, "offered_rps": 1.0, "achieved_rps": 1.0, "p99_ms": -1},
                5,
                "x",
            )
        )
    else:
        mutate_value(doc, rnd)
    return doc


def mutated_sweep(rnd: random.Random) -> bytes:
    """The bytes of a mutated ``sweep.json``: one to three changes, sometimes damaged bytes or NaN/Infinity."""
    doc = json.loads(BASE_SWEEP.read_text())
    for _ in range(rnd.randint(1, 3)):
        doc = (mutate_sweep_doc if rnd.random() < 0.6 else mutate_value)(doc, rnd)
    raw = json.dumps(doc, indent=1).encode()
    if rnd.random() < 0.1:
        return raw.replace(
            b'"p99_ms": ', rnd.choice((b'"p99_ms": NaN, "x": ', b'"p99_ms": -Infinity, "x": ')), 1
        )
    return mutate_bytes(raw, rnd) if rnd.random() < 0.1 else raw


def mutate_sweep_folder(root: Path, rnd: random.Random) -> None:
    """Mutate ``root/sweep.json`` (made by :func:`sweep_folder`); now and then delete it or make it a link out."""
    target = root / "sweep.json"
    target.write_bytes(mutated_sweep(rnd))
    if rnd.random() < 0.03:
        outside = root.parent / "outside-sweep.json"
        shutil.move(target, outside)
        os.symlink(outside, target)


# -- the invariant -------------------------------------------------------------------------------------------


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``workbench.cli.main(argv)`` in process: ``(exit code, stdout, stderr)``; an escaping exception is exit 3."""
    from workbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - what the invariant forbids, reported as a crash
            err.write(f"escaped: {type(exc).__name__}: {exc}\n")
            rc = 3
    return rc, out.getvalue(), err.getvalue()


def judge(rc: int, out: str, err: str) -> tuple[str, str]:
    """``(outcome, why)``: ok (exit 0/1, strict JSON), clean_error (exit 2, one line) or crash."""
    if rc in (0, 1):
        try:
            json.loads(out, parse_constant=_refuse)
        except ValueError as exc:
            return "crash", f"exit {rc} but stdout is not strict JSON: {exc}"
        return "ok", ""
    if rc == 2:
        if err.count("\n") != 1 or "Traceback" in err:
            return "crash", f"exit 2 but not one line: {err[:300]!r}"
        return "clean_error", ""
    return "crash", f"exit {rc}: {err.strip()[:300]}"


def _refuse(name: str):
    raise ValueError(f"{name} in the output")
