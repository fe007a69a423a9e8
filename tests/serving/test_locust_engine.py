"""``load --url --engine locust``: Locust's master and 2 workers on loopback against a real server."""

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import threading
import time

import pytest

from workbench.record import load_run
from workbench_serve.locust_wire import SECRET_ENV

from scripted_server import Scripted, reply
from tests.support.cli import load_url
from served_helpers import ENV, free_port, payload_file, workbench

LOCUST_ONE_WORKER = ["--engine", "locust", "--workers", 1]

if importlib.util.find_spec("locust") is None:
    pytest.skip("locust is not installed (pip install 'locust>=2.47,<3')", allow_module_level=True)

import msgpack  # noqa: E402  (comes with locust)


@pytest.mark.slow
def test_a_master_and_two_workers_write_the_run_the_server_saw(served, tmp_path):
    server = served("--max-batch-size", "4")
    payloads = payload_file(tmp_path / "payloads.txt", 60, poison={7})
    flags = ["--rate", 60, "--requests", 60, "--engine", "locust", "--workers", 2, "--json"]
    res = workbench(*load_url(server.url, payloads, tmp_path / "locust", *flags))
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
        flags = ["--rate", 40, "--requests", 20, "--engine", engine, "--workers", 1]
        res = workbench(*load_url(server.url, payloads, tmp_path / engine, *flags))
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
    flags = ["--rate", 10, "--requests", 2, *args]
    res = workbench(*load_url("http://127.0.0.1:9", payloads, tmp_path / "x", *flags), timeout=60)
    assert (
        res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    ), res.stderr


class Rogue(threading.Thread):
    """A process on the master's port that is not this run's worker: it joins as a Locust worker, says
    hello without the secret, sends bytes that are not a message, a 20 MiB message and a heartbeat of
    the wrong shape; given a plan, it answers with made-up rows (a forged ``Server-Timing``)."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        import zmq

        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.IDENTITY, b"rogue_1")
        self.sock.connect(f"tcp://127.0.0.1:{port}")
        self.plans, self.running = 0, True
        self.start()

    def send(self, kind, data):
        self.sock.send(msgpack.packb((kind, data, "rogue_1"), use_bin_type=True))

    def run(self):
        # its version without importing it (importing Locust monkey-patches the process)
        self.send("client_ready", importlib.metadata.version("locust"))
        self.send("wb_hello", ["n" * 32, b"not the mac"])
        self.sock.send(b"\xc1 not msgpack")
        self.sock.send(b"\x00" * (20 * 2**20))
        self.send("heartbeat", 5)
        while self.running:
            if not self.sock.poll(100):
                continue
            kind, data, _ = msgpack.unpackb(self.sock.recv(), raw=False, strict_map_key=False)
            if kind == "wb_plan":
                self.plans += 1
                self.share = data
                self.send("wb_ready", None)
            elif kind == "wb_start":
                forged = {"server-timing": "forged;dur=1, total;dur=1"}
                rows = [
                    (k, o, o, o + 1, 200, forged, b"", None)
                    for k, o in zip(self.share["ks"], self.share["offsets_ns"])
                ]
                self.send("wb_results", rows)


def test_an_outsider_on_the_masters_port_is_not_a_worker(tmp_path):
    server = Scripted(reply(headers="Server-Timing: forward;dur=0.01, total;dur=0.02"))
    port = free_port()
    rogue = Rogue(port)
    payloads = payload_file(tmp_path / "p.txt", 5)
    flags = [*LOCUST_ONE_WORKER, "--rate", 50, "--requests", 20, "--master-port", port, "--json"]
    res = workbench(*load_url(server.url, payloads, tmp_path / "run", *flags), timeout=150)
    rogue.running = False
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["failed"] == 0 and rogue.plans == 0
    run = load_run(tmp_path / "run")
    assert run.stage_names == ["network", "forward"]  # none of the rogue's rows
    assert len(run.requests) == 20 and server.requests >= 20
    assert any("ignored" in note for note in run.meta.serving.extra["notes"])


def _worker(port: int, env: dict) -> subprocess.Popen:
    command = [sys.executable, "-m", "workbench", "locust-worker", "--master", "127.0.0.1"]
    return subprocess.Popen(
        [*command, "--master-port", str(port)], env=env, stderr=subprocess.PIPE, text=True
    )


def test_a_worker_obeys_only_its_own_master():
    import zmq

    target = Scripted(reply())
    master = zmq.Context.instance().socket(zmq.ROUTER)
    port = master.bind_to_random_port("tcp://127.0.0.1")
    worker = _worker(port, ENV | {SECRET_ENV: "k" * 32})
    lines = []
    threading.Thread(target=lambda: lines.extend(worker.stderr), daemon=True).start()
    try:
        assert master.poll(60_000), "the worker never connected"
        node, _ = master.recv_multipart()

        def send(kind, data):
            master.send_multipart([node, msgpack.packb((kind, data, node.decode()))])

        send("ack", {"index": 0})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and master.poll(100):  # its hello: its handlers are set
            if msgpack.unpackb(master.recv_multipart()[1])[0] == "wb_hello":
                break
        share = {"url": target.url, "tag": "evil", "payloads": [b"x"], "timeout_s": 1.0}
        send(
            "wb_plan",
            share | {"warmup": 1, "ks": [0], "offsets_ns": [0], "worker": 0, "report": False},
        )
        send("wb_start", {"start_wall_ns": time.time_ns()})
        deadline = time.monotonic() + 60
        while sum("ignored" in ln for ln in lines) < 2 and time.monotonic() < deadline:
            master.poll(100) and master.recv_multipart()  # heartbeats and hellos
        assert [ln.strip() for ln in lines if "ignored" in ln] == [
            "locust-worker: ignored a wb_plan that is not a sealed envelope",
            "locust-worker: ignored a wb_start that is not a sealed envelope",
        ]
        assert target.requests == 0
    finally:
        worker.kill()
        worker.wait(10)
        master.close(linger=0)


def test_a_worker_without_the_secret_exits_2_with_one_line():
    env = {k: v for k, v in ENV.items() if k != SECRET_ENV}
    res = subprocess.run(
        [sys.executable, "-m", "workbench", "locust-worker", "--master", "127.0.0.1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert SECRET_ENV in res.stderr


def test_a_worker_that_dies_mid_run_costs_its_own_rows(tmp_path):
    server = Scripted(reply(headers="Server-Timing: forward;dur=0.01, total;dur=0.02"))
    port, env = free_port(), ENV | {SECRET_ENV: "k" * 32}
    command = [sys.executable, "-m", "workbench", "load", "--url", server.url, "--payloads"]
    command += [str(payload_file(tmp_path / "p.txt", 5)), "--rate", "20", "--requests", "60"]
    command += ["--engine", "locust", "--workers", "1", "--expect-workers", "2"]
    command += ["--master-port", str(port), "--timeout", "2", "--out", str(tmp_path / "run")]
    load = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    outside = _worker(port, env)  # the second worker, started here: it is the one killed
    deadline = time.monotonic() + 120
    while server.requests < 5 + 10 and time.monotonic() < deadline:  # the warm-up, then 10 of 60
        time.sleep(0.05)
    outside.kill()
    outside.wait(10)
    stdout, stderr = load.communicate(timeout=180)
    assert load.returncode == 1, stdout + stderr
    run = load_run(tmp_path / "run")
    lost = run.requests[run.requests["error_stage"] == "locust_worker"]
    assert len(run.requests) == 60 and len(lost) == 30  # the killed worker's share
    assert run.requests.loc[run.requests["error_stage"] != "locust_worker", "ok"].all()
    assert set(lost["error_type"]) == {"WorkerLost"}
    assert "requests were lost with their Locust worker" in stderr and "stopped answering" in stderr


def test_the_timeout_bounds_each_request_of_a_slow_server(tmp_path):
    server = Scripted(reply(), drip_s=0.5)  # ~20 s a response, one byte at a time
    started = time.monotonic()
    payloads = payload_file(tmp_path / "p.txt", 2)
    flags = [*LOCUST_ONE_WORKER, "--rate", 10, "--requests", 4, "--timeout", 1, "--json"]
    res = workbench(*load_url(server.url, payloads, tmp_path / "run", *flags), timeout=150)
    assert res.returncode == 1, res.stderr  # every request failed, the run kept
    assert time.monotonic() - started < 60
    run = load_run(tmp_path / "run")
    assert set(run.requests["error_type"]) == {"RequestTimeout"}


@pytest.mark.slow
def test_locust_workers_time_each_unit_of_a_streaming_server(served, tmp_path):
    from test_served_stream import TINYGEN

    server = served("--max-batch-size", "1", pipeline=TINYGEN)
    rows = [{"x": -1 if k == 4 else k, "n": 4} for k in range(16)]  # request 4 fails after 2 units
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = workbench(
        *("load", "--url", server.url, "--payloads", payloads, "--rate", 40, "--requests", 16),
        *("--engine", "locust", "--workers", 2, "--ttft-ms", 60_000, "--json"),
        *("--out", tmp_path / "locust"),
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["failed"] == 1 and out["failures"]["generate"]["count"] == 1
    assert (out["tokens"]["requests"], out["tokens"]["tokens"]) == (15, 60)
    assert out["tokens"]["itl"]["count"] == 45 and out["tokens"]["prefill"]["count"] == 15
    assert out["streams"] == {"requests": 16, "units": 62, "failed_requests": 1, "failed_units": 2}
    assert out["goodput"]["good"] == 15 and out["goodput"]["requests"] == 16
    client = load_run(tmp_path / "locust")
    req = client.requests.set_index("request")
    first = client.units.groupby("request")["at_ns"].min()
    assert (first > req.loc[first.index, "start_ns"]).all()  # after each request's due time
    code, _, stderr = server.stop()
    assert code == 1, stderr
