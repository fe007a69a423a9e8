"""Stacks of the slow requests against the median ones, on planted samples with exact shares."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.analysis.stacks import call_site, frame_name, samples_frame, stack_summary

MS = 1_000_000
SITE = "/venv/lib/python3.11/site-packages"
GET = ("/app/recommend.py", "get_features", 143)
STACKS = [
    (
        ("/app/recommend.py", "hydrate", 20),
        GET,
        (f"{SITE}/redis/connection.py", "read_response", 800),
    ),
    (
        ("/app/recommend.py", "hydrate", 20),
        GET,
        ("/usr/lib/python3.11/json/decoder.py", "decode", 337),
    ),
    (("/app/recommend.py", "hydrate", 21), ("/app/recommend.py", "merge", 60)),
    (("/app/model.py", "forward", 9),),
]


def planted(n=400, heavy_every=33):
    """n requests; every 33rd (13, 3 %) is a heavy user whose hydrate takes 300 ms, the rest 10 ms;
    forward 5 ms. Samples every ms: heavy hydrates 91 % in redis read_response, 9 % json; light ones
    40 % redis, 60 % merge."""
    req, st, samples = [], [], []
    for r in range(n):
        heavy = r % heavy_every == 0
        hydrate = 300 if heavy else 10
        req.append({"request": r, "warmup": False, "ok": True, "dur_ns": (hydrate + 5) * MS})
        st += [
            {"request": r, "stage": "hydrate", "dur_ns": hydrate * MS, "device_dur_ns": None},
            {"request": r, "stage": "forward", "dur_ns": 5 * MS, "device_dur_ns": None},
        ]
        split = [0] * (273 if heavy else 4) + [1] * (27 if heavy else 0) + [2] * (0 if heavy else 6)
        samples += [(r, "hydrate", sid) for sid in split] + [(r, "forward", 3)] * 5
    requests = pd.DataFrame(req)
    stages = pd.DataFrame(st).astype({"device_dur_ns": "Int64"})
    table = samples_frame(*map(list, zip(*samples)))
    return requests, stages, table


def test_frame_names_say_the_library_or_the_function():
    assert frame_name(f"{SITE}/redis/connection.py", "read_response") == "redis read_response"
    assert frame_name("/usr/lib/python3.11/socket.py", "recv_into") == "socket recv_into"
    assert frame_name("/app/recommend.py", "get_features") == "get_features"
    assert call_site(*GET) == "get_features (recommend.py:143)"


def test_the_heavy_users_redis_read_is_named_from_the_slow_requests_own_stacks():
    requests, stages, table = planted()
    out = stack_summary(table, STACKS, requests, stages, ["hydrate", "forward"], interval_s=0.001)
    assert out["tail_set"] == "slowest_1pct" and out["samples"] == len(table)
    assert out["headline"] == (
        "hydrate, 91 % of the slowest 1 % in redis read_response <- get_features "
        "(recommend.py:143); median 40 %"
    )
    hydrate = out["stages"]["hydrate"]
    assert hydrate["samples"] == {
        "slowest_1pct": 4 * 300,
        "slowest_5pct": 13 * 300 + 7 * 10,
        "median": 387 * 10,
    }
    top = hydrate["lead"]
    # get_features grows most (300 - 4 ms per request); read_response, its callee, carries 269 of it: named
    assert [f["function"] for f in hydrate["frames"][:3]] == [
        "get_features",
        "hydrate",
        "read_response",
    ]
    assert top["ms_per_request"] == pytest.approx(
        {"slowest_1pct": 273.0, "slowest_5pct": (13 * 273 + 7 * 4) / 20, "median": 4.0}
    )
    assert top["growth_ms"] == pytest.approx(269.0)
    assert (top["frame"], top["slowest_1pct"], top["median"], top["growth"]) == (
        "redis read_response",
        0.91,
        0.4,
        pytest.approx(0.51),
    )
    # the slowest 5 %: 20 requests, the 13 heavy ones and 7 light ones; the median set: the 387 light ones
    assert top["slowest_5pct"] == pytest.approx((13 * 273 + 7 * 4) / (13 * 300 + 7 * 10))
    merge = next(f for f in hydrate["frames"] if f["function"] == "merge")
    assert (merge["slowest_1pct"], merge["median"]) == (0.0, 0.6) and merge["growth"] == -0.6


def test_the_differential_tree_holds_both_sets_shares_by_path():
    requests, stages, table = planted()
    tree = stack_summary(table, STACKS, requests, stages, ["hydrate", "forward"], interval_s=0.001)[
        "stages"
    ]["hydrate"]["tree"]
    by_name = {n["name"]: n for n in tree}
    assert by_name["hydrate"]["parent"] == -1 and (
        by_name["hydrate"]["tail"],
        by_name["hydrate"]["median"],
    ) == (1.0, 1.0)
    assert by_name["get_features"]["parent"] == by_name["hydrate"]["id"]
    assert (by_name["get_features"]["tail"], by_name["get_features"]["median"]) == pytest.approx(
        (1.0, 0.4)
    )
    assert by_name["redis read_response"]["parent"] == by_name["get_features"]["id"]
    assert (by_name["json decode"]["tail"], by_name["merge"]["median"]) == pytest.approx(
        (0.09, 0.6)
    )


def test_too_few_tail_samples_name_no_frame_and_no_samples_no_summary():
    requests, stages, table = planted()
    sparse = table[
        (table["stage"] != "hydrate") | (table.groupby(["request", "stage"]).cumcount() < 4)
    ]
    out = stack_summary(sparse, STACKS, requests, stages, ["hydrate", "forward"], interval_s=0.001)
    assert out["stages"]["hydrate"]["samples"]["slowest_1pct"] == 16 and out["headline"] is None
    assert (
        stack_summary(table.iloc[0:0], STACKS, requests, stages, ["hydrate"], interval_s=0.001)
        is None
    )


def test_samples_of_a_run_whose_every_request_failed_give_no_summary():
    # found on an H200: every request of a CUDA stage past --timeout-s failed, and the median set of
    # no request raised an IndexError out of profile()
    requests, stages, table = planted(n=20)
    failed = requests.assign(ok=False)
    assert (
        stack_summary(table, STACKS, failed, stages, ["hydrate", "forward"], interval_s=0.001)
        is None
    )


def test_a_1_percent_set_with_too_few_samples_falls_back_to_the_5_percent_one():
    requests, stages, table = planted()
    # sampled every 80 ms instead of 1: a heavy hydrate gets 4 samples, a light one 1 (all in redis)
    coarse = table[table.groupby(["request", "stage"]).cumcount() % 80 == 0]
    out = stack_summary(coarse, STACKS, requests, stages, ["hydrate", "forward"], interval_s=0.08)
    assert out["tail_set"] == "slowest_5pct"  # the 1 % set has 4 x 4 = 16 hydrate samples, under 20
    hydrate = out["stages"]["hydrate"]
    assert hydrate["samples"]["slowest_5pct"] == 13 * 4 + 7 and hydrate["enough"]
    assert hydrate["lead"]["growth_ms"] == pytest.approx((13 * 4 + 7) * 80 / 20 - 80)
    assert out["headline"] == (
        "hydrate, 100 % of the slowest 5 % in redis read_response <- get_features "
        "(recommend.py:143); median 100 %"
    )


def test_a_lead_frame_the_median_set_never_sampled_still_gets_a_headline():
    # issue 35: on a busy machine the sampler missed every median request's hydrate; the headline
    # multiplied the median share (None) and profile crashed after measuring (TypeError, exit 3)
    requests, stages, table = planted()
    heavy_only = table[(table["stage"] != "hydrate") | (table["request"] % 33 == 0)]
    out = stack_summary(
        heavy_only, STACKS, requests, stages, ["hydrate", "forward"], interval_s=0.001
    )
    hydrate = out["stages"]["hydrate"]
    assert hydrate["samples"]["median"] == 0 and hydrate["lead"]["median"] is None
    assert out["headline"] == (
        "hydrate, 91 % of the slowest 1 % in redis read_response <- get_features "
        "(recommend.py:143); the median set has no samples in hydrate"
    )
