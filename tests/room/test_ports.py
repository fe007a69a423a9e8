"""Kernel ports: taken in turn from below the ranges the OS and pyzmq hand out at random."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("jupyter_client", reason="jupyter_client is not installed")

from jupyter_client.connect import LocalPortCache  # noqa: E402

from workbench_room.ports import (  # noqa: E402
    KernelPorts,
    bindable,
    ephemeral_ports,
    kernel_port_range,
    use_kernel_ports,
)


def test_the_kernel_range_misses_the_ephemeral_range_and_pyzmqs():
    assert kernel_port_range(range(32768, 61000)) == range(22768, 32768)  # Linux's default
    assert kernel_port_range(range(49152, 65536)) == range(39152, 49152)  # macOS, Windows
    assert kernel_port_range(range(20000, 30000)) == range(10000, 20000)  # an admin's low range
    assert kernel_port_range(range(1024, 65536)) == range(1024, 1024)  # no room: the OS's choice
    assert KernelPorts(ports=range(0)).find_available_port("127.0.0.1") >= 1024


def test_the_ephemeral_range_is_read_from_the_kernels_setting(tmp_path):
    (tmp_path / "range").write_text("32768\t60999\n")
    assert ephemeral_ports(tmp_path / "range") == range(32768, 61000)
    assert ephemeral_ports(tmp_path / "missing") == range(49152, 65536)


def free_run(n: int) -> range:
    """``n`` consecutive ports free now, from below the ephemeral range (no outgoing connection takes them)."""
    for start in range(30000, 32000, n):
        if all(bindable("127.0.0.1", port) for port in range(start, start + n)):
            return range(start, start + n)
    pytest.skip("no 5 consecutive free ports in 30000-31999")


def test_ports_come_in_turn_skipping_bound_and_held_ones():
    run = free_run(5)
    a, b, taken, held, c = run
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", taken))
        ports = KernelPorts(ports=run, start=1)
        ports.currently_used_ports.add(held)  # a port a starting kernel of this server holds
        assert [ports.find_available_port("127.0.0.1") for _ in range(3)] == [b, c, a]
        assert ports.currently_used_ports == {a, b, held, c}
        ports.return_port(b)  # its kernel shut down
        assert ports.find_available_port("127.0.0.1") == b
        # every port of the range bound or held: the OS picks one
        assert ports.find_available_port("127.0.0.1") not in run


def test_jupyter_clients_provisioners_get_the_room_ports_keeping_those_held():
    LocalPortCache.clear_instance()
    KernelPorts.clear_instance()
    LocalPortCache.instance().currently_used_ports.add(40001)
    try:
        ours = use_kernel_ports()
        assert LocalPortCache.instance() is ours and isinstance(ours, KernelPorts)
        assert 40001 in ours.currently_used_ports and use_kernel_ports() is ours
    finally:
        KernelPorts.clear_instance()
