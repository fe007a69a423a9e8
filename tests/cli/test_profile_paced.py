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
    paced = ["--requests", "300", "--utilization", "0.3", "--min-duration", "3"]
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
