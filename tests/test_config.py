"""Issue 35: every number has a range; options are finite JSON, checked against the factory's declared ranges."""

from __future__ import annotations

import math

import pytest

from workbench import Pipeline
from workbench.config import PipelineConfig, Range, option_ranges, option_value
from workbench.errors import ConfigError
from workbench.examples import EXAMPLES, factory
from workbench.pipeline import build_pipeline, unread_options


def test_a_range_holds_finite_numbers_of_its_kind_within_its_bounds():
    keys = Range(0, 100_000, integer=True)
    assert keys.holds(0) and keys.holds(100_000)
    assert not any(keys.holds(v) for v in (-1, 100_001, 10**400, 1.0, True, "3", None))
    window = Range(0, 5, unit="ms", lo_open=True)
    assert window.holds(5) and window.holds(1e-9)
    assert not any(window.holds(v) for v in (0, math.nan, math.inf, 5.1))
    assert keys.text() == "an integer in [0, 100_000]"
    assert window.text() == "a number in (0, 5] ms"
    with pytest.raises(ConfigError, match=r"^option 'x' must be a number in \(0, 5\] ms, got nan$"):
        window.check("option 'x'", math.nan)


@pytest.mark.parametrize(
    "text", ["NaN", "Infinity", "-Infinity", "1e400", "[1, NaN]", '{"a": 1e999}']
)
def test_an_option_value_that_is_not_finite_json_is_refused_naming_flag_key_and_text(text):
    with pytest.raises(ConfigError) as found:
        option_value("--option", "platt_a", text)
    assert str(found.value) == (
        f"--option platt_a={text}: not a finite number (options are finite JSON)"
    )


def test_an_option_value_is_json_when_it_parses_else_text():
    assert option_value("--config", "k", "3") == 3
    assert option_value("--config", "k", "[64, 32]") == [64, 32]
    assert option_value("--config", "k", "1e20") == 1e20
    assert (
        option_value("--config", "k", "nan") == "nan"
    )  # not JSON: the text, for the factory to refuse
    assert option_value("--config", "k", "redis") == "redis"


def test_a_config_refuses_non_finite_options_and_out_of_range_sizes():
    with pytest.raises(
        ConfigError, match=r"option 'platt_a' must be finite JSON, got \[1.0, nan\]"
    ):
        PipelineConfig(options={"platt_a": [1.0, math.nan]})
    with pytest.raises(
        ConfigError,
        match=r"batch_size must be an integer in \[1, 65_536\] items, got 100000000000000000000",
    ):
        PipelineConfig(batch_size=10**20)
    with pytest.raises(ConfigError, match=r"threads must be an integer in \[1, 4_096\] threads"):
        PipelineConfig(threads=10**6)


def test_declared_ranges_are_checked_before_the_factory_runs_and_count_as_no_read():
    built = []

    @option_ranges(hidden=Range(1, 1024, integer=True))
    def build(config):
        built.append(config.options.get("hidden", 8))
        pipe = Pipeline("toy", items=[1])
        pipe.add("forward", lambda x: x)
        return pipe

    with pytest.raises(
        ConfigError, match=r"^option 'hidden' must be an integer in \[1, 1_024\], got 4096$"
    ):
        build_pipeline(build, PipelineConfig(options={"hidden": 4096}))
    assert built == [] and build.option_ranges == {"hidden": Range(1, 1024, integer=True)}
    pipe = build_pipeline(build, PipelineConfig(options={"hidden": 16, "typo": 1}))
    assert built == [16] and unread_options(pipe) == ["typo"]  # the range check read nothing


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_shipped_example_declares_its_ranges_and_refuses_before_building(name):
    build = factory(name)
    assert "seed" in build.option_ranges and len(build.option_ranges) >= 5
    with pytest.raises(ConfigError, match=r"option 'seed' must be an integer in \[0, "):
        build(PipelineConfig(options={"seed": -1}))  # raised before the build imports torch


def test_the_tabular_example_bounds_its_keys_and_calibration():
    ranges = factory("tabular").option_ranges
    with pytest.raises(ConfigError, match=r"option 'n_keys' must be an integer in \[0, 100_000\]"):
        factory("tabular")(PipelineConfig(options={"n_keys": 10**20}))
    assert not ranges["platt_a"].holds(1e300) and ranges["threshold"].holds(0.3)
