"""``serve`` of a generative (streaming) pipeline and ``load --url`` reading its event streams:
real processes on loopback, the tiny pipeline of ``streamed_pipeline.py``."""

import errno
import http.client
import json
import socket
import threading
import time

from served_helpers import HERE, workbench
from tests.support.cli import load_url, main_output
from workbench.record import load_run
from workbench_serve.sse import Decoder

TINYGEN = f"{HERE / 'streamed_pipeline.py'}:build"


def post(port: int, body: dict) -> tuple[int, str, list[tuple[str, str]]]:
    """One request read to its end: status, content type and its events."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/predict", json.dumps(body))
    resp = conn.getresponse()
    events = Decoder().feed(resp.read())
    conn.close()
    return resp.status, resp.getheader("Content-Type"), events


def test_load_url_times_units_from_the_due_time_and_counts_a_failed_stream(served, tmp_path):
    server = served("--max-batch-size", "1", pipeline=TINYGEN)
    rows = [{"x": k, "n": 4} for k in range(20)]
    rows[5], rows[11] = {"x": -1, "n": 4}, {"x": -3, "n": 4}  # fails after 2 units / before any
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("".join(json.dumps(r) + "\n" for r in rows))
    flags = ["--rate", 50, "--requests", 20, "--ttft-ms", 60_000, "--tpot-ms", 60_000, "--json"]
    res = workbench(*load_url(server.url, payloads, tmp_path / "client", *flags))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["failed"] == 2 and out["failures"]["generate"]["count"] == 2
    tokens = out["tokens"]
    assert (tokens["stage"], tokens["requests"], tokens["tokens"]) == ("generate", 18, 72)
    assert tokens["ttft"]["count"] == 18 and tokens["itl"]["count"] == 54
    assert tokens["tpot"]["count"] == 18 and tokens["prefill"]["count"] == 18
    assert out["streams"] == {"requests": 19, "units": 74, "failed_requests": 1, "failed_units": 2}
    assert out["goodput"] == {
        "ttft_ms": 60_000,
        "tpot_ms": 60_000,
        "requests": 20,
        "good": 18,
        "share": 0.9,
    }

    client = load_run(tmp_path / "client")
    units, req = client.units, client.requests.set_index("request")
    assert units.groupby("request").size().to_dict() == {
        k: 2 if k == 5 else 4 for k in range(20) if k != 11
    }
    assert req.loc[5, "error_type"] == "ValueError" and req.loc[11, "error_type"] == "ValueError"
    first = units.groupby("request")["at_ns"].min()
    assert (first > req.loc[first.index, "start_ns"]).all()  # after each request's due time
    rc, shown, err = main_output(["show", str(tmp_path / "client")])  # readers: in this process
    assert rc == 0, err
    assert "tokens: generate streamed 72 units in 18 requests" in shown
    rc, compared, err = main_output(["compare", str(tmp_path / "client"), str(tmp_path / "client")])
    assert rc == 0, err
    assert "tokens (A 18 requests, 54 gaps; B 18 requests, 54 gaps" in compared

    code, _, stderr = server.stop()
    assert code == 1, stderr  # the server's run holds the 2 failed requests
    assert stderr.count("failed after its first unit (end event sent, recorded)") == 1
    assert stderr.count("500 sent, recorded") == 1  # x=-3: a plain 500, no stream began


def test_a_batch_streams_each_request_its_own_units(served):
    server = served("--max-batch-size", "4", "--max-wait-ms", "300", pipeline=TINYGEN)
    port = int(server.url.rsplit(":", 1)[1])
    got = {}

    def one(x):
        got[x] = post(port, {"x": x, "n": 3})

    threads = [threading.Thread(target=one, args=(x,)) for x in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, (status, kind, events) in got.items():
        assert (status, kind) == (200, "text/event-stream")
        assert events[:3] == [("", str(x * 10 + s)) for s in range(3)]
        name, end = events[3]
        end = json.loads(end)
        assert (
            name == "end"
            and end["status"] == 200
            and end["body"] == json.dumps({"tokens": [x * 10, x * 10 + 1, x * 10 + 2]})
        )
        assert "generate;dur=" in end["server_timing"] and end["batch_size"] >= 1
    status, kind, events = post(port, {"x": -3, "n": 3})  # no unit before it failed: a plain 500
    assert (status, kind, events) == (500, "application/json", [])
    code, _, stderr = server.stop()
    assert code == 1, stderr


def test_a_client_that_stops_reading_its_stream_is_cut_off(served):
    server = served("--send-timeout", "0.5", "--max-pipelined", "100000", pipeline=TINYGEN)
    port = int(server.url.rsplit(":", 1)[1])
    body = json.dumps({"x": 1, "n": 2000, "pad": 65536}).encode()  # 130 MB of units, 2 ms apart
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # its stream backs up soon
        s.connect(("127.0.0.1", port))
        s.sendall(
            b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
            # pipelined behind it, kernel-buffered: the server's abort resets (an RST) what it holds unread
            + b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 50_000
        )
        deadline, error = time.monotonic() + 30, 0
        while not error and time.monotonic() < deadline:  # read nothing: only the socket's error
            time.sleep(0.1)
            error = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    assert error == errno.ECONNRESET  # aborted by the server's send timeout
    assert post(port, {"x": 2, "n": 2})[0] == 200
    code, _, stderr = server.stop()
    assert code == 0, stderr  # a client that hung up is recorded, not a failure of the server
    assert "disconnected during its stream (recorded)" in stderr
    run = load_run(server.out)
    refused = json.loads((server.out / "run.json").read_text())["serving"]["edge"]["refused"]
    assert refused == {"send_timeout": 1}
    assert run.requests["error_type"].tolist() == ["ClientDisconnected", None]
