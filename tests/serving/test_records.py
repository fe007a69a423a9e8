"""The client-side join: network = client end to end - server total, stages as the server reported them."""

from workbench.batching.summary import lag_percentiles
from workbench_serve.client import Result
from workbench_serve.records import client_tables, fitted_to_client, server_stage_names

import numpy as np
import pytest


def test_join_adds_network_and_keeps_server_stages_exactly():
    ok = Result(
        "t-0",
        due_ns=1_000,
        sent_ns=1_500,
        done_ns=9_501_500,
        status=200,
        server_stages=[("ingress", 100_000), ("batch_wait", 2_000_000), ("forward", 5_000_000)],
        server_total_ns=7_300_000,
        batch=3,
        batch_size=2,
    )
    bad = Result(
        "t-1",
        due_ns=2_000,
        sent_ns=2_000,
        done_ns=4_002_000,
        status=500,
        error=("forward", "ValueError", "poison"),
        server_stages=[("ingress", 10)],
        server_total_ns=3_000_000,
    )
    requests, stages = client_tables([ok, bad], origin_ns=1_000)
    # timed from the due time: t-0 was sent 500 ns late, and that is inside its end to end
    assert requests["dur_ns"].tolist() == [9_500_500, 4_000_000]
    assert requests["lag_ns"].tolist() == [500, 0] and requests["arrival_ns"].tolist() == [
        500,
        1_000,
    ]
    assert requests["ok"].tolist() == [True, False]
    assert (
        requests.loc[1, "error_stage"] == "forward"
        and requests.loc[1, "error_type"] == "ValueError"
    )
    assert requests["start_ns"].tolist() == [0, 1_000]  # the due times
    assert requests["batch_wait_ns"].tolist() == [2_000_000, 0]
    assert requests["service_ns"].tolist() == [
        5_000_000,
        0,
    ]  # pipeline stages only (not the HTTP ones or waits)
    assert requests["request_id"].tolist() == ["t-0", "t-1"]
    first = stages[stages["request"] == 0]
    assert first["stage"].tolist() == ["network", "ingress", "batch_wait", "forward"]
    assert first["dur_ns"].tolist() == [2_200_000, 100_000, 2_000_000, 5_000_000]
    assert first["start_ns"].tolist() == [
        500,
        2_200_500,
        2_300_500,
        4_300_500,
    ]  # laid end to end from the send


def test_a_server_without_server_timing_gives_end_to_end_only():
    r = Result("t-0", 0, 10, 2_010, status=200)
    requests, stages = client_tables([r], origin_ns=0)
    assert requests["dur_ns"].tolist() == [2_010] and stages.empty  # from the due time


def test_lag_percentiles_in_ms():
    lags = np.array([0, 100_000, 200_000, 3_000_000], dtype=np.int64)
    out = lag_percentiles(lags)
    assert out["p50_ms"] == 0.15 and out["max_ms"] == 3.0
    assert out["p99_ms"] == pytest.approx(2.916, abs=1e-12)  # linear: 0.2 + 0.97 * 2.8 ms
    assert lag_percentiles(np.array([], dtype=np.int64)) == {
        "p50_ms": 0.0,
        "p99_ms": 0.0,
        "max_ms": 0.0,
    }


def test_cache_split_puts_full_hits_apart():
    from workbench.record import Run
    from workbench.analysis.budget import cache_split

    results = [
        Result(
            f"t-{k}",
            k * 10,
            k * 10,
            k * 10 + dur,
            status=200,
            server_stages=[("forward", dur // 2)],
            server_total_ns=dur // 2,
            cache_hit=hit,
        )
        for k, (dur, hit) in enumerate([(1_000, 1.0), (9_000, 0.5), (2_000, 1.0), (8_000, 0.0)])
    ]
    requests, stages = client_tables(results, origin_ns=0)
    run = Run(
        meta={"kind": "served", "pipeline": "p", "stages": ["network", "forward"]},
        requests=requests,
        stages=stages,
    )
    parts = cache_split(run)
    assert parts["hit"].requests["dur_ns"].tolist() == [1_000, 2_000]
    assert parts["miss"].requests["dur_ns"].tolist() == [9_000, 8_000]
    assert sorted(parts["miss"].stages["request"].unique().tolist()) == [1, 3]
    with pytest.raises(ValueError, match="no cache_hit column"):
        cache_split(Run(meta=run.meta, requests=requests.drop(columns="cache_hit"), stages=stages))


def test_server_times_are_fitted_to_what_the_client_measured():
    """A total past the client's end to end is cut to it; stages past the total are cut at it; reserved,
    unlisted and repeated names are left out (their time unattributed); one note per kind of misfit."""
    rounded = Result(  # whole ms: 1 ms reported for a 400 us request
        "t-0",
        0,
        100,
        400_100,
        200,
        server_stages=[("forward", 1_000_000)],
        server_total_ns=1_000_000,
    )
    odd = Result(
        "t-1",
        0,
        0,
        900_000,
        200,
        server_stages=[
            ("network", 50_000),
            ("other", 10_000),
            ("ingress", 100_000),
            ("ingress", 5_000),
            ("forward", 600_000),
        ],
        server_total_ns=500_000,
    )
    plain = Result("t-2", 0, 0, 1_000, 200)
    names = server_stage_names([odd], ["ingress", "network", "forward"])
    assert names == ["ingress", "forward"]
    fitted, notes = fitted_to_client([rounded, odd, plain], names)
    assert [(r.server_stages, r.server_total_ns) for r in fitted] == [
        ([("forward", 400_000)], 400_000),
        ([("ingress", 100_000), ("forward", 400_000)], 500_000),
        ([], None),
    ]
    assert notes == [
        "1 of 3 responses had a Server-Timing total past the client's end to end (cut to it, network 0)",
        "2 of 3 responses had stages adding up past the Server-Timing total (cut at it)",
        "1 of 3 responses had a stage 'network' that is not one of the server's (unattributed)",
        "1 of 3 responses had a stage 'other' that is not one of the server's (unattributed)",
        "1 of 3 responses had a stage 'ingress' that is not one of the server's (unattributed)",
    ]
    requests, stages = client_tables(fitted, origin_ns=0)
    assert stages["dur_ns"].tolist() == [0, 400_000, 400_000, 100_000, 400_000]


def test_without_a_server_list_the_stages_are_the_names_reported_first_seen():
    results = [
        Result("t-0", 0, 0, 10, 200, server_stages=[("a", 1), ("total", 1), ("b", 1)]),
        Result("t-1", 0, 0, 10, 200, server_stages=[("network", 1), ("c", 1), ("a", 1)]),
        Result("t-2", 0, 0, 10, 200, server_stages=[("x" * 201, 1)]),
    ]
    assert server_stage_names(results, None) == ["a", "b", "c"]
