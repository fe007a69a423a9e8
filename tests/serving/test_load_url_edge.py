"""load --url end to end: the printed policy is the server's, and a server killed mid-run loses no answered
request (the run folder is written, the rest are failures, exit 1)."""

import json
import signal
import subprocess
import sys
import time

from served_helpers import ENV, payload_file, workbench


def test_the_header_prints_the_servers_own_policy(served, tmp_path):
    server = served(
        "--max-batch-size", "4", "--concurrency", "1"
    )  # the helper adds --max-wait-ms 1
    res = workbench(
        "load",
        "--url",
        server.url,
        "--payloads",
        payload_file(tmp_path / "p.txt", 5),
        "--requests",
        "10",
        "--rate",
        "200",
        "--out",
        tmp_path / "client",
    )
    assert res.returncode == 0, res.stderr
    assert "max_batch_size=4 max_wait_ms=1 concurrency=1 (the server's policy)" in res.stdout
    assert "max_batch_size=8" not in res.stdout


def test_a_server_killed_mid_run_keeps_the_answered_requests(served, tmp_path):
    server = served()
    out = tmp_path / "client"
    load = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench",
            "load",
            "--url",
            server.url,
            "--payloads",
            str(payload_file(tmp_path / "p.txt", 5)),
            "--rate",
            "100",
            "--duration",
            "3",
            "--timeout",
            "2",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    time.sleep(2.0)
    server.proc.send_signal(signal.SIGKILL)
    stdout, stderr = load.communicate(timeout=60)
    assert load.returncode == 1, stdout + stderr
    meta = json.loads((out / "run.json").read_text())
    assert (
        0 < meta["load"]["failed"] < meta["load"]["requests"]
    )  # answered before the kill, failed after it
    assert "run written to" in stdout
    assert "got no answer: the server closed or refused their connection" in stderr
