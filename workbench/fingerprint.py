"""What a run measured, as a comparable record: its fingerprint (``run.meta.fingerprint``).

The model's is the parameter count and a SHA-256 (16 hex digits) of every declared model's
parameter names, shapes and dtypes, in declaration order; ``"unknown"`` when none is declared.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any

import workbench

from .errors import ConfigError

UNKNOWN = "unknown"
UNDECLARED_NOTE = (
    "no model declared: use Pipeline(models=[...]) or pipe.declare_model(model) in the factory"
)
POOLABLE_FIELDS = frozenset({"batch_size"})


def factory_spec(target: Any) -> str:
    """What built the pipeline: ``example:NAME``, ``FILE.py:FUNC`` or ``MODULE:FUNC``."""
    if isinstance(target, str):
        return f"example:{target}"
    if hasattr(target, "stages") and hasattr(target, "item_iterator"):  # a built Pipeline
        return f"built Pipeline {getattr(target, 'name', '?')!r}"
    module = getattr(target, "__module__", None) or "?"
    name = getattr(target, "__qualname__", None) or type(target).__name__
    if module.startswith("workbench.examples."):
        return f"example:{module.rsplit('.', 1)[1]}"
    mod = sys.modules.get(module)
    if module.startswith("workbench_user_") and getattr(mod, "__file__", None):
        return f"{os.path.relpath(mod.__file__) if not os.path.isabs(mod.__file__) else mod.__file__}:{name}"
    return f"{module}:{name}"


def model_fingerprint(models: list[Any]) -> dict[str, Any] | str:
    """``{params, hash}`` of the declared ``torch.nn.Module`` s, or ``"unknown"``."""
    if not models:
        return UNKNOWN
    digest = hashlib.sha256()
    params = 0
    for k, model in enumerate(models):
        digest.update(f"model {k} {type(model).__name__}\n".encode())
        for name, p in model.named_parameters():
            params += p.numel()
            digest.update(f"{name} {tuple(p.shape)} {p.dtype}\n".encode())
        for name, module in model.named_modules():  # dynamically quantized: not parameters
            weight = getattr(module, "weight", None)
            if callable(weight) and hasattr(module, "_packed_params"):
                bias = module.bias() if callable(getattr(module, "bias", None)) else None
                for part, w in (("weight", weight()), ("bias", bias)):
                    if w is not None:
                        params += w.numel()
                        digest.update(f"{name}.{part} {tuple(w.shape)} {w.dtype}\n".encode())
    return {"params": int(params), "hash": digest.hexdigest()[:16]}


def run_fingerprint(pipe, target: Any, threads: int | None, env: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint of a run of ``pipe``, built from ``target``, on ``threads`` torch threads."""
    host = (threads, env.get("torch"), workbench.__version__, env.get("cpu_model"), _cores())
    model = model_fingerprint(list(pipe.models))
    return _fingerprint(pipe.name, factory_spec(target), pipe.config, host, model)


def _fingerprint(pipeline, factory, cfg, host: tuple, model) -> dict[str, Any]:
    """The fields in order; ``host``: (torch threads, torch version, workbench version, CPU, cores)."""
    threads, torch, version, cpu, cores = host
    return {
        "pipeline": pipeline,
        "factory": factory,
        "options": dict(cfg.options),
        "precision": cfg.precision,
        "device": cfg.device,
        "batch_size": cfg.batch_size,
        "threads": threads,
        "torch": torch,
        "workbench": version,
        "host": {"cpu_model": cpu, "cores": cores},
        "model": model,
        "model_note": UNDECLARED_NOTE if model == UNKNOWN else None,
    }


def _cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def fingerprint_of(meta: Any) -> dict[str, Any]:
    """A run's fingerprint: the recorded one, else one derived from its config and environment."""
    recorded = getattr(meta, "fingerprint", None)  # profile and load runs record one
    if recorded is not None:
        return recorded.to_dict()
    env = meta.env
    host = (env.threads, env.torch, None, env.cpu_model, None)
    fp = _fingerprint(meta.pipeline, None, meta.config, host, UNKNOWN)
    return fp | {"model_note": "recorded before runs were fingerprinted"}


def _flatten(fp: dict[str, Any]) -> dict[str, Any]:
    """The fields but ``model_note``, the ``host`` object spread as ``host.cpu_model``, ``host.cores``."""
    out = {}
    for key, value in fp.items():
        if key == "host" and isinstance(value, dict):
            out |= {f"host.{k}": v for k, v in value.items()}
        elif key != "model_note":
            out[key] = value
    return out


def differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """``[(field, a_value, b_value)]`` that differ (host fields as ``host.cores``; missing: None)."""
    fa, fb = _flatten(a or {}), _flatten(b or {})
    keys = list(fa) + [k for k in fb if k not in fa]
    return [(k, fa.get(k), fb.get(k)) for k in keys if fa.get(k) != fb.get(k)]


def check_poolable(
    runs: list[Any], labels: list[str], allow_mixed: bool = False
) -> list[tuple[str, Any, Any]]:
    """ConfigError unless every run's fingerprint is the first's but ``batch_size``; with
    ``allow_mixed`` the differences are returned instead, for the caller to print."""
    found = []
    first = fingerprint_of(runs[0].meta)
    for run, label in zip(runs[1:], labels[1:]):
        for name, va, vb in differences(first, fingerprint_of(run.meta)):
            if name in POOLABLE_FIELDS:
                continue
            if not allow_mixed:
                raise ConfigError(
                    f"--service runs differ in {name}: {va!r} ({labels[0]}) vs {vb!r} ({label}); "
                    "pool runs of one pipeline and configuration (only batch_size may differ), "
                    "or pass --allow-mixed"
                )
            found.append((name, va, vb))
    return found


RECORDED_MATCH_FIELDS = tuple(
    "pipeline factory options model device batch_size precision threads".split()
)
LABEL_FIELDS = ("host.cpu_model", "host.cores", "torch", "workbench")


def recorded_match(wanted: dict[str, Any], recorded: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether a recorded run stands in for a wanted configuration, and the labels it shows."""
    labels = []
    for name, va, vb in differences(wanted, recorded):
        unknown = vb is None or vb == UNKNOWN
        if name in RECORDED_MATCH_FIELDS and not unknown:
            return False, []
        if name in RECORDED_MATCH_FIELDS or name in LABEL_FIELDS:
            labels.append(f"recorded with {name} {vb!r}, here {va!r}")
    return True, labels
