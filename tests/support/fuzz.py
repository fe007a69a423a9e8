"""A seeded trace fuzzer: broken and odd variants of real traces, and a judge of what the workbench made of each.

Variant ``i`` of seed ``s`` is built from ``random.Random(f"{s}-{i}")`` alone, so any
variant can be rebuilt by its number. Families (one per kind of damage seen in the
field, issue 11) cycle with ``i``. Each variant is judged by :func:`judge`:

``loaded``        loaded and analyzed, and every invariant holds
``clean_error``   a :class:`~workbench.errors.WorkbenchError` (one line, exit 2 in the CLI)
``crash``         any other exception (through the CLI: an exit code other than 0 or 2)
``wrong_result``  loaded, but an invariant fails: NaN/Infinity in the JSON report, a
                  negative duration, span or busy time, busy > span, an idle fraction
                  outside [0, 1], step or stream parts that do not add up

The judge lives in :mod:`tests.support.fuzz_judge`. Used by ``tests/trace/test_fuzz.py``
(1,000 variants) and ``benchmarks/fuzz_traces.py`` (10,000).
"""

from __future__ import annotations

import codecs
import copy
import gzip
import json
import math
import random
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from .synthetic import example_trace

FAMILIES = (
    "truncated_gzip",
    "corrupt_gzip",
    "truncated_json",
    "byte_flip",
    "wrong_types",
    "missing_fields",
    "nan_inf",
    "huge_numbers",
    "duplicated_keys",
    "deep_nesting",
    "unicode",
    "invalid_utf8",
    "utf16_bom",
    "dangling_flows",
    "profiler_steps",
    "zero_duration_gpu",
    "time_range",
    "random_events",
)
FIELDS = ("ph", "name", "cat", "ts", "dur", "pid", "tid", "args")
ARG_KEYS = ("correlation", "device", "stream", "bytes", "External id", "correlation id")
ODD_VALUES = (
    None,
    True,
    False,
    0,
    -1,
    1.5,
    "12",
    "abc",
    "",
    "0x1f",
    [1],
    {"a": 1},
    2**64,
    -(2**70),
    1e300,
)
HUGE_TEXT = (
    "1e400",
    "-1e400",
    "9223372036854775807",
    "18446744073709551616",
    "1" * 30,
    "0." + "9" * 40,
    "4611686018427387.904",
    "-4611686018427388",
    "1e-400",
    "123456789012345678901234567890.5",
)
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")


@dataclass(frozen=True)
class Base:
    """A small trace the variants start from: its name and parsed JSON (a dict with ``traceEvents``)."""

    name: str
    doc: dict


@dataclass(frozen=True)
class Variant:
    index: int
    family: str
    base: str
    data: bytes
    suffix: str  # ".json" or ".json.gz"

    def write(self, folder: Path) -> Path:
        path = Path(folder) / f"{self.index:05d}-{self.family}{self.suffix}"
        path.write_bytes(self.data)
        return path


def default_bases(root: Path | None = None) -> list[Base]:
    """Small real traces of the checkout (``tests/data/traces``, ``data/traces`` files under 200 KB)
    cut to 300 events, and the synthetic example trace in both schemas and for ROCm."""

    root = Path(__file__).resolve().parents[2] if root is None else Path(root)
    files = sorted(
        p
        for folder in ("tests/data/traces", "data/traces")
        for p in (root / folder).glob("*.json*")
        if p.stat().st_size < 200_000
    )
    synthetic = {
        "example": example_trace(),
        "example-2021": example_trace(schema="2021"),
        "example-rocm": example_trace(rocm=True),
    }
    return [load_base(p) for p in files] + [
        Base(k, json.loads(b.to_json())) for k, b in synthetic.items()
    ]


def load_base(path: Path, max_events: int = 300) -> Base:
    """A real trace cut to its first ``max_events`` complete events by start (metadata events kept)."""
    data = Path(path).read_bytes()
    doc = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    events = doc["traceEvents"]
    complete = sorted(
        (e for e in events if e.get("ph") == "X"), key=lambda e: float(e.get("ts", 0))
    )[:max_events]
    last = max((float(e["ts"]) for e in complete), default=0.0)
    rest = [e for e in events if e.get("ph") != "X" and float(e.get("ts", 0) or 0) <= last]
    return Base(Path(path).name, {**doc, "traceEvents": rest + complete})


def variants(bases: list[Base], count: int, seed: int = 0, start: int = 0):
    """``count`` variants (numbers ``start`` ...), families in turn, bases drawn by each variant's rng."""
    for index in range(start, start + count):
        yield variant(bases, index, seed)


def variant(bases: list[Base], index: int, seed: int = 0) -> Variant:
    rng = random.Random(f"{seed}-{index}")
    family = FAMILIES[index % len(FAMILIES)]
    base = rng.choice(bases)
    data, suffix = MUTATORS[family](rng, copy.deepcopy(base.doc))
    return Variant(index, family, base.name, data, suffix)


# --- mutators: (rng, doc) -> (bytes, suffix) ---------------------------------------------------


def _text(doc, **kw) -> bytes:
    return json.dumps(doc, **kw).encode()


def _events(doc: dict, rng: random.Random, k: int = 1, complete: bool = True) -> list[dict]:
    pool = [
        e
        for e in doc["traceEvents"]
        if isinstance(e, dict) and (e.get("ph") == "X" or not complete)
    ]
    return rng.sample(pool, min(k, len(pool))) if pool else []


def _truncated_gzip(rng, doc):
    packed = gzip.compress(_text(doc), mtime=0)
    return packed[: rng.randrange(len(packed))], ".json.gz"


def _corrupt_gzip(rng, doc):
    packed = bytearray(gzip.compress(_text(doc), mtime=0))
    how = rng.randrange(4)
    if how == 0:  # flipped bytes in the deflate data or the trailer
        for _ in range(rng.randint(1, 4)):
            packed[rng.randrange(10, len(packed))] ^= 1 << rng.randrange(8)
    elif how == 1:
        packed += bytes(rng.randrange(256) for _ in range(rng.randint(1, 20)))  # trailing garbage
    elif how == 2:
        packed[rng.randrange(2, 10)] = rng.randrange(256)  # header damage
    else:
        packed += gzip.compress(b"]}", mtime=0)  # a second member that makes the JSON invalid
    return bytes(packed), ".json.gz"


def _truncated_json(rng, doc):
    text = _text(doc)
    return text[: rng.randrange(len(text))], ".json"


def _byte_flip(rng, doc):
    text = bytearray(_text(doc))
    for _ in range(rng.randint(1, 8)):
        text[rng.randrange(len(text))] = rng.randrange(256)
    return bytes(text), ".json"


def _wrong_types(rng, doc):
    for event in _events(doc, rng, rng.randint(1, 3)):
        field = rng.choice(FIELDS + ARG_KEYS)
        target = (
            event.setdefault("args", {})
            if field in ARG_KEYS and isinstance(event.get("args"), dict)
            else event
        )
        target[field] = rng.choice(ODD_VALUES)
    if rng.random() < 0.1:
        doc[rng.choice(["deviceProperties", "displayTimeUnit", "traceName", "schemaVersion"])] = (
            rng.choice(ODD_VALUES)
        )
    return _text(doc), ".json"


def _missing_fields(rng, doc):
    if rng.random() < 0.05:
        return _text({k: v for k, v in doc.items() if k != "traceEvents"}), ".json"
    for event in _events(doc, rng, rng.randint(1, 5), complete=rng.random() < 0.8):
        for field in rng.sample(FIELDS, rng.randint(1, 3)):
            event.pop(field, None)
    return _text(doc), ".json"


def _nan_inf(rng, doc):
    for event in _events(doc, rng, rng.randint(1, 3)):
        field = rng.choice(("ts", "dur", "pid", "tid", "args"))
        value = rng.choice((math.nan, math.inf, -math.inf))
        if field == "args":
            event.setdefault("args", {})[rng.choice(ARG_KEYS)] = value
        else:
            event[field] = value
    return _text(doc, allow_nan=True), ".json"


def _raw_values(rng, doc, fields, texts) -> bytes:
    """Put raw JSON number texts (exact, any size) into fields of a few events."""
    marks = {}
    for n, event in enumerate(_events(doc, rng, rng.randint(1, 4))):
        mark = f"@@{n}@@"
        field = rng.choice(fields)
        target = (
            event.setdefault("args", {})
            if field in ARG_KEYS and isinstance(event.get("args"), dict)
            else event
        )
        target[field] = mark
        marks[mark] = rng.choice(texts)
    text = _text(doc)
    for mark, raw in marks.items():
        text = text.replace(f'"{mark}"'.encode(), raw.encode())
    return text


def _huge_numbers(rng, doc):
    return _raw_values(rng, doc, ("ts", "dur", "pid", "tid") + ARG_KEYS, HUGE_TEXT), ".json"


def _duplicated_keys(rng, doc):
    text = _text(doc)
    for event in _events(doc, rng, rng.randint(1, 3)):
        field = rng.choice(FIELDS)
        dupe = json.dumps({field: rng.choice(ODD_VALUES + (event.get(field, 1),))})[1:-1]
        old = json.dumps(event).encode()
        text = text.replace(old, old[:-1] + b", " + dupe.encode() + b"}", 1)
    return text, ".json"


def _deep_nesting(rng, doc):
    depth = rng.choice((64, 500, 999, 1001, 5000, 100_000))
    nested = (
        "[" * depth + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
    )
    where = rng.randrange(3)
    if where == 0:
        doc["deepKey"] = "@@DEEP@@"
    elif where == 1:
        doc["traceEvents"].insert(rng.randrange(len(doc["traceEvents"]) + 1), "@@DEEP@@")
    else:
        (_events(doc, rng) or [{}])[0].setdefault("args", {})["deep"] = "@@DEEP@@"
    return _text(doc).replace(b'"@@DEEP@@"', nested.encode()), ".json"


UNICODE_NAMES = (
    "caf\u00e9",
    "\u4e2d\u6587\u540d",
    "\U0001f600\U0001f680",
    "\u202eright-to-left",
    "zero\u200bwidth",
    "e\u0301\u0301",
    "nul\x00inside",
    "\ufeffbom",
    "\\ud800",
    "tab\tnew\nline",
    "",
)


def _unicode(rng, doc):
    for event in _events(doc, rng, rng.randint(1, 6)):
        event[rng.choice(("name", "cat", "pid", "tid"))] = rng.choice(UNICODE_NAMES) * rng.randint(
            1, 3
        )
    text = _text(doc, ensure_ascii=rng.random() < 0.5)
    if rng.random() < 0.2:  # a lone surrogate escape, valid JSON text but not valid Unicode
        text = text.replace(b'"name": "', b'"name": "\\udc80', 1)
    return text, ".json"


def _invalid_utf8(rng, doc):
    text = _text(doc)
    spots = [i + 1 for i in range(len(text)) if text[i : i + 1] == b'"']
    cut = rng.choice(spots) if spots else 0
    junk = rng.choice(
        (b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80")
    )
    return text[:cut] + junk + text[cut:], ".json"


def _utf16_bom(rng, doc):
    text = _text(doc, ensure_ascii=False).decode()
    encoding = rng.choice(("utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"))
    data = text.encode(encoding)
    if rng.random() < 0.2:
        data = data[:-1]  # an odd byte count
    if rng.random() < 0.2:
        data = codecs.BOM_UTF16_LE + text.encode("utf-8")  # a BOM that lies
    return data, ".json"


def _dangling_flows(rng, doc):
    events = doc["traceEvents"]
    flows = [e for e in events if isinstance(e, dict) and e.get("ph") in ("s", "f", "t")]
    for e in rng.sample(flows, len(flows) // 2) if flows else []:
        events.remove(e)
    for _ in range(rng.randint(1, 10)):
        ph = rng.choice(("s", "f", "t", "B", "E", "b", "e"))
        events.append(
            {
                "ph": ph,
                "id": rng.randrange(10**6),
                "cat": "ac2g",
                "name": "ac2g",
                "pid": 0,
                "tid": 0,
                "ts": rng.randrange(10**6),
                **({"bp": "e"} if ph == "f" else {}),
            }
        )
    for e in _events(
        doc, rng, rng.randint(0, 3)
    ):  # launches whose kernels are gone, kernels without launches
        e.setdefault("args", {})["correlation"] = rng.randrange(10**9)
    return _text(doc), ".json"


def _profiler_steps(rng, doc):
    numbers = (
        "0",
        "1",
        "007",
        "12345678901234567890",
        "9" * 30,
        "-1",
        "1.5",
        "",
        "18446744073709551615",
    )
    hosts = [
        e
        for e in doc["traceEvents"]
        if isinstance(e, dict)
        and e.get("ph") == "X"
        and e.get("cat") in ("cpu_op", "user_annotation", "Operator", None)
    ]
    for e in rng.sample(hosts, min(len(hosts), rng.randint(1, 4))):
        e["name"] = "ProfilerStep#" + rng.choice(numbers)
    return _text(doc), ".json"


def _zero_duration_gpu(rng, doc):
    gpu = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("cat") in GPU_CATS]
    same_ts = rng.random() < 0.5
    everything = rng.random() < 0.2
    for e in doc["traceEvents"] if everything else gpu:
        if isinstance(e, dict) and e.get("ph") == "X":
            e["dur"] = 0
            if same_ts and gpu:
                e["ts"] = gpu[0].get("ts", 0)
    if not gpu:
        doc["traceEvents"].append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": 1,
                "dur": 0,
                "args": {"device": 0, "stream": 7, "correlation": 1},
            }
        )
    return _text(doc), ".json"


def _time_range(rng, doc):
    shift = rng.choice(
        (
            4_611_686_018_427_387,
            -4_611_686_018_427_387,
            4_611_686_018_427_000,
            9_223_372_036_854_775,
            -9_223_372_036_854_775,
            10**12,
            10**16,
        )
    )
    victims = doc["traceEvents"] if rng.random() < 0.5 else _events(doc, rng)
    for e in victims:
        if (
            isinstance(e, dict)
            and isinstance(e.get("ts"), (int, float))
            and not isinstance(e.get("ts"), bool)
        ):
            e["ts"] = "@@TS%s@@" % e["ts"]
    text = _text(doc).decode()
    text = _shift_marks(text, shift)
    return text.encode(), ".json"


def _shift_marks(text: str, shift_us: int) -> str:
    return re.sub(r'"@@TS([^@]+)@@"', lambda m: str(Decimal(m.group(1)) + shift_us), text)


def _random_events(rng, doc):
    kinds = (
        "cpu_op",
        "cuda_runtime",
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "user_annotation",
        "cuda_sync",
        5,
        None,
    )

    def value():
        return rng.choice((rng.randrange(-5, 10**7), rng.random() * 10**6, rng.choice(ODD_VALUES)))

    events = []
    for _ in range(rng.randint(0, 30)):
        event = {
            "ph": rng.choice(("X", "X", "X", "M", "i", "s", 3)),
            "cat": rng.choice(kinds),
            "name": rng.choice(("aten::mm", "cudaLaunchKernel", "k", "ProfilerStep#1", "", 7)),
            "pid": rng.choice((0, 1, "1", None)),
            "tid": rng.choice((7, 1, "stream 7", None)),
            "ts": rng.randrange(0, 10**6),
            "dur": rng.randrange(0, 10**4),
            "args": {k: value() for k in rng.sample(ARG_KEYS, rng.randint(0, 3))},
        }
        for field in rng.sample(FIELDS, rng.choice((0, 0, 0, 0, 1, 2))):
            if rng.random() < 0.5:
                event[field] = value()
            else:
                event.pop(field)
        events.append(event)
    return _text({"traceEvents": events}), ".json"


MUTATORS = {name: globals()[f"_{name}"] for name in FAMILIES}
