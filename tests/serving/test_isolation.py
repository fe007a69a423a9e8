"""Per-request isolation: a batch that raises is re-run one request at a time, so only the bad one fails."""

import asyncio
import json

from workbench import Pipeline, PipelineConfig
from workbench.batching.policy import BatchPolicy
from workbench_serve.records import server_tables
from workbench_serve.service import PipelineService, server_meta


def leaky(config):
    """forward raises on x < 0 with a message that quotes the whole batch (as a careless stage would)."""
    pipe = Pipeline("leaky", items=lambda: iter([b'{"x": 1}']))

    @pipe.stage
    def parse(batch):
        return [json.loads(b) for b in batch]

    @pipe.stage
    def forward(rows):
        if any(r["x"] < 0 for r in rows):
            raise ValueError(f"bad batch {rows}")
        return [{"y": r["x"] * 2, "secret": r.get("secret")} for r in rows]

    @pipe.stage
    def serialize(rows):
        return [json.dumps(r).encode() for r in rows]

    return pipe


def run_together(service, bodies):
    async def main():
        service.start(asyncio.get_running_loop())
        replies = await asyncio.gather(
            *(service.predict(b, service.clock(), f"c-{k}") for k, b in enumerate(bodies))
        )
        for rid, times, _ in replies:
            if rid is not None:  # None: refused before batching
                service.finish(rid, times)
        return replies

    return asyncio.run(main())


def test_one_bad_request_fails_alone_and_no_reply_quotes_another():
    service = PipelineService(leaky(PipelineConfig(batch_size=4)), BatchPolicy(4, 200), warmup=0)
    bodies = [json.dumps({"x": x, "secret": f"s{k}"}).encode() for k, x in enumerate((3, -1, 5, 7))]
    replies = run_together(service, bodies)
    dropped = service.stop(5.0)
    assert [r.status for _, _, r in replies] == [200, 500, 200, 200]
    assert [r.headers["X-Workbench-Batch-Size"] for _, _, r in replies] == [
        "4"
    ] * 4  # they did share one batch
    assert all(r.headers["X-Workbench-Isolated"] == "1" for _, _, r in replies)
    assert [json.loads(r.body) for _, _, r in replies if r.status == 200] == [
        {"y": 6, "secret": "s0"},
        {"y": 10, "secret": "s2"},
        {"y": 14, "secret": "s3"},
    ]
    error = json.loads(replies[1][2].body)["error"]
    assert "s1" in error and not any(f"s{k}" in error for k in (0, 2, 3))  # its own input only
    requests, _ = server_tables(service, dropped, service.clock())
    assert requests["ok"].tolist() == [True, False, True, True]
    assert (
        requests["error_type"].tolist()[1] == "ValueError"
        and requests["error_stage"].tolist()[1] == "forward"
    )
    assert "s0" not in requests["error_message"].tolist()[1]
    iso = server_meta(service)["isolation"]
    assert (
        iso["batches_rerun"],
        iso["requests_failed_alone"],
        iso["requests_answered_after_rerun"],
    ) == (1, 1, 3)


def test_a_batch_that_does_not_raise_is_not_rerun():
    service = PipelineService(leaky(PipelineConfig(batch_size=4)), BatchPolicy(4, 200), warmup=0)
    replies = run_together(service, [json.dumps({"x": x}).encode() for x in (1, 2)])
    service.stop(5.0)
    assert [r.status for _, _, r in replies] == [200, 200]
    assert not any("X-Workbench-Isolated" in r.headers for _, _, r in replies)
    assert server_meta(service)["isolation"]["batches_rerun"] == 0


def test_a_body_the_pipelines_check_refuses_is_answered_400_and_never_batched():
    pipe = leaky(PipelineConfig(batch_size=4))

    def check_item(body):
        if json.loads(body)["x"] < 0:
            raise ValueError(f"x must be >= 0, got {json.loads(body)['x']}")

    pipe.check_item = check_item
    service = PipelineService(pipe, BatchPolicy(4, 200), warmup=0)
    bodies = [json.dumps({"x": x}).encode() for x in (3, -1, 5, 7)] + [b"[" * 100_000]
    replies = run_together(service, [b for b in bodies])
    dropped = service.stop(5.0)
    assert [r.status for _, _, r in replies] == [200, 400, 200, 200, 400]
    assert replies[1][0] is None and json.loads(replies[1][2].body) == {
        "error": "request refused before batching: ValueError: x must be >= 0, got -1",
        "stage": "validate",
        "type": "ValueError",
    }
    assert (
        json.loads(replies[4][2].body)["type"] == "RecursionError"
    )  # 100,000-deep JSON: refused alone
    assert [r.headers["X-Workbench-Batch-Size"] for _, _, r in replies if r.status == 200] == [
        "3"
    ] * 3
    requests, _ = server_tables(service, dropped, service.clock())
    assert requests["request"].tolist() == [0, 1, 2, 3, 4]
    assert requests["ok"].tolist() == [True, True, True, False, False]
    assert requests["error_stage"].tolist()[3:] == ["validate", "validate"]
    assert requests["request_id"].tolist()[3:] == ["c-1", "c-4"]
    iso = server_meta(service)["isolation"]
    assert (iso["requests_refused_before_batching"], iso["batches_rerun"]) == (2, 0)
