"""One definition of each time unit (``workbench/units.py``); the package had six copies."""

import re
from pathlib import Path

from workbench import units

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"


def test_values():
    assert (units.NS_PER_US, units.NS_PER_MS, units.NS_PER_S) == (1_000, 1_000_000, 1_000_000_000)


def test_no_module_defines_its_own_copy():
    defined = re.compile(r"^NS_PER_\w+\s*=", re.MULTILINE)
    copies = sorted(
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if defined.search(p.read_text())
    )
    assert copies == ["units.py"]


def test_conversions_match_the_literal_factors_they_replace():
    import numpy as np

    assert units.ns_to_ms(1_500_000) == 1_500_000 / 1e6 == 1.5
    assert units.ns_to_s(2_500_000_000) == 2.5
    assert units.ms_to_ns(0.25) == 0.25 * 1e6 == 250_000.0
    assert units.s_to_ns(0.3) == int(0.3 * 1e9) == 300_000_000
    assert isinstance(units.s_to_ns(2), int)
    ns = np.array([1, 123_456_789, 10**12])
    assert np.array_equal(units.ns_to_ms(ns), ns / 1e6)


def test_no_module_converts_time_with_a_literal_factor():
    """Time conversions go through units.py; 1e6/1e9 literals left are bytes or widget bounds."""
    literal = re.compile(r"(?:/|\*)\s*1e[69]\b")
    allowed = {
        "units.py",  # its docstrings name the factors
        "plots/style.py",
        "plots/transfers.py",
        "audit/rules.py",
    }  # bytes (MB, GB)
    found = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if literal.search(p.read_text()) and str(p.relative_to(PACKAGE)) not in allowed
    )
    assert found == []
