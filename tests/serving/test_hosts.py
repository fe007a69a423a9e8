"""The Host allow-list of serve and the room (workbench_serve.hosts): pure functions, no server."""

from __future__ import annotations

from workbench_serve.hosts import allowed_hosts, host_allowed, host_of_header, is_loopback_bind


def test_host_of_header_strips_port_brackets_case_and_trailing_dot():
    assert host_of_header("127.0.0.1:8866") == "127.0.0.1"
    assert host_of_header("[::1]:8866") == "::1"
    assert host_of_header("[::1]") == "::1"
    assert host_of_header("LocalHost.:80") == "localhost"
    assert host_of_header("fe80::1") == "fe80::1"  # bare IPv6, taken whole
    assert host_of_header("evil.example") == "evil.example"


def test_loopback_bind_allows_only_loopback_names():
    allowed = allowed_hosts("127.0.0.1")
    assert allowed == {"localhost", "127.0.0.1", "::1"}
    assert host_allowed("127.0.0.1:8866", allowed)
    assert host_allowed("localhost:8866", allowed)
    assert host_allowed("[::1]:8866", allowed)
    # DNS rebinding: the attacker's name resolves to 127.0.0.1 but the Host header keeps the name
    assert not host_allowed("evil.example:8866", allowed)
    assert not host_allowed("127.0.0.1.evil.example", allowed)
    assert not host_allowed("", allowed)
    assert not host_allowed(None, allowed)


def test_specific_bind_adds_that_address_and_extra_names():
    allowed = allowed_hosts("192.168.1.5", extra=["Room.Example.", " "])
    assert allowed == {"localhost", "127.0.0.1", "::1", "192.168.1.5", "room.example"}
    assert host_allowed("room.example:8866", allowed)
    assert not host_allowed("192.168.1.6:8866", allowed)


def test_wildcard_bind_adds_this_machines_names_and_addresses():
    allowed = allowed_hosts("0.0.0.0", machine=["lab-pc", "10.0.0.7", "FE80::2"])
    assert allowed == {"localhost", "127.0.0.1", "::1", "lab-pc", "10.0.0.7", "fe80::2"}
    assert host_allowed("10.0.0.7:8866", allowed)
    assert host_allowed("[fe80::2]:8866", allowed)
    assert not host_allowed("0.0.0.0:8866", allowed)
    assert not host_allowed("evil.example", allowed)


def test_wildcard_bind_by_default_knows_the_loopback_and_host_name():
    import socket

    allowed = allowed_hosts("::")
    assert {"localhost", "127.0.0.1", "::1", socket.gethostname().lower()} <= allowed


def test_is_loopback_bind():
    assert (
        is_loopback_bind("127.0.0.1") and is_loopback_bind("127.0.1.1") and is_loopback_bind("::1")
    )
    assert is_loopback_bind("localhost")
    assert (
        not is_loopback_bind("0.0.0.0")
        and not is_loopback_bind("::")
        and not is_loopback_bind("10.0.0.7")
    )
    assert not is_loopback_bind("lab-pc")
