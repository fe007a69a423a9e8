"""What the core calls in the serve wing (through the ``workbench.wings`` entry point ``serve``).

The core's ``load``, ``sweep``, ``profile`` and ``serve`` define the options (``--url``, ``--otel``,
``--engine``); what they do lives here, beside the server and the load generator they need.
"""

from __future__ import annotations

from .cli.load_url import http_load, payloads_from_args, run_http_load_command
from .otel.export import otel_hook

__all__ = ["http_load", "otel_hook", "payloads_from_args", "run_http_load_command"]
