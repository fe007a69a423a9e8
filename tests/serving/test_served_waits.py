"""The waits of a served run (issue 38): ``serve`` samples every thread of its process, so ``audit`` of
the server's run folder names a lock a background thread holds, its waiting line and the holder's
frame; the ``load --url`` client's run says where those waits are."""

import json

from tests.conftest import CHECKSUM
from served_helpers import Served, payload_file, workbench
from tests.support.cli import load_url, main_output

LOCKED = (
    """
import json, threading, time
from workbench import Pipeline
"""
    + CHECKSUM
    + """
def build(config):
    lock, rows = threading.Lock(), [(i, i + 1) for i in range(20_000)]

    # holds the lock 30-40 ms, 10-20 of them on CPU, of every 150: a fifth of requests wait. The waits'
    # samples must see it run: 1-2 ms on CPU did not, once, on a busy machine; one checksum (5-10 ms, then
    # 30 ms asleep) left it 0.0006-0.6 ms of CPU per slow request (3 runs) and none once in CI; two
    # checksums, 1.0-2.3 ms (4 runs)
    def snapshot_forever():
        while True:
            with lock:
                checksum(rows)
                checksum(rows)
                time.sleep(0.02)
            time.sleep(0.12)

    threading.Thread(target=snapshot_forever, name="snapshot", daemon=True).start()
    p = Pipeline("locked", items=lambda: (json.dumps({"x": k}).encode() for k in range(10**9)))

    def record(batch):
        with lock:
            return [json.loads(b) for b in batch]

    def reply(rows):
        return [json.dumps(r).encode() for r in rows]

    p.add("record", record)
    p.add("reply", reply)
    return p
"""
)


def test_audit_of_a_served_run_names_the_lock_its_line_and_the_holders_frame(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(LOCKED)
    server = Served(tmp_path / "server", "--max-batch-size", "1", pipeline=f"{planted}:build")
    try:
        payloads = payload_file(tmp_path / "payloads.txt", 200)
        client = tmp_path / "client"
        res = workbench(*load_url(server.url, payloads, client, "--rate", 50, "--requests", 200))
        assert res.returncode == 0, res.stderr
    finally:
        code, _, stderr = server.stop()
    assert code == 0, stderr
    rc, audited, err = main_output(["audit", str(server.out), "--json"])  # readers: this process
    assert rc == 0, err
    findings = json.loads(audited)["runs"][0]["findings"]
    found = {f["kind"]: f for f in findings}
    lock, waiting = found["lock"], LOCKED.splitlines().index("        with lock:") + 1
    assert lock["stage"] == "record" and lock["numbers"]["site"] == f"record (planted.py:{waiting})"
    ran = lock["numbers"]["meanwhile"][0]
    assert ran["thread"] == "snapshot"
    assert ran["frame"].startswith(("checksum (planted.py:", "snapshot_forever (planted.py:"))
    # a collection pause of the busy machine may make the served gc finding: one, never two
    assert [f["kind"] for f in findings].count("gc") <= 1
    # the client sampled no server thread: its show and audit say where the waits are
    note = "`workbench audit SERVER_RUN` (the serve run folder) names their waits"
    shown = main_output(["show", str(client)])[1]
    assert "waits: the served stages ran in the server's process" in shown
    assert note in shown
    audited = main_output(["audit", str(client), "--json"])[1]
    assert any(note in n for n in json.loads(audited)["runs"][0]["notes"])
