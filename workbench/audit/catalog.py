"""What to do about each kind of finding: the documented action catalog.

Each action has a ``title`` (imperative, one line), a ``why`` (the mechanism),
and ``try`` (the configuration change ``audit --try`` can measure itself with
the interleaved comparison, or None when only the user can make the change).
"""

from __future__ import annotations

Action = dict

CATALOG: dict[str, list[Action]] = {
    "compute": [
        {
            "title": "Run the model in bf16 (or int8 dynamic quantization on CPU)",
            "why": "lower precision halves (or quarters) the bytes each matmul moves",
            "try": {"precision": "bf16"},
        },
        {
            "title": "Try int8 dynamic quantization of Linear layers (CPU)",
            "why": "int8 GEMMs on CPU are faster when Linear layers dominate",
            "try": {"precision": "int8"},
        },
        {
            "title": "Run one torch thread per worker when cores are shared",
            "why": "torch's thread pool busy-waits; on contended cores extra threads slow small forwards down",
            "try": {"threads": 1},
        },
        {
            "title": "Compile the model with torch.compile",
            "why": "fuses elementwise ops and removes Python dispatch between them",
            "try": {"compile": True},
        },
        {
            "title": "Make inputs contiguous / channels_last for convolutions",
            "why": "strided inputs force copies or slow kernels",
            "try": {"channels_last": True},
        },
    ],
    "preprocess": [
        {
            "title": "Decode at reduced size (PIL draft mode, libjpeg-turbo scaling) or use a faster decoder",
            "why": "decoding a full-resolution image to resize it down wastes most of the work",
            "try": None,
        },
        {
            "title": "Move resize/normalize to tensors in batch, or to the GPU",
            "why": "per-item Python image ops do not batch",
            "try": None,
        },
    ],
    "feature_io": [
        {
            "title": "Batch the feature lookups (one query per request, not per item)",
            "why": "each round trip to the store pays its fixed cost once per call",
            "try": None,
        },
        {
            "title": "Cache hot features in process (LRU) in front of the store",
            "why": "skewed key popularity makes a small cache absorb most lookups",
            "try": None,
        },
    ],
    "remote": [
        {
            "title": "Put a timeout (with a fallback) on the remote call",
            "why": "the tail of a remote dependency becomes your tail; a timeout bounds it",
            "try": None,
        },
        {
            "title": "Hedge the request: send a second copy after the p95",
            "why": "takes the faster of two independent draws from the tail",
            "try": None,
        },
    ],
    "tail": [
        {
            "title": "Find what the slow requests have in common (describe= attributes, inputs)",
            "why": "a stage whose p99 is many times its p50 has a cause that only some requests hit",
            "try": None,
        },
        {
            "title": "Bound the stage's time (timeout, smaller inputs, bucketing by size)",
            "why": "the slowest 1 % is concentrated in this stage",
            "try": None,
        },
    ],
    "queue": [
        {
            "title": "Lower the batcher's max wait",
            "why": "requests wait for a batch that fills too slowly",
            "try": {"max_wait_ms": "half"},
        },
        {
            "title": "Add capacity (threads or instances) before the queue builds",
            "why": "queue wait grows without bound near saturation",
            "try": None,
        },
    ],
    "head_of_line": [
        {
            "title": "Take the slow path off the shared executor (a second executor, or a queue of its own)",
            "why": "one batch holding the only executor makes every batch closed behind it wait its whole time",
            "try": None,
        },
        {
            "title": "Bound the blocking stage's time per request (a timeout with a fallback, capped work per request)",
            "why": "the heavy requests' stage time becomes every waiting request's queue wait",
            "try": None,
        },
        {
            "title": "Add executors (concurrency) so a long batch does not hold all the waiting ones",
            "why": "with k executors a long batch blocks only when the other k - 1 are busy too",
            "try": None,
        },
    ],
    "launch": [
        {
            "title": "Capture the forward in a CUDA graph (or torch.compile mode='reduce-overhead')",
            "why": "one graph launch replaces many small kernel launches; the GPU idles between them today",
            "try": {"cuda_graph": True},
        },
        {
            "title": "Batch more requests per call",
            "why": "launch cost is per call, not per item",
            "try": {"batch_size": "double"},
        },
    ],
    "transfer": [
        {
            "title": "Copy from pinned host buffers with non_blocking=True",
            "why": "pageable copies go through a staging buffer at a fraction of the bandwidth and block the host",
            "try": {"pin_memory": True},
        },
        {
            "title": "Send smaller tensors (uint8 images, normalize on the GPU)",
            "why": "bytes over PCIe are the cost",
            "try": None,
        },
    ],
    "sync": [
        {
            "title": "Remove host syncs inside the model (.item(), .cpu(), printing tensors)",
            "why": "each sync stalls the host until the GPU drains",
            "try": None,
        },
    ],
    "serialization": [
        {
            "title": "Use a binary format (msgpack, numpy bytes) instead of JSON text",
            "why": "text encoding of floats is slow in Python",
            "try": None,
        },
        {"title": "Send fewer fields (top-k, rounded)", "why": "less to encode", "try": None},
    ],
    "gc": [
        {
            "title": "Call gc.freeze() after loading the model",
            "why": "long-lived objects stop being rescanned",
            "try": None,
        },
        {
            "title": "Allocate less per request (reuse buffers)",
            "why": "fewer allocations, fewer collections",
            "try": None,
        },
    ],
}


def actions_for(kind: str) -> list[Action]:
    """The catalog's actions for a finding kind (a copy, so callers may annotate them)."""
    return [dict(a) for a in CATALOG.get(kind, [])]
