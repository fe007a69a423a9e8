"""Lazy package exports: a name loads its module on first use (keeps ``import workbench`` light)."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(
    package: str, namespace: dict, exports: dict[str, str]
) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package``; ``exports`` maps each name to its module's full name."""

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
