"""Kernel ports no other program takes without asking: the room's kernels start together without colliding.

jupyter_client picks a kernel's five ports by binding port 0 and closing the socket
(:class:`jupyter_client.connect.LocalPortCache`); the kernel binds them a second or more later. Meanwhile
every kernel that is starting binds its IOPub pipe with pyzmq's ``bind_to_random_port`` (a random port in
49152-65535), and the OS hands out its ephemeral range (Linux: 32768-60999) to anyone binding port 0. With
a class opening its pages at once a starting kernel took a port picked for another one, which then died
with ``ZMQError: Address already in use`` and left its page waiting. :class:`KernelPorts` picks from below
both ranges instead, in turn from a random start (two rooms on one machine do not march in step),
skipping a port that is bound or that a kernel of this server holds.
"""

from __future__ import annotations

import errno
import random
import socket
from pathlib import Path

from jupyter_client.connect import LocalPortCache

ZMQ_RANDOM_PORTS = range(
    49152, 65536
)  # pyzmq's bind_to_random_port defaults (ipykernel's IOPub pipe)
EPHEMERAL_DEFAULT = range(49152, 65536)  # IANA's dynamic ports: macOS and Windows hand these out
PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
MOST_PORTS = 10_000


def ephemeral_ports(path: Path = PORT_RANGE_FILE) -> range:
    """The ports the OS hands to a socket bound to port 0 (Linux: ``ip_local_port_range``)."""
    try:
        low, high = (int(n) for n in path.read_text().split())
    except (OSError, ValueError):
        return EPHEMERAL_DEFAULT
    return range(low, high + 1)


def kernel_port_range(ephemeral: range) -> range:
    """The longest run of at most 10,000 ports from 1024 up that misses ``ephemeral`` and pyzmq's range."""
    top = min(ephemeral.start, ZMQ_RANDOM_PORTS.start)
    below = range(max(1024, top - MOST_PORTS), top)
    between = range(ephemeral.stop, min(ZMQ_RANDOM_PORTS.start, ephemeral.stop + MOST_PORTS))
    return max(below, between, key=len)


def bindable(ip: str, port: int) -> bool:
    """Whether ``ip:port`` is free now (bound and closed again at once)."""
    with socket.socket() as s:
        try:
            s.bind((ip, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


class KernelPorts(LocalPortCache):
    """jupyter_client's port cache (ports held by this server's kernels), taking ports from ``ports`` in turn."""

    def __init__(self, ports: range | None = None, start: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.ports = kernel_port_range(ephemeral_ports()) if ports is None else ports
        self._next = random.randrange(max(len(self.ports), 1)) if start is None else start

    def find_available_port(self, ip: str) -> int:
        for _ in range(len(self.ports)):
            port = self.ports[self._next % len(self.ports)]
            self._next += 1
            if port not in self.currently_used_ports and bindable(ip, port):
                self.currently_used_ports.add(port)
                return port
        return super().find_available_port(ip)  # every port of the range is taken: the OS's choice


def use_kernel_ports() -> KernelPorts:
    """Make :class:`KernelPorts` the cache jupyter_client's provisioners ask (``LocalPortCache.instance()``).

    A plain cache made earlier in this process is replaced, keeping the ports it holds.
    """
    current = LocalPortCache.instance() if LocalPortCache.initialized() else None
    if isinstance(current, KernelPorts):
        return current
    LocalPortCache.clear_instance()
    KernelPorts.clear_instance()  # one LocalPortCache.clear_instance() left behind
    ours = KernelPorts.instance()
    ours.currently_used_ports |= current.currently_used_ports if current else set()
    return ours
