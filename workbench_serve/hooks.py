"""What the core calls in the serve wing (through the ``workbench.wings`` entry point ``serve``).

``load``'s options of a served run (``--url``, ``--engine``...) are added where the core asks for them
(:func:`workbench.wings.hook`); what they do lives here, beside the server and the load generator.
"""

from __future__ import annotations

import importlib

from .cli.load_options import add_load_arguments, add_profile_arguments, served_load

# need the HTTP client, Locust's driver or OTel: imported when first asked for, not at every parse
_LATER = {
    "run_http_load_command": "workbench_serve.cli.load_url",
    "served_sweep": "workbench_serve.cli.load_url",
    "otel_hook": "workbench_serve.otel.export",
}
__all__ = ["add_load_arguments", "add_profile_arguments", "served_load", *_LATER]


def __getattr__(name: str):
    if name not in _LATER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LATER[name]), name)
