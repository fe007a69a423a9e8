"""The real inputs the fuzz suite mutates, one of each thing a reader of the workbench reads (issue 35).

:data:`RECORDED` holds them (about 150 KB), made by :func:`build_bases`
(``python -m tests.support.fuzz_bases`` from the repository root makes them again): a run folder of
every kind (``profile``: a shipped run; ``load``: an in-process load; ``simulation``: ``simulate
--out``; ``served`` and ``served_server``: the client's and the server's run of a real ``serve``;
``ingested``: ``ingest-otel --out``), a ``compare --json`` file (gate's reader), an arrivals CSV, a
payload file and the OTLP export. The mutators of the files that :mod:`tests.support.input_fuzz`
does not cover live here too; each returns the bytes to write.
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support.fuzz_runner import REPO, run_in_process
from tests.support.input_fuzz import BASE_RUN, mutate_bytes, mutate_value, odd_value

RECORDED = REPO / "tests" / "support" / "fuzz_inputs_recorded"
SERVICE_RUNS = [
    f"data/runs/tabular-cpu-bs{n}-fp32" for n in (1, 2, 4, 8)
]  # from the repository root
SERVICE_PATHS = [str(REPO / p) for p in SERVICE_RUNS]
RUN_KINDS = ("profile", "load", "simulation", "served", "served_server", "ingested")


@dataclass(frozen=True)
class Bases:
    folder: Path
    runs: dict[str, Path]  # RUN_KINDS -> run folder
    compare_file: Path
    arrivals: Path
    payloads: Path
    otlp: Path


def bases(folder: Path = RECORDED) -> Bases:
    """The base inputs recorded in ``folder``."""
    runs = {kind: folder / kind for kind in RUN_KINDS} | {"profile": BASE_RUN}
    return Bases(
        folder,
        runs,
        folder / "compare.json",
        folder / "arrivals.csv",
        folder / "payloads.txt",
        folder / "spans.jsonl",
    )


def build_bases(folder: Path) -> Bases:
    """Make every base input missing under ``folder``, run from the repository root (15 s on a quiet
    machine, 75 s at load 10, most of it the served run's two processes)."""
    folder.mkdir(parents=True, exist_ok=True)
    _made(folder / "load", ["load", "--example", "tabular", "--rate", "400", "--requests", "40"])
    _made(
        folder / "simulation",
        ["simulate", "--service", *SERVICE_RUNS, "--rate", "200", "--requests", "300"],
    )
    otlp = folder / "spans.jsonl"
    if not otlp.is_file():
        from tests.otel.test_ingest import go_export

        otlp.write_text(go_export())
    _made(
        folder / "ingested", ["ingest-otel", str(otlp), "--stage-map", "db.query=db", "auth=auth"]
    )
    if not (folder / "served" / "run.json").is_file():
        served_runs(folder / "served", folder / "served_server")
    made = bases(folder)
    if not made.compare_file.is_file():
        rc, out, err = run_in_process(["compare", SERVICE_RUNS[2], SERVICE_RUNS[3], "--json"])
        assert rc == 0, err
        made.compare_file.write_text(out)
    made.arrivals.write_text("arrival_ms\n" + "".join(f"{1.5 * i:g}\n" for i in range(40)))
    made.payloads.write_bytes(b"".join(json.dumps({"user": i}).encode() + b"\n" for i in range(20)))
    return made


def _made(out: Path, argv: list[str]) -> None:
    if (out / "run.json").is_file():
        return
    rc, _, err = run_in_process([*argv, "--out", str(out)])
    assert rc == 0 and (out / "run.json").is_file(), f"{argv}: exit {rc}: {err}"


def served_runs(client_out: Path, server_out: Path) -> None:
    """A real ``serve --example tabular`` on a free port, 30 requests of ``load --url`` (the client's run
    at ``client_out``), then SIGTERM: the server writes its run at ``server_out``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "workbench", "serve", "--example", "tabular", "--port", str(port)]
        + ["--out", str(server_out)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_healthy(url, server)
        rc, _, err = run_in_process(
            ["load", "--url", url, "--example", "tabular", "--rate", "100", "--requests", "30"]
            + ["--out", str(client_out)]
        )
        assert rc == 0, err
    finally:
        server.terminate()
        _, err = server.communicate(timeout=60)
    assert (server_out / "run.json").is_file(), err


def _wait_healthy(url: str, server: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read()
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"serve at {url} not healthy in {timeout_s:g} s")


def copy_run(src: Path, dest: Path) -> Path:
    return Path(shutil.copytree(src, dest, symlinks=True))


# -- mutators of the other files ----------------------------------------------------------------------------


def mutated_json_file(raw: bytes, rnd: random.Random) -> bytes:
    """One to three :func:`mutate_value` changes to a JSON document; sometimes its bytes damaged."""
    doc = json.loads(raw)
    for _ in range(rnd.randint(1, 3)):
        doc = mutate_value(doc, rnd)
    text = json.dumps(doc, indent=1).encode()
    if rnd.random() < 0.1:
        text = text.replace(
            b'_ratio": ', rnd.choice((b'_ratio": NaN, "x": ', b'_ratio": 1e400, "x": ')), 1
        )
    return mutate_bytes(text, rnd) if rnd.random() < 0.15 else text


ODD_CELLS = [
    "",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e400",
    "5e-324",
    "-1",
    "0x10",
    "1_0",
    "9" * 400,
    "é",
]
ARRIVAL_HEADERS = ["arrival_ns", "arrival_us", "arrival_ms", "arrival_s", "arrival_h", "", "ms"]


def mutated_arrivals(raw: bytes, rnd: random.Random) -> bytes:
    """An arrivals CSV with cells, rows, header or separators changed."""
    rows = [r.split(",") for r in raw.decode().splitlines()]
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(7)
        i = rnd.randrange(len(rows)) if rows else 0
        if op == 0 and rows:
            rows[i][0] = rnd.choice(ODD_CELLS)
        elif op == 1 and rows:
            rows[0] = [rnd.choice(ARRIVAL_HEADERS)]
        elif op == 2 and len(rows) > 2:
            rows[i], rows[-1] = rows[-1], rows[i]
        elif op == 3 and rows:
            rows[i] = rows[i] + [rnd.choice(ODD_CELLS)]
        elif op == 4:
            rows = rows[: rnd.randrange(len(rows) + 1)]
        elif op == 5 and rows:
            rows[i] = [f'"{rows[i][0]}', "x"]
        else:
            rows += [
                [rnd.choice(("1e15", "-1e15", "1e300", "0"))] for _ in range(rnd.randint(1, 3))
            ]
    text = "\n".join(",".join(r) for r in rows).encode()
    return mutate_bytes(text, rnd) if rnd.random() < 0.15 else text


def mutated_payloads(raw: bytes, rnd: random.Random) -> bytes:
    """A payload file (one request body per line) with lines emptied, huge, binary or odd JSON."""
    lines = raw.splitlines()
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(5)
        i = rnd.randrange(len(lines)) if lines else 0
        if op == 0:
            lines = [b" "] * rnd.randint(0, 3)
        elif op == 1 and lines:
            lines[i] = json.dumps(odd_value(rnd)).encode()
        elif op == 2 and lines:
            lines[i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 40))).replace(
                b"\n", b""
            )
        elif op == 3 and lines:
            lines[i] = b"x" * rnd.choice((10_000, 1_000_000))
        else:
            lines = lines[: rnd.randrange(len(lines) + 1)]
    return b"\n".join(lines)


if __name__ == "__main__":  # python -m tests.support.fuzz_bases: record the bases again
    import os

    os.chdir(REPO)
    shutil.rmtree(RECORDED, ignore_errors=True)
    print(build_bases(RECORDED.relative_to(REPO)))
