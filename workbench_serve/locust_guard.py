"""Locust's master/worker sockets, bounded and strict, in the Locust engine's own processes.

Locust's ZeroMQ channel takes any message from anyone on the port: a message
that does not decode, or a heartbeat of the wrong shape, ended its receive
loop (the run lost); a 200 MiB message was taken in. :func:`guard_rpc`
replaces its socket classes in this process (a master or a worker started by
the workbench: nothing else runs there) with ones that cap a message's size
before the bind or connect and drop, with a line on stderr, what does not
decode, names another sender, or is of a kind the workbench does not use.
The workbench's own messages are checked further when opened
(:mod:`workbench_serve.locust_wire`).
"""

from __future__ import annotations

import zmq.green as zmq
from locust.exception import RPCError, RPCReceiveError
from locust.rpc import Message, zmqrpc
from zmq.error import ZMQError

from .locust_wire import MAX_MESSAGE_BYTES, MAX_PLAN_BYTES


def guard_rpc() -> None:
    """Locust's sockets in this process (a master or a worker: nothing else runs here) bounded and
    strict: a message over the size limit drops its sender; one that does not decode, names another
    sender or is of a kind the workbench does not use is dropped with a line on stderr."""

    def checked(data: list, allowed: dict) -> tuple[str, Message] | None:
        """``(sender, message)``, None for a kind dropped quietly (Locust's statistics), or
        RPCReceiveError (logged by Locust, and the message dropped)."""
        if len(data) != 2:
            raise RPCReceiveError(f"a message of {len(data)} parts")
        try:
            addr, msg = data[0].decode(), Message.unserialize(data[1])
        except Exception as exc:  # noqa: BLE001  (msgpack raises many kinds on bytes that are not its own)
            raise RPCReceiveError(
                f"a message that does not decode ({type(exc).__name__})"
            ) from None
        if msg.type in QUIET:
            return None
        check = allowed.get(msg.type) if isinstance(msg.type, str) else None
        if check is None or not isinstance(msg.node_id, str) or not check(msg.data):
            raise RPCReceiveError(
                f"a message of a kind or shape not used here ({str(msg.type)[:40]})"
            )
        return addr, msg

    class Server(zmqrpc.Server):
        def __init__(self, host, port):  # Locust's, with the limit set before the bind
            zmqrpc.BaseSocket.__init__(self, zmq.ROUTER, self.ipv4_only(host, port))
            self.socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
            try:
                self.socket.bind(f"tcp://{host}:{port}")
            except ZMQError as exc:
                raise RPCError(f"Socket bind failure: {exc}") from None
            self.port = port

        def recv_from_client(self):
            got = None
            while got is None:
                try:
                    got = checked(self.socket.recv_multipart(), TO_MASTER)
                except ZMQError as exc:
                    raise RPCError("ZMQ network broken") from exc
            addr, msg = got
            if msg.node_id != addr:
                raise RPCReceiveError(f"a message from {addr[:40]} in the name of another worker")
            return addr, msg

    class Client(zmqrpc.Client):
        def __init__(self, host, port, identity):  # Locust's, with the limit set before the connect
            zmqrpc.BaseSocket.__init__(self, zmq.DEALER, self.ipv4_only(host, port))
            self.socket.setsockopt(zmq.IDENTITY, identity.encode())
            self.socket.setsockopt(zmq.MAXMSGSIZE, MAX_PLAN_BYTES)
            self.socket.connect(f"tcp://{host}:{port}")

        def recv(self):
            got = None
            while got is None:
                try:
                    got = checked([b"master", self.socket.recv()], TO_WORKER)
                except ZMQError as exc:
                    raise RPCError("ZMQ network broken") from exc
            return got[1]

    zmqrpc.Server, zmqrpc.Client = Server, Client


def _any(data) -> bool:
    return True


def _heartbeat(data) -> bool:
    if not (isinstance(data, dict) and isinstance(data.get("state"), str)):
        return False
    numbers = data.get("current_cpu_usage"), data.get("current_memory_usage", 0)
    return all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers)


QUIET = ("stats", "spawning", "spawning_complete", "logs", "exception")  # Locust's, not used here
# the kinds of message each side takes, with a check of their data (the sealed ones are opened later)
TO_MASTER = {
    "client_ready": lambda data: isinstance(data, str) and len(data) < 64,
    "client_stopped": _any,
    "quit": _any,
    "heartbeat": _heartbeat,
    "wb_hello": _any,
    "wb_ready": _any,
    "wb_progress": _any,
    "wb_results": _any,
}
TO_WORKER = {
    "ack": lambda data: isinstance(data, dict) and isinstance(data.get("index"), int),
    "heartbeat": _any,
    "quit": _any,
    "reconnect": _any,
    "wb_plan": _any,
    "wb_start": _any,
    "wb_stop": _any,
}
