"""A paced profile sees what a back-to-back one cannot: a lock a background thread holds every 250 ms."""

import json

from workbench.cli import main

SNAPSHOT = """
import itertools, random, threading, time
from workbench import Pipeline

def build(config):
    lock, cache = threading.Lock(), {"weights": list(range(64))}

    def snapshot():  # a cache snapshot: holds the lock 20-40 ms every 250 ms, for 60 s
        rng, end = random.Random(0), time.monotonic() + 60
        while time.monotonic() < end:
            time.sleep(0.25)
            with lock:
                time.sleep(rng.uniform(0.020, 0.040))

    threading.Thread(target=snapshot, daemon=True).start()
    p = Pipeline("snapshot", items=lambda: itertools.count())

    def fetch(batch):
        with lock:
            return [cache["weights"]] * len(batch)

    def score(batch):  # the request's own work: 0.5 ms of compute
        t = time.perf_counter()
        while time.perf_counter() - t < 0.0005:
            pass
        return batch

    p.add("fetch", fetch)
    p.add("score", score, role="compute")
    return p
"""


def test_a_paced_profile_names_the_waiting_stage_and_says_the_tail_comes_from_time(
    tmp_path, capsys
):
    pipe = tmp_path / "snapshot_pipe.py"
    pipe.write_text(SNAPSHOT)
    out = tmp_path / "run"
    argv = ["profile", "--pipeline", f"{pipe}:build", "--out", str(out), "--traced", "0"]
    paced = [
        "--requests",
        "100",
        "--utilization",
        "0.3",
        "--min-duration",
        "3",
    ]  # 50 ms closed loop
    assert main(argv + paced + ["--max-duration", "8", "--json"]) == 0
    capsys.readouterr()
    assert main(["audit", str(out), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["runs"][0]["findings"]
    by_kind = {f["kind"]: f for f in found}
    assert by_kind["time"]["stage"] == "fetch"
    assert (
        "the tail comes from time, not from the request's own work" in by_kind["time"]["evidence"]
    )
    assert by_kind["periodic"]["stage"] == "fetch"
    assert 230 <= by_kind["periodic"]["numbers"]["period_ms"] <= 330  # 250 ms + the 20-40 ms hold
    assert "compute" not in by_kind
    tried = [a.get("try") or {} for f in found for a in f["actions"]]
    assert not [t for t in tried if t.get("precision") in ("bf16", "int8")]


def test_the_text_output_says_the_tail_comes_from_time_when_paced_p99_is_twice_the_closed_one(
    capsys,
):
    from workbench.cli.profile import print_pacing

    pacing = {
        "rate_rps": 100.0,
        "capacity_rps": 400.0,
        "wall_s": 10.2,
        "lag_p99_ms": 0.25,
        "closed_loop": {"count": 600, "p99_ms": 4.0},
        "paced": {"count": 1100, "p99_ms": 31.0},
        "p99_over_closed_loop": 7.75,
    }
    print_pacing(pacing)
    assert capsys.readouterr().out == (
        "\npaced at 100 requests/s (25% of the closed-loop capacity) for 10.2 s: p99 31 ms against "
        "4 ms closed loop (600 requests back to back); send lag p99 0.25 ms\n"
        "the tail comes from time, not from the request's own work (workbench audit names where)\n"
    )
    print_pacing(pacing | {"p99_over_closed_loop": 1.5})
    assert "the tail comes from time" not in capsys.readouterr().out
