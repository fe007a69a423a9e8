"""Each audit rule on facts built in code, with its threshold on both sides."""

from __future__ import annotations

import pytest

from workbench.audit import rules
from workbench.audit.catalog import CATALOG


def stage(name, share, p50=1.0, p99=2.0):
    return {"name": name, "share": share, "p50_ms": p50, "p99_ms": p99}


def facts(
    stages, *, tail_shares=None, median_shares=None, trace=None, roles=None, gc=None, traced=1
):
    names = [s["name"] for s in stages]
    tail = {
        "sets": {
            "slowest_1pct": {"shares": tail_shares or {n: 0.0 for n in names}},
            "slowest_5pct": {"shares": tail_shares or {n: 0.0 for n in names}},
            "median": {"shares": median_shares or {n: 0.0 for n in names}},
        }
    }
    return {
        "budget": {"stages": stages},
        "tail": tail,
        "trace": trace,
        "roles": roles or {},
        "gc": gc,
        "traced_requests": traced,
    }


def kinds(found):
    return [(f["kind"], f["stage"]) for f in found]


def test_a_dominant_stage_is_a_finding_of_its_role_at_30_percent():
    f = facts([stage("hydrate", 0.30), stage("forward", 0.29), stage("serialize", 0.41)])
    assert kinds(rules.dominant_stages(f)) == [
        ("feature_io", "hydrate"),
        ("serialization", "serialize"),
    ]


def test_a_declared_role_wins_over_the_stage_name_and_unknown_names_need_one():
    f = facts([stage("lookup", 0.5), stage("mystery", 0.5)], roles={"lookup": "remote"})
    assert kinds(rules.dominant_stages(f)) == [("remote", "lookup")]
    f["roles"]["mystery"] = "compute"
    assert kinds(rules.dominant_stages(f)) == [("remote", "lookup"), ("compute", "mystery")]


def test_tail_needs_p99_five_times_p50_and_half_the_slowest_time():
    st = [stage("lookup", 0.2, p50=1.0, p99=5.0), stage("forward", 0.8, p50=1.0, p99=4.9)]
    f = facts(
        st,
        tail_shares={"lookup": 0.5, "forward": 0.5},
        median_shares={"lookup": 0.12, "forward": 0.88},
    )
    found = rules.tail_stages(f)
    assert kinds(found) == [("tail", "lookup")]
    assert found[0]["evidence"] == (
        "lookup's p99 is 5.0x its p50 and it holds 50% of the slowest 1 %'s time "
        "(median request: 12%)"
    )
    f["tail"]["sets"]["slowest_1pct"]["shares"]["lookup"] = 0.49
    assert rules.tail_stages(f) == []


def test_a_tail_finding_quotes_the_sampled_stacks_of_its_stage():
    st = [stage("hydrate", 0.5, p50=1.0, p99=30.0), stage("forward", 0.5)]
    f = facts(st, tail_shares={"hydrate": 0.9, "forward": 0.1})
    f["stacks"] = {
        "headline": "hydrate, 91 % of the slowest 1 % in redis read_response <- get_features "
        "(recommend.py:143); median 40 %"
    }
    found = rules.tail_stages(f)
    assert found[0]["evidence"].endswith(
        "; sampled stacks: hydrate, 91 % of the slowest 1 % in redis read_response "
        "<- get_features (recommend.py:143); median 40 %"
    )
    f["stacks"]["headline"] = "forward, 60 % of the slowest 1 % in torch linear; median 50 %"
    assert "sampled stacks" not in rules.tail_stages(f)[0]["evidence"]


def test_tail_uses_the_5_percent_set_when_the_run_is_too_short_for_1_percent():
    f = facts([stage("lookup", 0.2, p50=1.0, p99=9.0)], tail_shares={"lookup": 0.9})
    f["tail"]["sets"]["slowest_1pct"] = None
    assert "slowest 5 %" in rules.tail_stages(f)[0]["evidence"]


def test_queue_counts_both_waits_of_a_load_run():
    f = facts([stage("batch_wait", 0.2), stage("queue_wait", 0.1), stage("forward", 0.7)])
    assert kinds(rules.queue(f)) == [("queue", "batch_wait+queue_wait")]
    f["budget"]["stages"][1]["share"] = 0.09
    assert rules.queue(f) == []


def test_lowering_the_max_wait_is_advised_only_where_it_can_fix_the_wait():
    st = [stage("batch_wait", 0.05), stage("queue_wait", 0.6), stage("hydrate", 0.35)]
    st[0]["mean_ms"], st[1]["mean_ms"] = 2.0, 56.0
    f = facts(st) | {"policy": {"max_wait_ms": 2.0, "max_batch_size": 8}}
    queue = next(x for x in rules.findings(f) if x["kind"] == "queue")
    assert queue["numbers"]["wait_ms"] == 58.0 and queue["numbers"]["max_wait_ms"] == 2.0
    assert [a["title"] for a in queue["actions"]] == [
        "Add capacity (threads or instances) before the queue builds"
    ]
    assert "the max wait (2 ms) is already below the 58 ms they wait" in queue["evidence"]
    st[1]["mean_ms"] = 1.9  # 3.9 ms of wait: a 2 ms max wait is half of it, lowering it can help
    queue = next(x for x in rules.findings(f) if x["kind"] == "queue")
    assert (
        queue["actions"][0]["title"] == "Lower the batcher's max wait"
        and "already below" not in queue["evidence"]
    )


def blocking(share_of_wait, stage_name="hydrate"):
    return {
        "stage": stage_name,
        "share_of_wait": {stage_name: share_of_wait},
        "share_of_queue_wait": {stage_name: 0.9},
        "queue_wait_ns": 378_000_000,
        "blamed_ns": {stage_name: 332_000_000},
        "holders": [
            {"batch": 5, "requests": [10, 11], "stage": stage_name, "blocked_ns": 300_000_000},
            {"batch": 9, "requests": list(range(20, 27)), "stage": stage_name, "blocked_ns": 1},
            {"batch": 6, "requests": [12], "stage": "forward", "blocked_ns": 1},
        ],
    }


def test_head_of_line_names_the_stage_batches_and_requests_that_held_the_executor():
    f = facts([stage("queue_wait", 0.6), stage("hydrate", 0.3)]) | {"blocking": blocking(0.25)}
    found = rules.head_of_line(f)
    assert kinds(found) == [("head_of_line", "hydrate")]
    assert found[0]["evidence"] == (
        "closed batches waited 378 ms (summed over requests) for a busy executor; "
        "hydrate held it for 90% of that queue wait (25% of all batch and queue wait), "
        "most in batch 5 (requests 10, 11), batch 9 (requests 20, 21, 22, 23 and 3 more)"
    )
    assert found[0]["numbers"]["blocked_ms"] == 332.0 and found[0]["numbers"]["holders"] == [5, 9]
    hol = next(x for x in rules.findings(f) if x["kind"] == "head_of_line")
    assert hol["actions"][0]["title"].startswith("Take the slow path off the shared executor")
    f["blocking"] = blocking(0.2499)
    assert rules.head_of_line(f) == []
    assert rules.head_of_line(facts([stage("hydrate", 0.3)])) == []


def test_gc_pauses_while_serving_are_a_finding_at_a_tenth_of_the_p99():
    f = facts([stage("forward", 0.5)])
    f["budget"]["end_to_end"] = {"p99_ms": 200.0}
    f["serving_gc"] = {
        "mode": "default",
        "collections": 41,
        "pause_ms_total": 310.0,
        "pause_ms_max": 60.0,
    }
    found = rules.served_gc(f)
    assert kinds(found) == [("gc", None)] and found[0]["numbers"]["share"] == 0.3
    assert found[0]["evidence"] == (
        "while serving, 41 garbage collections paused the server 310 ms in all, the "
        "longest 60 ms (30% of the end-to-end p99; gc mode default)"
    )
    f["serving_gc"]["pause_ms_max"] = 19.9
    assert rules.served_gc(f) == []
    f["serving_gc"] = {
        "mode": "freeze",
        "collections": 0,
        "pause_ms_total": 0.0,
        "pause_ms_max": 0.0,
    }
    assert rules.served_gc(f) == []


def test_a_sampled_served_run_with_a_gc_wait_keeps_one_gc_finding_the_sampled_one():
    f = facts([stage("forward", 0.5)])
    f["budget"]["end_to_end"] = {"p99_ms": 200.0}
    f["serving_gc"] = {"mode": "default", "collections": 41, "pause_ms_total": 310.0}
    f["serving_gc"]["pause_ms_max"] = 60.0
    found = waits({"gc": 30.0, "cpu": 10.0})
    found["causes"] = [found["causes"][0] | {"class": "gc", "stage": "forward", "site": None}]
    found["gc"] = {
        "collections": 3,
        "pause_ms_total": 90.0,
        "pause_ms_max": 60.0,
        "generations": {"2": {"collections": 3, "pause_ms_total": 90.0}},
        "threads": {"executor-0": 90.0},
    }
    f["waits"] = found
    gcs = [x for x in rules.findings(f) if x["kind"] == "gc"]
    assert kinds(gcs) == [("gc", "forward")]  # served_gc's stage-less one is left out
    assert gcs[0]["evidence"].endswith(
        "3 collections paused 90 ms (gen 2: 3, 90 ms), longest 60 ms; triggered by "
        "'executor-0' 90 ms (gc mode default)"
    )
    found["causes"][0]["share"] = 0.2  # under WAIT_SHARE: no sampled finding, the served one stays
    assert kinds([x for x in rules.findings(f) if x["kind"] == "gc"]) == [("gc", None)]


def trace(launch_bound=False, pageable_bytes=0, sync_us=0.0, host_us=100.0):
    return {
        "launch_verdict": {"launch_bound": launch_bound, "sentence": "Launch-bound: forward"},
        "gpu": {"idle_fraction": 0.9},
        "kernels": {"count": 10},
        "memcpy": {
            "by_kind_and_host_memory": {
                "HtoD Pageable": {"bytes": pageable_bytes, "gb_per_s": 13.1},
                "HtoD Pinned": {"bytes": 10 << 20, "gb_per_s": 50.0},
            }
        },
        "stages": [
            {
                "stage": "forward",
                "host_us": host_us,
                "sync_us": sync_us,
                "launch_bound": launch_bound,
                "transfer_bytes": pageable_bytes,
            }
        ],
    }


def test_launch_follows_the_trace_verdict():
    assert kinds(rules.launch(facts([], trace=trace(launch_bound=True)))) == [("launch", "forward")]
    assert rules.launch(facts([], trace=trace())) == [] and rules.launch(facts([])) == []


def test_transfer_counts_only_pageable_bytes_per_traced_request():
    at = rules.PAGEABLE_BYTES_PER_REQUEST
    assert kinds(rules.transfer(facts([], trace=trace(pageable_bytes=3 * at), traced=3))) == [
        ("transfer", "forward")
    ]
    assert rules.transfer(facts([], trace=trace(pageable_bytes=3 * at - 1), traced=3)) == []


def test_sync_at_ten_percent_of_traced_host_time():
    assert kinds(rules.sync(facts([], trace=trace(sync_us=10.0)))) == [("sync", "forward")]
    assert rules.sync(facts([], trace=trace(sync_us=9.9))) == []


def test_gc_pauses_at_five_percent_of_the_slowest_requests():
    assert kinds(
        rules.gc_pauses(facts([], gc={"share_slowest_5pct": 0.05, "stage": "forward"}))
    ) == [("gc", "forward")]
    assert rules.gc_pauses(facts([], gc={"share_slowest_5pct": 0.049})) == []


def test_findings_carry_catalog_actions_and_every_kind_has_actions():
    f = facts([stage("forward", 0.9)], trace=trace(launch_bound=True))
    found = rules.findings(f)
    assert kinds(found) == [
        ("compute", "forward"),
        ("launch", "forward"),
    ]  # equal weight 0.9: rule order
    assert found[0]["actions"][0]["title"].startswith("Run the model in bf16")
    for kind in (
        "compute",
        "preprocess",
        "feature_io",
        "remote",
        "tail",
        "queue",
        "head_of_line",
        "launch",
        "transfer",
        "sync",
        "serialization",
        "gc",
    ):
        assert CATALOG[kind], kind


@pytest.mark.parametrize(
    "name, role",
    [("parse", "serialize"), ("hydrate", "io"), ("forward", "compute"), ("unknown", None)],
)
def test_default_roles_from_standard_stage_names(name, role):
    assert rules.stage_role(name) == role


def test_python_stacks_give_an_unnamed_stage_its_role_and_add_evidence():
    f = facts([stage("mystery", 0.6), stage("hydrate", 0.35)])
    f["libraries"] = {"mystery": {"sqlite3": 0.8, "json": 0.1}, "hydrate": {"redis": 0.7}}
    found = rules.dominant_stages(f)
    assert kinds(found) == [("feature_io", "mystery"), ("feature_io", "hydrate")]
    assert found[0]["evidence"].endswith("; 80% of its traced time is in sqlite3")
    f["libraries"] = {"mystery": {"sqlite3": 0.4}}
    assert kinds(rules.dominant_stages(f)) == [
        ("feature_io", "hydrate")
    ]  # 40 %: not enough to name a role


def test_evidence_overrules_the_name_and_the_finding_says_so_but_a_declared_role_wins():
    f = facts([stage("decode", 0.7)])
    f["libraries"] = {"decode": {"torch": 1.0}}
    found = rules.dominant_stages(f)
    assert (
        kinds(found) == [("compute", "decode")] and found[0]["numbers"]["role_source"] == "evidence"
    )
    assert found[0]["evidence"].endswith(
        "; decode is compute, not preprocess as its name suggests: "
        "100% of its traced time is in torch operators"
    )
    assert [a["try"] for a in rules.findings(f)[0]["actions"]][:2] == [
        {"precision": "bf16"},
        {"precision": "int8"},
    ]
    f["roles"] = {"decode": "io"}  # declared (differs from the name's role): wins over the evidence
    assert kinds(rules.dominant_stages(f)) == [("feature_io", "decode")]
    f["roles"], f["libraries"] = {}, {"decode": {"torch": 0.49}}  # under half: the name decides
    assert rules.dominant_stages(f)[0]["numbers"]["role_source"] == "name"


PERIODIC = {
    "period_ms": 250.0,
    "width_ms": 31.0,
    "episodes": 12,
    "spikes": 84,
    "share_of_requests": 0.12,
    "share_of_slowest_1pct": 1.0,
    "acf": 0.9,
    "stage": "fetch",
    "stage_share": 1.0,
    "sentence": "every 250 ms, 31 ms wide, 12% of requests, in fetch (100% of their time over its median)",
}


def paced(p99_ms, closed_p99_ms, rate_rps=100.0, capacity_rps=1000.0):
    return {
        "rate_rps": rate_rps,
        "capacity_rps": capacity_rps,
        "paced": {"p99_ms": p99_ms},
        "closed_loop": {"p99_ms": closed_p99_ms},
        "p99_over_closed_loop": p99_ms / closed_p99_ms,
    }


def test_periodic_spikes_are_a_finding_in_their_stage_and_the_tail_then_comes_from_time():
    f = facts([stage("fetch", 0.5), stage("forward", 0.5)])
    f["periodic"] = PERIODIC | {"share_of_slowest_1pct": 0.49}  # not the tail: the roles stand
    assert kinds(rules.findings(f)) == [
        ("feature_io", "fetch"),
        ("compute", "forward"),
        ("periodic", "fetch"),
    ]
    f["periodic"] = PERIODIC
    found = rules.findings(f)
    assert kinds(found) == [("time", "fetch"), ("periodic", "fetch")]  # no compute finding
    assert found[1]["evidence"] == f"slow requests recur {PERIODIC['sentence']}"
    assert found[0]["evidence"] == (
        "100% of the slowest 1 % of requests recur every 250 ms: the tail comes from time, not "
        "from the request's own work; requests wait in fetch"
    )


def test_a_paced_p99_twice_the_closed_loop_one_at_low_utilization_comes_from_time():
    f = facts([stage("forward", 0.9)], tail_shares={"forward": 0.9})
    f["pacing"] = paced(8.0, 4.0)  # 10 % of the capacity
    found = rules.findings(f)
    assert kinds(found) == [("time", "forward")]
    assert found[0]["evidence"].startswith(
        "paced at 10% of the capacity, p99 is 8 ms from the send, 2.0x the closed-loop p99 (4 ms): "
        "the tail"
    )
    f["pacing"] = paced(7.9, 4.0)  # under 2x: the role finding stands
    assert kinds(rules.findings(f)) == [("compute", "forward")]
    f["pacing"] = paced(8.0, 4.0, rate_rps=700.0)  # 70 % of the capacity: queueing could explain it
    assert kinds(rules.findings(f)) == [("compute", "forward")]


def waits(classes):
    """A sampled run's waits: record waits on a lock in the slowest 5 %; score sleeps 2 ms against 1."""
    lock = {
        "class": "lock",
        "stage": "record",
        "share": 0.75,
        "ms_per_request": 30.0,
        "median_ms_per_request": 0.0,
        "excess_ms_per_request": 30.0,
        "site": "record (app.py:83)",
        "meanwhile": [
            {
                "thread": "snapshot",
                "frame": "copy deepcopy <- snapshot (app.py:45)",
                "cpu_ms_per_request": 31.0,
            }
        ],
    }
    sleep = lock | {
        "class": "sleep",
        "stage": "score",
        "share": 0.25,
        "ms_per_request": 2.0,
        "median_ms_per_request": 1.0,
        "excess_ms_per_request": 1.0,
        "meanwhile": [],
    }
    return {
        "tail_set": "slowest_5pct",
        "classes": {"slowest_5pct": classes},
        "causes": [lock, sleep],
    }


def test_a_lock_wait_is_a_finding_with_its_line_and_the_other_threads_frame_and_no_compute_advice():
    f = facts([stage("score", 0.6)], roles={"score": "compute"}) | {
        "waits": waits({"lock": 30.0, "sleep": 2.0, "cpu": 8.0})
    }
    found = rules.findings(f)
    assert kinds(found) == [("lock", "record")]  # score's sleep is 2x its median's: under 3x
    assert found[0]["evidence"] == (
        "record: 75 % of the slowest 5 % waiting on a lock at record (app.py:83); meanwhile thread "
        "'snapshot' ran copy deepcopy <- snapshot (app.py:45) for 31 ms per slow request"
    )
    assert found[0]["actions"][0]["title"].startswith("Shorten the other thread's critical section")


def test_a_gil_wait_every_request_pays_is_a_finding_though_the_tail_grew_less_than_3x():
    """A spinning thread holding the GIL: paced requests wait 5.3 ms to start at the median, 6.2 ms in
    the slowest 5 % (1.2x: under WAIT_GROWTH), and it is nearly all of both sets' sampled time; a
    sleep as even is not named (a stage that always sleeps is its own work)."""
    gil = waits({})["causes"][0] | {
        "class": "gil",
        "stage": "(waiting to start)",
        "share": 0.88,
        "ms_per_request": 6.23,
        "median_ms_per_request": 5.27,
        "excess_ms_per_request": 0.96,
        "site": None,
        "meanwhile": [
            {"thread": "spinner", "frame": "spin_forever (app.py:10)", "cpu_ms_per_request": 9.0}
        ],
    }
    found = {
        "tail_set": "slowest_5pct",
        "classes": {"slowest_5pct": {"gil": 6.23}, "median": {"gil": 5.41, "gc": 0.01}},
        "causes": [gil, gil | {"class": "sleep", "stage": "score", "share": 0.3}],
    }
    f = facts([stage("score", 0.6)], roles={"score": "compute"}) | {"waits": found}
    named = [x for x in rules.findings(f) if x["kind"] in ("gil", "sleep")]
    assert kinds(named) == [("gil", "(waiting to start)")]
    assert named[0]["evidence"].endswith(
        "; the median request waits 5.27 ms there too: every request pays it"
    )
    found["classes"]["median"] = {"gil": 5.41, "cpu": 16.0}  # a quarter of the median's time
    assert [x for x in rules.findings(f) if x["kind"] == "gil"] == []


def test_compute_advice_stays_for_a_tail_on_cpu_in_torch():
    f = facts([stage("score", 0.6)], roles={"score": "compute"}) | {
        "waits": waits({"cpu": 40.0, "lock": 1.0}),
        "libraries": {"score": {"torch": 0.9}},
    }
    assert ("compute", "score") in kinds(rules.findings(f))
    f["libraries"] = {}  # on CPU, but not in torch: no bf16/int8/compile
    assert ("compute", "score") not in kinds(rules.findings(f))


def growth(grows=True, ratio=2.0):
    return {
        "requests": 12,
        "growth": ratio,
        "agree": 1.0,
        "grows": grows,
        "slope_us_per_token": 24.0,
        "first": 1,
        "last": 63,
        "first_ms": 0.4,
        "last_ms": 1.9,
    }


def test_decode_steps_growing_with_position_name_the_kv_cache_and_drop_precision_advice():
    f = facts([stage("tokenize", 0.01), stage("generate", 0.98)], roles={"generate": "compute"})
    f["budget"]["tokens"] = {"stage": "generate", "decode_growth": growth()}
    found = rules.findings(f)
    assert kinds(found) == [("decode_growth", "generate")]  # its compute finding (bf16) is left out
    assert found[0]["evidence"] == (
        "decode steps of generate grow with the token's position: ITL 0.400 ms at token 1 -> "
        "1.900 ms at token 63 (+24.0 us per token); the later half of a request's steps 2.00x the "
        "earlier half (median of 12 requests, 100% of them slower); each step recomputes every "
        "earlier token (no KV cache, or one that is not used)"
    )
    assert found[0]["actions"][0]["try"] == {"kv_cache": True}
    assert "KV cache" in found[0]["actions"][0]["title"]
    assert not any((a["try"] or {}).get("precision") for a in found[0]["actions"])
    f["budget"]["tokens"]["decode_growth"] = growth(grows=False, ratio=1.1)
    assert kinds(rules.findings(f)) == [("compute", "generate")]


def trace_stage(name, host_us, gpu_us, sync_us=0.0, count=2):
    return {"stage": name, "count": count, "host_us": host_us, "gpu_us": gpu_us, "sync_us": sync_us}


def test_per_token_host_overhead_is_found_where_the_trace_shows_the_gpu():
    f = facts([stage("generate", 0.98)], roles={"generate": "compute"})
    f["budget"]["tokens"] = {
        "stage": "generate",
        "tokens_out": {"mean": 50.0},
        "decode_growth": growth(grows=False, ratio=1.0),
    }
    # 2 traced requests x 50 tokens; 10,000 us of host time, 3,000 of GPU work launched, 2,000 in syncs
    f["trace"] = {
        "launch_verdict": {"launch_bound": False},
        "stages": [trace_stage("generate", 10_000.0, 3_000.0, 2_000.0)],
        "memcpy": {},
    }
    found = rules.findings(f)
    # and not compute: precision is not it; the sync rule names the syncs of the whole trace
    assert kinds(found) == [("token_host", "generate"), ("sync", "generate")]
    assert found[0]["evidence"] == (
        "per-token host overhead in generate: its GPU work covers 30% of its traced host time; "
        "70.0 us a token of host work with the GPU idle (Python between tokens, dispatch and "
        "launches, 20.0 us of it in synchronizing calls)"
    )
    assert found[0]["numbers"]["per_token_us"] == 70.0
    f["trace"]["stages"] = [trace_stage("generate", 10_000.0, 6_000.0)]  # the GPU busy 60 %
    assert "token_host" not in [k for k, _ in kinds(rules.findings(f))]
    f["trace"]["stages"] = [trace_stage("generate", 10_000.0, 0.0)]  # a CPU trace: not visible
    assert "token_host" not in [k for k, _ in kinds(rules.findings(f))]
