"""One definition of each time unit (``workbench/units.py``); the package had six copies."""
import re
from pathlib import Path

from workbench import units

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"


def test_values():
    assert (units.NS_PER_US, units.NS_PER_MS, units.NS_PER_S) == (1_000, 1_000_000, 1_000_000_000)


def test_no_module_defines_its_own_copy():
    defined = re.compile(r"^NS_PER_\w+\s*=", re.MULTILINE)
    copies = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if defined.search(p.read_text()))
    assert copies == ["units.py"]
