"""Serving for real: a pipeline behind an HTTP server, and load from another process.

Collect -> record, as elsewhere:

- ``protocol``: headers, the ``Server-Timing`` format, item and output bytes (pure).
- ``service``: the dynamic batcher (``workbench.batching``) in front of a pipeline, for asyncio.
- ``server``: ``workbench serve`` (uvicorn + Starlette) -> a run of kind ``served``.
- ``client``: the open-loop asyncio load generator; ``http1``: its HTTP/1.1 keep-alive client.
- ``loadrun``: ``workbench load --url`` -> a run joined with the server's ``Server-Timing``.
- ``records``: the run tables of both sides.

Importing this package imports none of uvicorn, Starlette or torch.
"""

from __future__ import annotations

from workbench import lazy_exports
import importlib
from workbench.errors import ConfigError

_EXPORTS = {
    "format_server_timing": "protocol",
    "parse_server_timing": "protocol",
    "PipelineService": "service",
    "serve": "server",
    "drive": "client",
    "run_http_load": "loadrun",
}

__all__ = sorted(_EXPORTS)


def require(module: str, extra: str):
    """Import an optional dependency, or a ConfigError naming the extra that installs it."""

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"{module} is not installed: pip install 'workbench[{extra}]' "
            "(make installs the exact pins of requirements.lock)"
        ) from None


__getattr__, __dir__ = lazy_exports(
    __name__, globals(), {k: f"{__name__}.{m}" for k, m in _EXPORTS.items()}
)
