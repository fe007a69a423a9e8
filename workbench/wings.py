"""The wings (``serve``, ``room``, ``redis``: README "Architecture"): hooks under the entry points'
``workbench.wings``, commands under ``workbench.commands``; one not installed: :class:`WingMissing`.
"""

from __future__ import annotations

import argparse
import functools
from types import ModuleType

from .errors import ConfigError

WINGS_GROUP = "workbench.wings"
COMMANDS_GROUP = "workbench.commands"


class WingMissing(ConfigError):
    """A feature of a wing that cannot be loaded here; the message says how to install it."""


def install_hint(name: str) -> str:
    """How to install wing ``name`` (the extra of the same name)."""
    return f"pip install -e '.[{name}]' from the workbench's folder (or pip install 'workbench[{name}]')"


def wing(name: str) -> ModuleType:
    """The hook module of wing ``name`` through its entry point, or :class:`WingMissing`."""
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


def hook(name: str, attribute: str, absent=lambda *args: None):
    """Wing ``name``'s hook ``attribute``, or ``absent`` (by default doing nothing) where the wing is
    not installed: the core asks where the wing's options belong, and goes on without them."""
    try:
        return getattr(wing(name), attribute)
    except WingMissing:
        return absent


def absent_options(name: str, *options: str):
    """A parser hook's ``absent``: wing ``name``'s ``options`` still parse (hidden), and one given says
    how to install the wing (exit 2) rather than argparse's "unrecognized arguments"."""

    class Given(argparse.Action):
        def __call__(self, *given):
            wing(name)

    def add(parser, *groups) -> None:
        for option in options:
            parser.add_argument(option, nargs="?", action=Given, help=argparse.SUPPRESS)

    return add


def wing_commands() -> list:
    """The installed wings' subcommands (entry point name: the command, value: its module)."""
    return sorted(_entry_points(COMMANDS_GROUP), key=lambda ep: ep.name)


@functools.cache
def _entry_points(group: str) -> tuple:
    """The entry points of ``group``, read once a process (each read scans every distribution)."""
    import importlib.metadata  # 30-50 ms: only when a wing is reached, not at every command's start

    return tuple(importlib.metadata.entry_points(group=group))
