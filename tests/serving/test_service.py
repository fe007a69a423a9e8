"""What the server keeps of finished requests: plain tuples the GC does not track, and the tables built from them."""

import asyncio
import gc
import json

from workbench import PipelineConfig
from workbench.batching.policy import BatchPolicy
from workbench_serve.records import server_tables
from workbench_serve.service import BatchDone, PipelineService

from served_pipeline import build


def serve_three(service: PipelineService) -> list:
    """Three requests through the service on an event loop (x=-1 fails in forward); the last is not finished."""

    async def main():
        service.start(asyncio.get_running_loop())
        replies = await asyncio.gather(
            *(
                service.predict(json.dumps({"x": x}).encode(), service.clock(), f"c-{k}")
                for k, x in enumerate((3, -1, 5))
            )
        )
        for rid, times, _ in replies[:2]:
            service.finish(rid, times)
        return replies

    return asyncio.run(main())


def test_finished_requests_are_kept_as_untracked_tuples_and_tabled_exactly():
    service = PipelineService(build(PipelineConfig(batch_size=1)), BatchPolicy(1, 0), warmup=1)
    replies = serve_three(service)
    dropped = service.stop(5.0)
    stopped = service.clock()
    assert [r.status for _, _, r in replies] == [200, 500, 200]
    assert dropped == [] and service.batcher.batches == []  # the batcher's list keeps nothing
    assert sorted(service.done) == [0, 1] and list(service.http) == [
        2
    ]  # the third is still in flight
    gc.collect()
    gc.collect()  # the first untracks the inner tuples (stage times, request ids), the second the outer ones
    assert not any(gc.is_tracked(b) for b in service.batch_log)
    assert not any(gc.is_tracked(t) for t in service.done.values())
    failed = [b for b in map(BatchDone._make, service.batch_log) if b.failure is not None]
    assert [(b.requests, b.failure[:3]) for b in failed] == [
        ((1,), ("forward", "ValueError", "x=-1 is poison"))
    ]

    requests, stages = server_tables(service, dropped, stopped)
    requests = requests.sort_values("request").reset_index(drop=True)
    assert requests["request_id"].tolist() == ["c-0", "c-1", "c-2"]
    assert requests["ok"].tolist() == [True, False, True]
    assert (
        requests.loc[1, "error_stage"] == "forward"
        and requests.loc[1, "error_type"] == "ValueError"
    )
    assert requests["batch_size"].tolist() == [1, 1, 1]
    # every number comes from the kept tuples, to the ns
    origin = service.origin_ns
    received, submitted, _, resumed, sent, disconnected = service.done[0]
    [batch] = [BatchDone._make(b) for b in service.batch_log if b[1] == (0,)]
    row = requests.loc[0]
    assert (row["start_ns"], row["dur_ns"], row["arrival_ns"]) == (
        received - origin,
        sent - received,
        submitted - origin,
    )
    assert (row["batch_wait_ns"], row["queue_wait_ns"], row["service_ns"]) == (
        batch.close_ns - submitted,
        batch.start_ns - batch.close_ns,
        batch.end_ns - batch.start_ns,
    )
    first = stages[stages["request"] == 0]
    assert first["stage"].tolist() == [
        "ingress",
        "batch_wait",
        "queue_wait",
        "parse",
        "forward",
        "serialize",
        "handoff",
        "egress",
    ]
    assert first["dur_ns"].tolist()[3:6] == [
        e - s for s, e in zip(batch.stage_start_ns, batch.stage_end_ns)
    ]
    assert first["dur_ns"].tolist()[6:] == [resumed - batch.end_ns, sent - resumed]
    assert not disconnected
