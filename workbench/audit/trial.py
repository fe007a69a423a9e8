"""``audit --try``: measure the actions the workbench can make itself, instead of promising them.

For each finding, each catalog action with a ``try`` entry becomes a concrete
configuration change of the audited run (bf16 or int8 precision on CPU, twice the
batch size, one torch thread when the run used more); the run's pipeline is
rebuilt from its fingerprint's factory and the change is measured against the
run's own configuration with the interleaved comparison
(:func:`workbench.compare.compare`): same items, one process, blocks in a seeded
order, bootstrap intervals. The action then carries ``measured``: the end-to-end
p50 and p99 ratios B/A with their 95 % intervals, the verdict and one sentence.
For a batch-size change the ratios are per item (a request carries twice the
items), so "faster" means more items per second of latency.

What cannot be tried here is said, never guessed: a run whose factory cannot be
rebuilt (a user pipeline not importable from here), a change the device cannot
run (int8 on CUDA), or an action that needs the pipeline's own code changed.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

TRY_REQUESTS = 200


def concrete_change(run, action: dict) -> tuple[dict[str, Any] | None, str | None]:
    """The override dict an action's ``try`` means for this run, or (None, why not)."""
    want = action.get("try")
    if not want:
        return None, None
    cfg = run.config
    device = str(cfg.get("device", "cpu"))
    if "precision" in want:
        target = want["precision"]
        if target == cfg.get("precision"):
            return None, f"the run already uses {target}"
        if target == "int8" and device.startswith("cuda"):
            return None, "int8 dynamic quantization runs on CPU only"
        return {"precision": target}, None
    if want.get("batch_size") == "double":
        return {"batch_size": 2 * int(cfg.get("batch_size", 1))}, None
    if "threads" in want:
        threads = cfg.get("threads") or (run.meta.get("env") or {}).get("threads")
        if not threads or threads <= 1:
            return None, "the run already used one torch thread"
        return {"threads": 1}, None
    return None, f"{action['title']}: needs a load run and the batching simulator"


def factory_of(run) -> tuple[Any, str | None]:
    """The factory to rebuild the run's pipeline from its fingerprint, or (None, why not)."""
    from ..errors import WorkbenchError

    spec = ((run.meta.get("fingerprint") or {}).get("factory")) or ""
    try:
        if spec.startswith("example:"):
            from ..examples import factory

            return factory(spec.removeprefix("example:")), None
        if spec and ":" in spec:
            from ..pipeline import load_factory

            return load_factory(spec), None
    except WorkbenchError as exc:
        return None, f"cannot rebuild the pipeline from {spec!r}: {exc}"
    from ..examples import EXAMPLES, factory

    name = run.meta.get("pipeline")
    if not spec and name in EXAMPLES:  # runs recorded before fingerprints: the shipped example of that name
        return factory(name), None
    return None, "the run does not say which factory built it (no fingerprint factory)"


def base_config(run):
    from ..config import PipelineConfig

    cfg = dict(run.config)
    threads = cfg.get("threads") or (run.meta.get("env") or {}).get("threads")
    return PipelineConfig.from_dict(cfg | {"threads": threads})


def try_actions(run, findings: list[dict], *, requests: int = TRY_REQUESTS, seed: int = 0,
                compare_fn: Callable | None = None) -> list[dict]:
    """Annotate the findings' actions in place with ``measured`` or ``not_tried``; returns the trial log."""
    from ..compare import compare

    compare_fn = compare_fn or compare
    factory, why = factory_of(run)
    base = base_config(run)
    log, done = [], {}
    for finding in findings:
        for action in finding["actions"]:
            change, reason = concrete_change(run, action)
            if change is None:
                if reason:
                    action["not_tried"] = reason
                continue
            if factory is None:
                action["not_tried"] = why
                continue
            key = tuple(sorted(change.items()))
            if key not in done:
                done[key] = _measure(compare_fn, factory, base, change, requests, seed)
                log.append({"change": change, **done[key]})
            action["measured"] = done[key]
    return log


def _measure(compare_fn, factory, base, change: dict, requests: int, seed: int) -> dict[str, Any]:
    from ..errors import WorkbenchError

    try:
        result = compare_fn(factory, [{}, change], base=base, requests=requests, seed=seed).result
    except WorkbenchError as exc:
        return {"error": str(exc), "sentence": f"{_label(change)}: not measured: {exc}"}
    e2e = result.get("end_to_end")
    if not e2e:
        return {"error": result.get("error"), "sentence": f"{_label(change)}: not measured: {result.get('error')}"}
    scale = base.batch_size / change["batch_size"] if "batch_size" in change else 1.0
    out = {"p50_ratio": e2e["p50_ratio"] * scale, "p50_ci": [x * scale for x in e2e["p50_ci"]],
           "p99_ratio": e2e["p99_ratio"] * scale, "p99_ci": [x * scale for x in e2e["p99_ci"]],
           "verdict": e2e["verdict"] if scale == 1.0 else _verdict(e2e["p50_ci"], scale, result),
           "per": "item" if scale != 1.0 else "request", "requests": requests,
           "noisy": bool((result.get("noise") or {}).get("noisy"))}
    out["sentence"] = (f"{_label(change)}: end-to-end p50 x{out['p50_ratio']:.2f} [{out['p50_ci'][0]:.2f}, "
                       f"{out['p50_ci'][1]:.2f}], p99 x{out['p99_ratio']:.2f} [{out['p99_ci'][0]:.2f}, "
                       f"{out['p99_ci'][1]:.2f}] per {out['per']}: {out['verdict']} "
                       f"(interleaved, {requests} requests each)")
    return out


def _verdict(ci: list[float], scale: float, result: dict) -> str:
    """The comparison's verdict rule applied to per-item ratios (the interval scaled by the batch ratio)."""
    from ..analysis.compare import verdict

    min_effect = result.get("min_effect", 0.02)
    noisy = bool((result.get("noise") or {}).get("noisy"))
    return verdict((ci[0] * scale, ci[1] * scale), noisy=noisy, min_effect=min_effect)


def _label(change: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in change.items())
