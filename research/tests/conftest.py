"""``python -m pytest research/tests`` from the repository root: ``research`` and ``workbench`` import from there."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
