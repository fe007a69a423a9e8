"""Server-Timing round trip (exact ns), item and output bytes."""

import pytest

from workbench_serve.protocol import (
    format_server_timing,
    item_bytes,
    metric_name,
    output_bytes,
    parse_server_timing,
)


def test_server_timing_round_trips_integer_nanoseconds():
    stages = [("ingress", 12_345), ("batch_wait", 5_000_000), ("forward", 2_078_690)]
    value = format_server_timing(stages, 7_591_112)
    assert value == (
        "ingress;dur=0.012345, batch_wait;dur=5.000000, forward;dur=2.078690, total;dur=7.591112"
    )
    assert parse_server_timing(value) == (stages, 7_591_112)


def test_parse_skips_metrics_without_dur_and_reads_other_servers_forms():
    value = 'cache;desc="Cache Read";dur=23.2, miss, db;dur=53'
    assert parse_server_timing(value) == ([("cache", 23_200_000), ("db", 53_000_000)], None)
    assert parse_server_timing(None) == ([], None)


def test_malformed_dur_names_the_metric():
    with pytest.raises(ValueError, match="'db'"):
        parse_server_timing("db;dur=fast")


def test_metric_name_makes_a_token():
    assert metric_name("my stage/2") == "my_stage_2"
    assert metric_name("feature-lookup") == "feature-lookup"


def test_item_and_output_bytes():
    assert (
        item_bytes(b"ab") == b"ab"
        and item_bytes("é") == "é".encode()
        and item_bytes({"a": 1}) == b'{"a": 1}'
    )
    assert output_bytes([b"a", b"b"], 1, 2) == b"b"
    assert output_bytes({"n": 2}, 0, 3) == b'{"n": 2}'  # a whole-batch output goes to every item
    assert output_bytes(["x", "y"], 0, 2) == b"x"


def test_a_missing_optional_dependency_names_the_extra():
    from workbench.errors import ConfigError
    from workbench_serve import require

    with pytest.raises(
        ConfigError, match=r"no_such_module_xyz is not installed: pip install 'workbench\[serve\]'"
    ):
        require("no_such_module_xyz", "serve")
