"""The room's edge against a real server on loopback (seconds each): the token on every content path, no 500
on odd paths, plain GETs bounded per client and culled after the grace, a page closed while loading releasing
its kernel, an unread websocket flood closed with bounded memory, and no traceback in the log."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("voila", reason="voila is not installed")
pytest.importorskip("ipykernel", reason="ipykernel is not installed")
nbformat = pytest.importorskip("nbformat")
pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc"
)

TOKEN = "room-test-token-0123"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Room:
    def __init__(self, folder: Path, log: Path):
        for name, source in (("tiny", "x = 1 + 1\nx"), ("slow", "import time\ntime.sleep(5)\n1")):
            nbformat.write(
                nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]),
                folder / f"{name}.ipynb",
            )
        (folder / "data.json").write_text('{"secret": 1}')
        self.port, self.log = free_port(), log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "workbench.room",
                str(folder),
                "--port",
                str(self.port),
                "--token",
                TOKEN,
                "--pool",
                "0",
                "--unconnected-grace-s",
                "2",
                "--cull-interval-s",
                "1",
                "--max-unconnected-per-client",
                "2",
                "--ws-unread-limit-mib",
                "1",
            ],
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                assert self.proc.poll() is None, log.read_text()[-2000:]
                time.sleep(0.2)
        raise AssertionError("the room did not listen within 90 s")

    def get(self, path: str, token: bool = True) -> tuple[int, dict, bytes]:
        url = f"http://127.0.0.1:{self.port}{path}" + (
            ("&" if "?" in path else "?") + f"token={TOKEN}" if token else ""
        )
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(url, timeout=60) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read()

    def wait_log(self, pattern: str, count: int = 1, timeout_s: float = 15) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log.read_text()
            if len(re.findall(pattern, text)) >= count:
                return text
            time.sleep(0.2)
        raise AssertionError(
            f"{count} x {pattern!r} not in the log within {timeout_s} s:\n{self.log.read_text()[-3000:]}"
        )

    def rss_mib(self) -> float:
        return (
            int(
                re.search(
                    r"VmRSS:\s+(\d+)", Path(f"/proc/{self.proc.pid}/status").read_text()
                ).group(1)
            )
            / 1024
        )


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    folder = tmp_path_factory.mktemp("room")
    server = Room(folder, folder / "room.log")
    yield server
    server.proc.terminate()
    try:
        server.proc.wait(30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait(30)


def test_the_token_covers_the_rooms_files_and_odd_paths_are_not_500(room):
    assert room.get("/voila/files/data.json", token=False)[0] == 302  # to the login page (was 200)
    assert room.get("/voila/files/data.json")[0] == 200
    assert room.get("/workbench/room/config.js", token=False)[0] == 302
    assert room.get("/workbench/room/config.js")[0] == 200
    assert room.get("/logout", token=False)[0] == 302  # was 500
    for odd in (
        "/voila/templates/..%2F..%2F..%2Fetc%2Fpasswd",
        "/voila/templates/x",
        "/voila/templates/lab/static/..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd",
    ):
        assert room.get(odd)[0] == 404, odd  # was 500


def test_plain_gets_are_bounded_per_client_and_their_kernels_culled_after_the_grace(room):
    started = time.monotonic()
    assert [room.get("/voila/render/tiny.ipynb")[0] for _ in range(2)] == [200, 200]
    status, headers, body = room.get("/voila/render/tiny.ipynb")
    assert (
        status == 503
        and headers["Retry-After"] == "2"
        and b"2 pages loaded and never connected" in body
    )
    room.wait_log(r"Culling kernel \S+: its page loaded \d+ s ago and never connected", 2)
    assert time.monotonic() - started < 20  # the 2-s grace after the load, not 5 minutes
    assert room.get("/voila/render/tiny.ipynb")[0] == 200  # the slots are free again


def test_a_page_closed_while_loading_releases_its_kernel(room):
    with socket.create_connection(("127.0.0.1", room.port)) as s:
        s.sendall(
            f"GET /voila/render/slow.ipynb?token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        )
        s.settimeout(30)
        assert s.recv(100).startswith(
            b"HTTP/1.1 200"
        )  # the page started streaming: its kernel runs the cell
        time.sleep(1.0)
    room.wait_log(r"Shutting down kernel \S+: its page was closed while loading")


def frame(payload: bytes) -> bytes:
    """A masked websocket text frame (clients mask)."""
    mask, n = os.urandom(4), len(payload)
    size = (
        bytes([0x80 | n])
        if n < 126
        else bytes([0x80 | 126]) + struct.pack(">H", n)
        if n < 65536
        else bytes([0x80 | 127]) + struct.pack(">Q", n)
    )
    return bytes([0x81]) + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def test_an_unread_websocket_flood_is_closed_and_the_servers_memory_bounded(room):
    html = room.get("/voila/render/tiny.ipynb")[2].decode()
    kernel = re.search(r'"kernelId": "([0-9a-f-]+)"', html).group(1)
    before = room.rss_mib()
    with socket.create_connection(("127.0.0.1", room.port)) as s:
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(
            f"GET /api/kernels/{kernel}/channels?token={TOKEN}&session_id=t HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        assert s.recv(12) == b"HTTP/1.1 101"
        s.settimeout(20)
        try:  # 1,500 requests with 8-KB ids, their replies never read
            for k in range(1500):
                msg = {
                    "header": {
                        "msg_id": f"{k}-" + "i" * 8000,
                        "msg_type": "kernel_info_request",
                        "username": "",
                        "session": "t",
                        "date": "",
                        "version": "5.3",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "content": {},
                    "channel": "shell",
                    "buffers": [],
                }
                s.sendall(frame(json.dumps(msg).encode()))
        except OSError:
            pass  # closed by the server: what the test wants
        room.wait_log(
            r"Closing a kernel websocket from 127.0.0.1: over 1048576 bytes its page has not read"
        )
    # unbounded, the same flood took the server up 79 MB (96 -> 175 MB); bounded at 1 MiB, 27 MB
    assert room.rss_mib() - before < 60


def test_no_traceback_in_the_rooms_log(room):
    time.sleep(1.5)  # one more cull pass over the kernels ended above
    text = room.log.read_text()
    assert "Traceback" not in text and "never retrieved" not in text, text[-3000:]
