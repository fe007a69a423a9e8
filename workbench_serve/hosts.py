"""Which ``Host:`` headers a local server answers (pure functions): ``workbench serve`` and the room.

A page on ``evil.example`` whose DNS name is re-pointed at 127.0.0.1 (DNS
rebinding) reaches a local server with ``Host: evil.example``; answering only
the names and addresses the server is actually reached by stops it. The
allow-list is always on: loopback names, the bound address, and for a wildcard
bind (``0.0.0.0`` / ``::``) this machine's host names and interface addresses.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterable

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "*"})


def normalize_host(name: str) -> str:
    """A host name or address as compared: lower case, no brackets, no trailing dot."""
    name = name.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name.rstrip(".")


def host_of_header(header: str) -> str:
    """The host part of a ``Host:`` header value: ``"[::1]:8866"`` -> ``"::1"``, ``"a:80"`` -> ``"a"``.

    A bare IPv6 address without brackets (``::1``) is taken whole.
    """
    header = header.strip()
    if header.startswith("["):
        return normalize_host(header[: header.find("]") + 1] if "]" in header else header)
    if header.count(":") == 1:
        header = header.split(":", 1)[0]
    return normalize_host(header)


def is_loopback_bind(bind: str) -> bool:
    """True when ``bind`` (an address or ``localhost``) only accepts connections from this machine."""
    bind = normalize_host(bind)
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


def machine_addresses() -> set[str]:
    """This machine's host names and interface addresses (for a wildcard bind).

    Uses psutil's interface list when installed (it comes with ipykernel), else
    the addresses the host name resolves to. No packet is sent.
    """
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        import psutil

        ip = (socket.AF_INET, socket.AF_INET6)
        addrs = [a for nic in psutil.net_if_addrs().values() for a in nic if a.family in ip]
        names.update(a.address.split("%", 1)[0] for a in addrs)  # no IPv6 zone (%eth0)
    except ImportError:
        with contextlib.suppress(OSError):
            names.update(info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None))
    return {normalize_host(n) for n in names if n}


def allowed_hosts(
    bind: str, extra: Iterable[str] = (), machine: Iterable[str] | None = None
) -> frozenset[str]:
    """The host names a server bound to ``bind`` answers.

    bind: the listening address (``127.0.0.1``, ``0.0.0.0``, ``192.168.1.5``, ...).
    extra: more names (``--allow-host``), e.g. a DNS name students are given.
    machine: this machine's names and addresses for a wildcard bind
        (default :func:`machine_addresses`; tests pass their own).
    """
    hosts = set(LOOPBACK_HOSTS)
    bind = normalize_host(bind)
    if bind in WILDCARD_BINDS:
        hosts.update(machine_addresses() if machine is None else map(normalize_host, machine))
    else:
        hosts.add(bind)
    hosts.update(normalize_host(e) for e in extra if e.strip())
    return frozenset(hosts)


def host_allowed(header: str | None, allowed: frozenset[str]) -> bool:
    """True when a request's ``Host:`` header names one of ``allowed`` (any port)."""
    return bool(header) and host_of_header(header) in allowed
