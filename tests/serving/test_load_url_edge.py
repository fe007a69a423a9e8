"""load --url end to end: the printed policy is the server's, and a server killed mid-run loses no answered
request (the run folder is written, the rest are failures, exit 1)."""

import contextlib
import json
import signal
import time
import urllib.request

import pytest

from workbench.record import load_run

from scripted_server import Scripted, reply
from served_helpers import payload_file
from tests.support.cli import load_url, main_output, started, workbench


def test_the_header_prints_the_servers_own_policy(served, tmp_path):
    server = served(
        "--max-batch-size", "4", "--concurrency", "1"
    )  # the helper adds --max-wait-ms 1
    payloads = payload_file(tmp_path / "p.txt", 5)
    res = workbench(
        *load_url(server.url, payloads, tmp_path / "client", "--requests", "10", "--rate", "200")
    )
    assert res.returncode == 0, res.stderr
    assert "max_batch_size=4 max_wait_ms=1 concurrency=1 (the server's policy)" in res.stdout
    assert "max_batch_size=8" not in res.stdout


def test_a_server_killed_mid_run_keeps_the_answered_requests(served, tmp_path):
    server = served()
    out = tmp_path / "client"
    payloads = payload_file(tmp_path / "p.txt", 5)
    flags = ["--rate", "100", "--duration", "3", "--timeout", "2"]
    load = started(*load_url(server.url, payloads, out, *flags))
    _wait_received(
        server.url, 30, load
    )  # answered requests first (a fixed sleep lost the race at load 25)
    server.proc.send_signal(signal.SIGKILL)
    stdout, stderr = load.communicate(timeout=60)
    assert load.returncode == 1, stdout + stderr
    meta = json.loads((out / "run.json").read_text())
    assert (
        0 < meta["load"]["failed"] < meta["load"]["requests"]
    )  # answered before the kill, failed after it
    assert "run written to" in stdout
    assert "got no answer: the server closed or refused their connection" in stderr


def _wait_received(url, n, client, timeout_s=60.0):
    """Until the server at ``url`` has received ``n`` requests (its /healthz count), or ``client`` ended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and client.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(url + "/healthz", timeout=5) as reply_:
                if json.loads(reply_.read())["requests"] >= n:
                    return
        time.sleep(0.05)
    raise AssertionError(f"the server never received {n} requests (client exit {client.poll()})")


def _load(url, tmp_path, *extra):
    out = tmp_path / "client"
    payloads = payload_file(tmp_path / "p.txt", 3)
    res = workbench(
        *load_url(url, payloads, out, "--requests", "6", "--rate", "200", *extra), timeout=120
    )
    return res, out


@pytest.mark.parametrize("json_output", [False, True])
def test_a_plain_post_predict_server_works_in_text_and_json(tmp_path, json_output):
    server = Scripted(reply(body=b'{"y": 1}'))  # no Server-Timing, no batch headers, no /healthz
    res, out = _load(server.url, tmp_path, *(["--json"] if json_output else []))
    assert res.returncode == 0, res.stderr
    if json_output:
        got = json.loads(res.stdout)
        assert got["server_timing"] is False and got["mean_batch_size"] is None
        assert got["failed"] == 0 and got["notes"] == []
    else:
        assert "mean batch size -, utilization 0.0%" in res.stdout
        assert "the server sent no Server-Timing: end to end only" in res.stdout
    assert main_output(["show", str(out)])[0] == 0  # the reader in this process


HEALTHZ = {"cpu_s": 1.0, "stages": ["ingress", "forward"], "pipeline": "p"}


@pytest.mark.parametrize(
    "timing, healthz, notes",
    [
        (  # rounded to whole ms: the total is past what the client measured
            "ingress;dur=0, forward;dur=1000, total;dur=1000",
            HEALTHZ,
            [
                "6 of 6 responses had a Server-Timing total past the client's end to end (cut to "
                "it, network 0)",
                "6 of 6 responses had stages adding up past the Server-Timing total (cut at it)",
            ],
        ),
        (
            "ingress;dur=0.001, network;dur=0.001, other;dur=0.001, total;dur=0.004",
            HEALTHZ,
            [
                "6 of 6 responses had a stage 'network' that is not one of the server's "
                "(unattributed)",
                "6 of 6 responses had a stage 'other' that is not one of the server's (unattributed)",
            ],
        ),
        (  # no /healthz: the stages are the names reported, the reserved one left out
            "network;dur=0.001, forward;dur=0.002, total;dur=0.004",
            None,
            [
                "6 of 6 responses had a stage 'network' that is not one of the server's "
                "(unattributed)"
            ],
        ),
        (
            "ingress;dur=0.001, total;dur=0.004",
            {**HEALTHZ, "cpu_s": "abc", "policy": {"max_batch_size": 0}},
            [
                '/healthz cpu_s "abc" is not a number of seconds from 0 to 1e9: left out',
                '/healthz policy {"max_batch_size": 0} is not a batching policy: left out',
            ],
        ),
    ],
)
def test_server_times_that_do_not_fit_are_notes_and_the_run_shows(tmp_path, timing, healthz, notes):
    healthz = None if healthz is None else json.dumps(healthz).encode()
    server = Scripted(reply(headers=f"Server-Timing: {timing}"), healthz)
    res, out = _load(server.url, tmp_path, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["notes"] == notes
    assert json.loads((out / "run.json").read_text())["serving"]["notes"] == notes
    rc, _, err = main_output(["show", str(out), "--json"])  # the reader in this process
    assert rc == 0, err
    run = load_run(out)
    assert run.stage_names[0] == "network" and run.stage_names.count("network") == 1
    assert (run.stages["dur_ns"] >= 0).all()
    per_request = run.stages.groupby("request")["dur_ns"].sum()
    assert (per_request <= run.requests.set_index("request")["dur_ns"]).all()
