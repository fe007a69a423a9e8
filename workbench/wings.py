"""The wings: packages beside the core that import it and are never imported by it.

========  =====================  ==========================================================  ==============
wing      import package         what it adds                                                install
========  =====================  ==========================================================  ==============
serve     ``workbench_serve``    ``serve``, ``load --url`` (own engine and Locust), ``--otel``,  ``.[serve]``
                                 ``ingest-otel``, ``locust-worker``
room      ``workbench_room``     the workshop room and ``make dashboard``'s Voila launcher    ``.[room]``
redis     ``workbench_redis``    the tabular example's ``store=redis`` and ``cache=redis``     ``.[redis]``
========  =====================  ==========================================================  ==============

A wing registers itself in its distribution's entry points: its hook module under
``workbench.wings`` (what the core calls: :func:`wing`) and its subcommands under
``workbench.commands`` (``register(subparsers)`` as the core's own). The core names no wing module;
``tests/test_layers.py`` fails on a core module that imports one, at module level or inside a
function. A wing that is not installed, or whose packages are missing, is one line saying how to
install it (:class:`WingMissing`, exit 2), never a traceback.
"""

from __future__ import annotations

import functools
from types import ModuleType

from .errors import ConfigError

WINGS_GROUP = "workbench.wings"
COMMANDS_GROUP = "workbench.commands"


class WingMissing(ConfigError):
    """A feature of a wing that cannot be loaded here; the message says how to install it."""


def install_hint(name: str) -> str:
    """How to install wing ``name`` (the extra of the same name, from the repository's root)."""
    return f"pip install -e '.[{name}]' from the workbench's folder (or pip install 'workbench[{name}]')"


def wing(name: str) -> ModuleType:
    """The hook module of wing ``name`` (``serve``, ``room``, ``redis``), loaded through its entry point.

    Raises :class:`WingMissing` naming the install command when no distribution registers it or its
    import fails for a missing package.
    """
    found = [ep for ep in _entry_points(WINGS_GROUP) if ep.name == name]
    if not found:
        raise WingMissing(
            f"this needs the {name} wing, which is not installed: {install_hint(name)}"
        )
    try:
        return found[0].load()
    except ModuleNotFoundError as exc:
        raise WingMissing(
            f"the {name} wing cannot load here (no module named {exc.name!r}): {install_hint(name)}"
        ) from None


def wing_commands() -> list:
    """The subcommands the installed wings add (entry point name: the command, value: its module)."""
    return sorted(_entry_points(COMMANDS_GROUP), key=lambda ep: ep.name)


@functools.cache
def _entry_points(group: str) -> tuple:
    """The installed distributions' entry points of ``group`` (``importlib.metadata.EntryPoint``), read
    once a process (each read scans every installed distribution)."""
    import importlib.metadata  # 30-50 ms: only when a wing is reached, not at every command's start

    return tuple(importlib.metadata.entry_points(group=group))
