"""A real server (uvicorn) and a real load generator in two other processes: the joined budget,
failures on both sides, the run folder written on SIGTERM and on /shutdown, and bad input."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from workbench.analysis.budget import budget
from workbench_serve.otel.ingest import ingest_otel
from workbench.record import load_run
from workbench_serve.process import ServeProcess

from tests.support.cli import load_url
from served_helpers import ENV, PIPELINE, free_port, payload_file, served_requests, workbench


def test_served_load_joins_the_budget_and_sigterm_writes_the_server_run(served, tmp_path):
    server = served("--max-batch-size", "1", "--otel")  # a poisoned item fails only its own request
    payloads = payload_file(tmp_path / "payloads.txt", 40, poison={10, 20})
    flags = ["--rate", 50, "--requests", 40, "--json"]
    res = workbench(*load_url(server.url, payloads, tmp_path / "client", *flags))
    assert res.returncode == 0, (
        res.stderr
    )  # 2 of 40 failed: a failure, not all (no --fail-on-error)
    out = json.loads(res.stdout)
    assert out["requests"] == 40 and out["failed"] == 2 and out["server_timing"] is True
    assert set(out["generator_lag"]) == {"p50_ms", "p99_ms", "max_ms"}
    assert out["generator_lag_ms"] == out["generator_lag"]["max_ms"]
    assert out["network"]["count"] == 38 and out["server_end_to_end"]["count"] == 38
    assert set(out["failures"]) == {"forward"} and out["failures"]["forward"]["count"] == 2

    client = load_run(tmp_path / "client")
    assert client.kind == "served" and client.stage_names[:2] == ["network", "ingress"]
    assert client.stage_names[-2:] == ["handoff", "egress"] and "forward" in client.stage_names
    report = budget(client)
    assert [s["name"] for s in report["stages"]] == client.stage_names and report["end_to_end"][
        "count"
    ] == 38

    code, stdout, stderr = server.stop()
    assert code == 1, stderr  # the server recorded failed requests
    assert "stopped by SIGTERM" in stdout
    assert stderr.count("500 sent, recorded") == 2
    srv = load_run(server.out)
    assert srv.kind == "served" and srv.meta.serving.stopped_by == "SIGTERM"
    gc_note = srv.meta.serving.gc  # frozen after the warm-up by default (torch's objects are many)
    assert gc_note["mode"] == "freeze" and gc_note["frozen_objects"] > 10_000
    assert f"gc (freeze): {gc_note['collections']} collections while serving" in stdout
    ids = srv.requests.set_index("request_id")
    measured = client.requests.set_index("request_id")
    assert len(srv.requests) == 45  # 5 warm-up requests of the client, then the 40 of the schedule
    assert set(ids.loc[~ids["ok"]].index) == {
        f"{client.meta.serving.request_id_prefix}-{k}" for k in (10, 20)
    }
    assert ids.loc[~ids["ok"], "error_stage"].tolist() == ["forward", "forward"]
    # The join is exact: client end to end from the send (from the due time minus the generator's
    # lag) = network + the server's own end to end, request by request.
    network = client.stages[client.stages["stage"] == "network"].set_index("request")["dur_ns"]
    ok = client.requests[client.requests["ok"]]
    for _, row in ok.iterrows():
        from_send = row["dur_ns"] - row["lag_ns"]
        assert from_send == network[row["request"]] + ids.loc[row["request_id"], "dur_ns"]
    assert len(measured) == 40
    # --otel: the server's spans, made after the run, ingest back to its own numbers.
    n_spans = 45 + 43 * 8 + 2 * 7  # a root each; 8 stages, 7 where forward raised (no serialize)
    assert n_spans == 45 + len(srv.stages)
    assert f"otel: {n_spans} spans of 45 requests to {server.out / 'otel-spans.jsonl'}" in stdout
    spans = ingest_otel(server.out / "otel-spans.jsonl")
    assert spans.requests["dur_ns"].tolist() == srv.requests["dur_ns"].tolist()
    assert spans.requests["ok"].tolist() == srv.requests["ok"].tolist()


TOKEN = "test-token-0123456789"


def test_shutdown_endpoint_and_a_client_that_hangs_up(served):
    server = served("--control-token", TOKEN)
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    body = b'{"x": -2}'  # forward sleeps 300 ms
    with socket.create_connection((host, int(port))) as s:
        s.sendall(
            b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )
        wait_for_requests(server, 1)  # queued: forward sleeps on it while the client hangs up
    time.sleep(0.6)
    with urllib.request.urlopen(
        urllib.request.Request(
            f"{server.url}/shutdown", method="POST", headers={"X-Workbench-Token": TOKEN}
        ),
        timeout=30,
    ) as r:
        assert json.loads(r.read()) == {"status": "shutting down"}
    code, stdout, stderr = server.stop(sig=None)
    # a client that hangs up is recorded, and is no failure of the server's: exit 0 (it was 1)
    assert code == 0 and "stopped by /shutdown: 1 requests, 1 failed (1 hung up)" in stdout
    assert stderr.count("the client disconnected before the response (recorded)") == 1
    run = load_run(server.out)
    assert run.requests["error_type"].tolist() == ["ClientDisconnected"]
    assert run.requests["error_stage"].tolist() == ["egress"]


def test_healthz(served):
    server = served("--gc", "default")
    with urllib.request.urlopen(f"{server.url}/healthz", timeout=30) as r:
        health = json.loads(r.read())
    assert health["status"] == "ok" and health["pipeline"] == "echo" and health["requests"] == 0
    assert health["stages"] == [
        "ingress",
        "batch_wait",
        "queue_wait",
        "parse",
        "forward",
        "serialize",
        "handoff",
        "egress",
    ]
    code, stdout, _ = server.stop()
    assert code == 0 and "0 requests, 0 failed" in stdout
    gc_note = load_run(server.out).meta.serving.gc
    assert (
        gc_note["mode"] == "default"
        and gc_note["frozen_objects"] == 0
        and "gc (default): " in stdout
    )


def test_a_port_in_use_is_one_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = workbench("serve", "--pipeline", PIPELINE, "--port", port, "--out", tmp_path / "x")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"workbench serve: error: port {port} on 127.0.0.1 is already in use; stop what listens there or pick another --port"
    ]


def test_an_unreachable_url_is_one_line(tmp_path):
    port = free_port()
    payloads = payload_file(tmp_path / "p.txt", 3)
    flags = ["--rate", 10, "--requests", 3]
    res = workbench(*load_url(f"http://127.0.0.1:{port}", payloads, tmp_path / "c", *flags))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"workbench load: error: --url http://127.0.0.1:{port}: cannot connect"
    )
    assert not (tmp_path / "c").exists()


PLAIN_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def test_a_server_without_server_timing_still_gives_end_to_end(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", PLAIN_SERVER], stdout=subprocess.PIPE, text=True, env=ENV
    )
    try:
        port = int(proc.stdout.readline())
        payloads = payload_file(tmp_path / "p.txt", 20)
        flags = ["--rate", 50, "--requests", 20, "--json"]
        res = workbench(*load_url(f"http://127.0.0.1:{port}", payloads, tmp_path / "c", *flags))
    finally:
        proc.kill()
        proc.wait(30)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (
        out["server_timing"] is False
        and out["network"] is None
        and out["server_end_to_end"] is None
    )
    assert out["end_to_end"]["count"] == 20 and out["failed"] == 0
    run = load_run(tmp_path / "c")
    assert run.stage_names == [] and run.stages.empty and len(run.requests) == 20


def test_sigterm_with_a_request_in_flight_answers_it_and_records_it(served):
    server = served("--control-token", TOKEN)
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    body = b'{"x": -2}'  # forward sleeps 300 ms
    with socket.create_connection((host, int(port))) as s:
        s.sendall(
            b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: late\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )
        wait_for_requests(server, 1)  # the server has taken the request (forward is sleeping on it)
        server.proc.send_signal(signal.SIGTERM)
        s.settimeout(30)
        reply = b""
        while chunk := s.recv(
            65536
        ):  # the server closes the connection after answering (it is stopping)
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 OK") and reply.endswith(b'{"y": -4}')
    code, stdout, _ = server.stop(sig=None)
    assert code == 0 and "stopped by SIGTERM: 1 requests, 0 failed" in stdout
    run = load_run(server.out)
    assert run.requests["request_id"].tolist() == ["late"] and run.requests["ok"].tolist() == [True]


def wait_for_requests(server, n, timeout_s=30):
    """Until the server's /healthz counts ``n`` requests taken."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if served_requests(server) >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"the server did not take {n} requests in {timeout_s} s")


def test_a_served_summary_that_raises_is_one_line_and_the_run_is_kept(tmp_path):
    """issue 35: the served run is saved before its summary; a summary that raises costs one line."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import workbench.batching.summary as s\n"
        "def planted(*a, **k):\n    raise RuntimeError('planted')\n"
        "s.load_summary = planted\n"
    )
    env = ENV | {"PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = tmp_path / "s"
    server = ServeProcess(["--pipeline", PIPELINE, "--port", "0", "--out", str(out)], env=env)
    with urllib.request.urlopen(
        urllib.request.Request(f"{server.url}/predict", data=b'{"x": 3}', method="POST"), timeout=30
    ) as r:
        assert r.status == 200
    code, stdout, stderr = server.stop(signal.SIGTERM, 60)
    assert code == 0, stderr
    assert [line for line in stderr.splitlines() if "planted" in line] == [
        f"workbench serve: the load summary failed (RuntimeError: planted); the run is saved at "
        f"{out} without it (a bug in the workbench: please report it)"
    ]
    assert "stopped by SIGTERM: 1 requests, 0 failed" in stdout
    assert load_run(out).requests["ok"].tolist() == [True]
