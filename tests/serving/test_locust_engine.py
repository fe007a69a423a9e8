"""``load --url --engine locust``: Locust's master and 2 workers on loopback against a real server."""

import importlib.util
import json

import pytest

from workbench.record import load_run

from served_helpers import payload_file, workbench

if importlib.util.find_spec("locust") is None:
    pytest.skip("locust is not installed (pip install 'locust>=2.47,<3')", allow_module_level=True)


@pytest.mark.slow
def test_a_master_and_two_workers_write_the_run_the_server_saw(served, tmp_path):
    server = served("--max-batch-size", "4")
    payloads = payload_file(tmp_path / "payloads.txt", 60, poison={7})
    res = workbench(
        "load",
        "--url",
        server.url,
        "--payloads",
        payloads,
        "--rate",
        60,
        "--requests",
        60,
        "--engine",
        "locust",
        "--workers",
        2,
        "--json",
        "--out",
        tmp_path / "locust",
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["requests"] == 60 and out["failed"] == 1 and out["server_timing"] is True
    assert set(out["failures"]) == {"forward"}
    code, _, stderr = server.stop()
    assert code == 1, stderr  # the poisoned request failed on the server too

    client, seen = load_run(tmp_path / "locust"), load_run(server.out)
    tag = client.meta.serving.request_id_prefix
    ids = seen.requests["request_id"].dropna()
    measured = ids[ids.str.startswith(f"{tag}-")]
    assert (
        len(client.requests) == len(measured) == 60
    )  # the server's count: each request once, none lost
    assert (
        sorted(client.requests["request_id"])
        == sorted(measured)
        == sorted(f"{tag}-{k}" for k in range(60))
    )
    assert (
        client.meta.serving.client.startswith("locust ")
        and "2 workers" in client.meta.serving.client
    )
    assert client.stage_names[:2] == ["network", "ingress"] and "forward" in client.stage_names
    assert (
        client.requests["start_ns"].diff().dropna() >= -50_000_000
    ).all()  # one clock: sends in schedule order


@pytest.mark.slow
def test_same_shape_as_the_workbench_generator(served, tmp_path):
    server = served()
    payloads = payload_file(tmp_path / "payloads.txt", 20)
    runs = {}
    for engine in ("workbench", "locust"):
        res = workbench(
            "load",
            "--url",
            server.url,
            "--payloads",
            payloads,
            "--rate",
            40,
            "--requests",
            20,
            "--engine",
            engine,
            "--workers",
            1,
            "--out",
            tmp_path / engine,
        )
        assert res.returncode == 0, res.stderr
        runs[engine] = load_run(tmp_path / engine)
    server.stop()
    own, locust = runs["workbench"], runs["locust"]
    assert list(own.requests.columns) == list(locust.requests.columns)
    assert list(own.requests.dtypes) == list(locust.requests.dtypes)
    assert (
        list(own.stages.columns) == list(locust.stages.columns)
        and own.stage_names == locust.stage_names
    )
    assert set(own.meta.to_dict()) == set(locust.meta.to_dict())
    assert len(own.requests) == len(locust.requests) == 20


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--engine", "locust", "--workers", "2", "--expect-workers", "1"],
            "fewer than the --workers 2",
        ),
        (
            ["--engine", "locust", "--workers", "0"],
            "--workers must be an integer in [1, 1_024] processes",
        ),
        (["--workers", "2"], "--workers/--expect-workers are for --engine locust"),
        (["--engine", "locust", "--workers", "1"], "cannot connect"),  # nothing listens on port 9
    ],
)
def test_bad_engine_options_exit_2_with_one_line(tmp_path, args, message):
    payloads = payload_file(tmp_path / "payloads.txt", 2)
    res = workbench(
        "load",
        "--url",
        "http://127.0.0.1:9",
        "--payloads",
        payloads,
        "--rate",
        10,
        "--requests",
        2,
        *args,
        "--out",
        tmp_path / "x",
        timeout=60,
    )
    assert (
        res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    ), res.stderr
