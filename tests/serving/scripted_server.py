"""A scripted HTTP/1.1 server on loopback for the client's tests: every ``POST`` gets the same response
head (the test's bytes), ``GET /healthz`` the test's JSON (404 without); ``drip_s`` sends the
response one byte per ``drip_s`` (a slow server)."""

import socket
import threading
import time


def reply(status_line: str = "HTTP/1.1 200 OK", headers: str = "", body: bytes = b"ok") -> bytes:
    """A whole response: ``headers`` are ``Name: value`` lines joined by ``\\r\\n`` (or empty)."""
    extra = f"{headers}\r\n" if headers else ""
    head = f"{status_line}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode("latin-1") + body


class Scripted:
    def __init__(self, post: bytes, healthz: bytes | None = None, drip_s: float = 0.0):
        self.post, self.healthz, self.drip_s = post, healthz, drip_s
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            try:
                while True:
                    while b"\r\n\r\n" not in buf:
                        data = conn.recv(65536)
                        if not data:
                            return
                        buf += data
                    head, _, buf = buf.partition(b"\r\n\r\n")
                    lines = head.decode("latin-1").lower().split("\r\n")
                    length = next(
                        (int(ln.split(":")[1]) for ln in lines if ln.startswith("content-length")),
                        0,
                    )
                    while len(buf) < length:
                        buf += conn.recv(65536)
                    buf = buf[length:]
                    self.requests += 1
                    post = lines[0].startswith("post")
                    self._send(conn, self._response(lines[0]), self.drip_s if post else 0.0)
            except OSError:
                return

    def _response(self, request_line: str) -> bytes:
        if request_line.startswith("post"):
            return self.post
        if request_line.startswith("get /healthz") and self.healthz is not None:
            return reply(body=self.healthz, headers="Content-Type: application/json")
        return reply("HTTP/1.1 404 Not Found", body=b"")

    def _send(self, conn: socket.socket, data: bytes, drip_s: float) -> None:
        if not drip_s:
            return conn.sendall(data)
        for k in range(len(data)):
            conn.sendall(data[k : k + 1])
            time.sleep(drip_s)

    def close(self) -> None:
        self.sock.close()
