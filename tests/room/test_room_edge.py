"""The room's edge against a real server on loopback (seconds each): the token on every content path, no 500
on odd paths, plain GETs bounded per client and culled after the grace, a page closed while loading releasing
its kernel, an unread websocket flood closed with bounded memory, and no traceback in the log."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
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


def write_notebook(path: Path, source: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), path)


class Room:
    """``python -m workbench_room FOLDER --token TOKEN ARGS`` on a free loopback port, its log in ``log``."""

    def __init__(self, folder: Path, log: Path, args: list[str]):
        self.port, self.log = free_port(), log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workbench_room", str(folder), "--port", str(self.port)]
            + ["--token", TOKEN, *args],
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

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)

    def get(self, path: str, token: bool = True, client: str = "127.0.0.1", method: str = "GET"):
        """``(status, headers, body)`` of a GET from the loopback address ``client`` (no redirect followed)."""
        conn = http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=60, source_address=(client, 0)
        )
        try:
            conn.request(method, with_token(path) if token else path)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def websocket(self, path: str, token: bool = True, client: str = "127.0.0.1"):
        """``(status, socket)``: a websocket handshake from ``client``; on 101 the socket is open."""
        s = socket.create_connection(
            ("127.0.0.1", self.port), timeout=30, source_address=(client, 0)
        )
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(
            f"GET {with_token(path) if token else path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = s.recv(12)
        return int(head.split()[1]), s

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


def with_token(path: str) -> str:
    return path + ("&" if "?" in path else "?") + f"token={TOKEN}"


def page_kernel(html: bytes) -> str:
    """The kernel id a page was given."""
    return re.search(r'"kernelId": "([0-9a-f-]+)"', html.decode()).group(1)


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    folder = tmp_path_factory.mktemp("room")
    write_notebook(folder / "tiny.ipynb", "x = 1 + 1\nx")
    write_notebook(folder / "slow.ipynb", "import time\ntime.sleep(5)\n1")
    (folder / "data.json").write_text('{"secret": 1}')
    args = ["--pool", "0", "--unconnected-grace-s", "2", "--cull-interval-s", "1"]
    server = Room(
        folder,
        folder / "room.log",
        [*args, "--max-unconnected-per-client", "2", "--ws-unread-limit-mib", "1"],
    )
    yield server
    server.stop()


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
    kernel = page_kernel(room.get("/voila/render/tiny.ipynb")[2])
    before = room.rss_mib()
    status, s = room.websocket(f"/api/kernels/{kernel}/channels?session_id=t")
    with s:
        assert status == 101
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


def test_a_page_reports_its_first_view_drawn_with_the_token(room):
    """Issue 40: the template's script says when the page drew its first view; the pool's refill waits
    for it (workbench_room.kernel_manager) instead of running the notebook while the page draws."""
    status, _, html = room.get("/voila/render/tiny.ipynb", client="127.0.0.5")
    assert status == 200 and b"workbench/room/drawn/" in html
    drawn = f"/workbench/room/drawn/{page_kernel(html)}"
    assert room.get(drawn, token=False, client="127.0.0.5", method="POST")[0] == 403
    assert room.get(drawn, client="127.0.0.5", method="POST")[0] == 204


def test_no_traceback_in_the_rooms_log(room):
    time.sleep(1.5)  # one more cull pass over the kernels ended above
    text = room.log.read_text()
    assert "Traceback" not in text and "never retrieved" not in text, text[-3000:]


POOLED = "/voila/render/dashboards/pooled.ipynb"


@pytest.fixture(scope="module")
def shared_room(tmp_path_factory):
    """A room of 12 kernels with a pool of 4: one address may hold max(4, 12 // 2) = 6 (the default)."""
    folder = tmp_path_factory.mktemp("shared")
    write_notebook(folder / "dashboards" / "pooled.ipynb", "x = 1 + 1\nx")
    args = ["--pool", "0", "--pool", "pooled=4", "--max-kernels", "12", "--cull-interval-s", "1"]
    server = Room(
        folder,
        folder / "room.log",
        # a plain GET never reports its first view drawn, so the pool's refill waited out the default
        # 20 s for it, and the one-address test with it (21 s; 2.6 s with a 1 s wait)
        [
            *args,
            "--unconnected-grace-s",
            "300",
            "--cull-connected-idle-s",
            "10",
            "--refill-wait-s",
            "1",
        ],
    )
    server.kernels = []  # the kernels of 127.0.0.1's pages, shared by the tests below in order
    server.sockets = []
    yield server
    for s in server.sockets:
        s.close()
    server.stop()


def test_a_class_behind_one_address_opens_the_pool_size_in_pages_with_no_503(shared_room):
    """Issue 40: 2 of 5 pages from one address got 503 ("already has 3 pages loaded and never connected")."""
    pages = [shared_room.get(POOLED) for _ in range(4)]
    assert [status for status, _, _ in pages] == [200] * 4, pages[-1][2][-300:]
    shared_room.kernels += [page_kernel(body) for _, _, body in pages]


def test_one_address_holding_its_share_of_kernels_connected_is_refused_and_another_gets_in(
    shared_room,
):
    """Issue 39: one address loading pages and connecting each kernel's websocket took all 40 kernels."""
    more = [shared_room.get(POOLED) for _ in range(2)]
    assert [status for status, _, _ in more] == [200, 200]
    shared_room.kernels += [page_kernel(body) for _, _, body in more]
    for kernel in shared_room.kernels:
        status, s = shared_room.websocket(f"/api/kernels/{kernel}/channels?session_id=t")
        shared_room.sockets.append(s)
        assert status == 101
    status, headers, body = shared_room.get(POOLED)
    assert status == 503 and headers["Retry-After"] == "300"
    assert b"127.0.0.1 already holds 6 of the room's kernels (max_kernels_per_client=6)" in body
    assert shared_room.get(POOLED, client="127.0.0.2")[0] == 200


def test_every_websocket_path_requires_the_token(shared_room):
    """/voila/query/KERNEL answered anyone (a victim page's query string, token included) and held 500
    sockets open."""
    kernel = shared_room.kernels[0]
    for path in (f"/voila/query/{kernel}", f"/api/kernels/{kernel}/channels?session_id=u"):
        status, s = shared_room.websocket(path, token=False, client="127.0.0.3")
        s.close()
        assert status == 403, path
    status, s = shared_room.websocket(f"/voila/query/{kernel}")
    s.close()
    assert status == 101
    status, s = shared_room.websocket("/voila/query/00000000-0000-4000-8000-000000000000")
    s.close()
    assert status == 404  # no such kernel


def test_connected_pages_that_send_nothing_are_culled_and_their_client_gets_in_again(shared_room):
    """Connected kernels were never culled: what a client held without using it stayed held."""
    shared_room.wait_log(
        r"Culling kernel \S+: its page is connected but sent nothing for \d+ s", 6, timeout_s=60
    )
    assert shared_room.get(POOLED)[0] == 200


def test_no_traceback_in_the_shared_rooms_log(shared_room):
    text = shared_room.log.read_text()
    assert "Traceback" not in text and "never retrieved" not in text, text[-3000:]
