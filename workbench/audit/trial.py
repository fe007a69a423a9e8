"""``audit --try``: a catalog action's ``try`` configuration change measured interleaved against the
run's own configuration (docs/json.md's MEASURED); what cannot be tried here is said, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..analysis.outputs import AGREEMENT_THRESHOLD, agreement_text
from ..analysis.verdicts import verdict
from ..batching import BatchPolicy, load_summary, service_model_from_runs, simulate
from ..config import PipelineConfig
from ..errors import WorkbenchError
from ..examples import EXAMPLES, factory
from ..interleave import compare
from ..pipeline import load_factory

TRY_REQUESTS = 200
# factories with a ``cuda_graph`` option (workbench/examples/text.py)
CUDA_GRAPH_FACTORIES = ("example:text",)


def concrete_change(run, action: dict) -> tuple[dict[str, Any] | None, str | None]:
    """The override dict an action's ``try`` means for this run, or (None, why not)."""
    want = action.get("try")
    if not want:
        return None, None
    cfg = run.config
    device = cfg.device or "cpu"
    if "precision" in want:
        target = want["precision"]
        if target == cfg.precision:
            return None, f"the run already uses {target}"
        if target == "int8" and device.startswith("cuda"):
            return None, "int8 dynamic quantization runs on CPU only"
        return {"precision": target}, None
    if want.get("batch_size") == "double":
        return {"batch_size": 2 * (cfg.batch_size or 1)}, None
    for name in ("compile", "channels_last"):  # options workbench.precision.prepare_model applies
        if name in want:
            if cfg.options.get(name):
                return None, f"the run already used {name}"
            return {name: True}, None
    if "pin_memory" in want:  # the shipped examples' option; it only means something on a GPU
        if not device.startswith("cuda"):
            return (
                None,
                "pinned host memory matters for host-to-GPU copies only; this run is on the CPU",
            )
        if cfg.options.get("pin_memory", True):
            return None, "the run already copied from pinned memory"
        return {"pin_memory": True}, None
    if "cuda_graph" in want:
        return _graph_change(run, device, cfg.options)
    if "kv_cache" in want:  # the generate example's option; a factory that took kv_cache=false
        if cfg.options.get("kv_cache") is not False:
            return None, (
                "the run was not made with kv_cache=false, so there is no option to switch: keep "
                "a cache in the model (workbench/examples/_causal_model.py shows one)"
            )
        return {"kv_cache": True}, None
    if "max_wait_ms" in want:  # tried in the batching simulator (simulate_wait), not measured live
        return None, None
    if "threads" in want:
        threads = cfg.threads or run.meta.env.threads
        if not threads or threads <= 1:
            return None, "the run already used one torch thread"
        return {"threads": 1}, None
    return None, f"{action['title']}: needs a load run and the batching simulator"


def _graph_change(run, device: str, options: dict) -> tuple[dict[str, Any] | None, str | None]:
    """``{"cuda_graph": True}`` where the run's factory has that option and can use it, else why not."""
    if not device.startswith("cuda"):
        return None, "a CUDA graph replays GPU launches; this run is on the CPU"
    if options.get("cuda_graph"):
        return None, "the run already replays its forward from a CUDA graph"
    spec = _factory_spec(run) or f"example:{run.meta.pipeline}"
    if spec not in CUDA_GRAPH_FACTORIES:
        return None, (
            "only the text example has a cuda_graph option; capture this forward yourself "
            "(workbench/examples/_cuda_graph.py shows how)"
        )
    if options.get("padding", "max_len") != "max_len":
        return None, "cuda_graph needs padding='max_len' (a graph replays fixed shapes)"
    return {"cuda_graph": True}, None


def _factory_spec(run) -> str | None:
    """The factory a profile or load run's fingerprint names (None for other kinds)."""
    fingerprint = getattr(run.meta, "fingerprint", None)
    return fingerprint.factory if fingerprint else None


def factory_of(run) -> tuple[Any, str | None]:
    """The factory to rebuild the run's pipeline from its fingerprint, or (None, why not)."""
    spec = _factory_spec(run) or ""
    try:
        if spec.startswith("example:"):
            return factory(spec.removeprefix("example:")), None
        if spec and ":" in spec:
            return load_factory(spec), None
    except WorkbenchError as exc:
        return None, f"cannot rebuild the pipeline from {spec!r}: {exc}"
    name = run.meta.pipeline
    if not spec and name in EXAMPLES:  # recorded before fingerprints: that shipped example
        return factory(name), None
    return None, "the run does not say which factory built it (no fingerprint factory)"


def try_actions(
    run, findings: list[dict], *, requests: int = TRY_REQUESTS, compare_fn: Callable | None = None
) -> list[dict]:
    """Annotate the findings' actions in place with ``measured`` or ``not_tried``; returns the trial log."""
    compare_fn = compare_fn or compare
    factory, why = factory_of(run)
    threads = run.config.threads or run.meta.env.threads
    base = PipelineConfig.from_dict(run.config.to_dict() | {"threads": threads})
    log, done = [], {}
    for finding in findings:
        for action in finding["actions"]:
            if (action.get("try") or {}).get("max_wait_ms") == "half":
                action.update(simulate_wait(run))
                continue
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
                done[key] = _measure(compare_fn, factory, base, change, requests)
                log.append({"change": change, **done[key]})
            action["measured"] = done[key]
    return log


def _measure(compare_fn, factory, base, change: dict, requests: int) -> dict[str, Any]:
    def not_measured(error) -> dict[str, Any]:
        return {"error": error, "sentence": f"{_label(change)}: not measured: {error}"}

    try:
        result = compare_fn(factory, [{}, change], base=base, requests=requests, seed=0).result
    except WorkbenchError as exc:
        return not_measured(str(exc))
    except Exception as exc:  # noqa: BLE001 - torch.compile needs a C++ toolchain; its failure is the finding
        return not_measured(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    e2e = result.get("end_to_end")
    if not e2e:
        return not_measured(result.get("error"))
    scale = base.batch_size / change["batch_size"] if "batch_size" in change else 1.0
    out = {
        "p50_ratio": e2e["p50_ratio"] * scale,
        "p50_ci": [x * scale for x in e2e["p50_ci"]],
        "p99_ratio": e2e["p99_ratio"] * scale,
        "p99_ci": [x * scale for x in e2e["p99_ci"]],
        "verdict": e2e["verdict"],
        "per": "item" if scale != 1.0 else "request",
        "requests": requests,
        "noisy": bool((result.get("noise") or {}).get("noisy")),
    }
    if scale != 1.0:  # the comparison's verdict rule applied to the per-item interval
        min_effect = result.get("min_effect", 0.02)
        out["verdict"] = verdict(tuple(out["p50_ci"]), noisy=out["noisy"], min_effect=min_effect)
    outputs = result.get("outputs")
    agreement = (outputs or {}).get("argmax_agreement")
    out["outputs"] = outputs
    out["agreement_below_threshold"] = agreement is not None and agreement < AGREEMENT_THRESHOLD
    below = (
        f" - BELOW the {100 * AGREEMENT_THRESHOLD:g} % agreement threshold: it changes predictions, check "
        "them before adopting it"
        if out["agreement_below_threshold"]
        else ""
    )
    tokens = {e["name"]: e for e in (result.get("tokens") or {}).get("metrics", [])}
    tpot = tokens.get("tpot")  # a streaming pipeline: what the change does to each token
    out["tpot"] = tpot and {k: tpot[k] for k in ("p50_ratio", "p50_ci", "p99_ratio", "p99_ci")}
    per_token = (
        f"; TPOT p50 x{tpot['p50_ratio']:.2f} [{tpot['p50_ci'][0]:.2f}, {tpot['p50_ci'][1]:.2f}]"
        if tpot and tpot["p50_ratio"] is not None and None not in tpot["p50_ci"]
        else ""
    )
    out["sentence"] = (
        f"{_label(change)}: end-to-end p50 x{out['p50_ratio']:.2f} [{out['p50_ci'][0]:.2f}, "
        f"{out['p50_ci'][1]:.2f}], p99 x{out['p99_ratio']:.2f} [{out['p99_ci'][0]:.2f}, "
        f"{out['p99_ci'][1]:.2f}] per {out['per']}{per_token}: {out['verdict']} "
        f"(interleaved, {requests} requests each); outputs: {agreement_text(outputs)}{below}"
    )
    return out


def _label(change: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in change.items())


def simulate_wait(run, factor: float = 0.5, seed: int = 0) -> dict[str, Any]:
    """``{"simulated": {...}}``: end-to-end p50 and p99 ratios of a load run's max wait times ``factor``,
    its own arrivals and batches replayed in the batching simulator; else ``{"not_tried": why}``."""
    load = getattr(run.meta, "load", None)  # load and served runs
    policy = (load.policy if load else None) or {}
    if run.kind not in ("load", "served") or not policy or "arrival_ns" not in run.requests:
        why = "lowering the max wait is simulated from a load run (workbench load); this run is not one"
        return {"not_tried": why}
    try:
        model = service_model_from_runs([run])
        times = run.requests.sort_values("arrival_ns")["arrival_ns"].to_numpy("int64")
        times = times - times[0]
        size, wait = int(policy["max_batch_size"]), float(policy["max_wait_ms"])
        base = BatchPolicy(size, wait, int(policy.get("concurrency", 1)))
        shorter = BatchPolicy(base.max_batch_size, base.max_wait_ms * factor, base.concurrency)
        a = load_summary(simulate(model, times, base, seed=seed).requests)["end_to_end"]
        b = load_summary(simulate(model, times, shorter, seed=seed).requests)["end_to_end"]
    except WorkbenchError as exc:
        return {"not_tried": f"simulation failed: {exc}"}
    out = {
        "max_wait_ms": shorter.max_wait_ms,
        "p50_ratio": b["p50_ms"] / a["p50_ms"],
        "p99_ratio": b["p99_ms"] / a["p99_ms"],
    }
    out["sentence"] = (
        f"max_wait_ms={shorter.max_wait_ms:g} (from {base.max_wait_ms:g}): simulated p50 "
        f"x{out['p50_ratio']:.2f}, p99 x{out['p99_ratio']:.2f} on this run's arrivals and service "
        "times (batching simulator; simulated, not measured)"
    )
    return {"simulated": out}
