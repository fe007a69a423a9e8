"""What to do about each kind of finding (docs/audit.md): a ``title``, the mechanism (``why``) and the
configuration change ``audit --try`` can measure (``try``; None when only the user can make it)."""

from __future__ import annotations


def _action(title: str, why: str, try_: dict | None = None) -> dict:
    return {"title": title, "why": why, "try": try_}


CATALOG: dict[str, list[dict]] = {
    "compute": [
        _action(
            "Run the model in bf16 (or int8 dynamic quantization on CPU)",
            "lower precision halves (or quarters) the bytes each matmul moves",
            {"precision": "bf16"},
        ),
        _action(
            "Try int8 dynamic quantization of Linear layers (CPU)",
            "int8 GEMMs on CPU are faster when Linear layers dominate",
            {"precision": "int8"},
        ),
        _action(
            "Run one torch thread per worker when cores are shared",
            "torch's thread pool busy-waits; on contended cores extra threads slow small forwards down",
            {"threads": 1},
        ),
        _action(
            "Compile the model with torch.compile",
            "fuses elementwise ops and removes Python dispatch between them",
            {"compile": True},
        ),
        _action(
            "Make inputs contiguous / channels_last for convolutions",
            "strided inputs force copies or slow kernels",
            {"channels_last": True},
        ),
    ],
    "preprocess": [
        _action(
            "Decode at reduced size (PIL draft mode, libjpeg-turbo scaling) or use a faster decoder",
            "decoding a full-resolution image to resize it down wastes most of the work",
        ),
        _action(
            "Move resize/normalize to tensors in batch, or to the GPU",
            "per-item Python image ops do not batch",
        ),
    ],
    "feature_io": [
        _action(
            "Batch the feature lookups (one query per request, not per item)",
            "each round trip to the store pays its fixed cost once per call",
        ),
        _action(
            "Cache hot features in process (LRU) in front of the store",
            "skewed key popularity makes a small cache absorb most lookups",
        ),
    ],
    "remote": [
        _action(
            "Put a timeout (with a fallback) on the remote call",
            "the tail of a remote dependency becomes your tail; a timeout bounds it",
        ),
        _action(
            "Hedge the request: send a second copy after the p95",
            "takes the faster of two independent draws from the tail",
        ),
    ],
    "tail": [
        _action(
            "Find what the slow requests have in common (describe= attributes, inputs)",
            "a stage whose p99 is many times its p50 has a cause that only some requests hit",
        ),
        _action(
            "Bound the stage's time (timeout, smaller inputs, bucketing by size)",
            "the slowest 1 % is concentrated in this stage",
        ),
    ],
    "queue": [
        _action(
            "Lower the batcher's max wait",
            "requests wait for a batch that fills too slowly",
            {"max_wait_ms": "half"},
        ),
        _action(
            "Add capacity (threads or instances) before the queue builds",
            "queue wait grows without bound near saturation",
        ),
    ],
    "head_of_line": [
        _action(
            "Take the slow path off the shared executor (a second executor, or a queue of its own)",
            "one batch holding the only executor makes every batch closed behind it wait its whole time",
        ),
        _action(
            "Bound the blocking stage's time per request (a timeout with a fallback, capped work per request)",
            "the heavy requests' stage time becomes every waiting request's queue wait",
        ),
        _action(
            "Add executors (concurrency) so a long batch does not hold all the waiting ones",
            "with k executors a long batch blocks only when the other k - 1 are busy too",
        ),
    ],
    "launch": [
        _action(
            "Capture the forward in a CUDA graph (or torch.compile mode='reduce-overhead')",
            "one graph launch replaces many small kernel launches; the GPU idles between them today",
            {"cuda_graph": True},
        ),
        _action(
            "Batch more requests per call",
            "launch cost is per call, not per item",
            {"batch_size": "double"},
        ),
    ],
    "transfer": [
        _action(
            "Copy from pinned host buffers with non_blocking=True",
            "pageable copies go through a staging buffer at a fraction of the bandwidth and block the host",
            {"pin_memory": True},
        ),
        _action(
            "Send smaller tensors (uint8 images, normalize on the GPU)",
            "bytes over PCIe are the cost",
        ),
    ],
    "sync": [
        _action(
            "Remove host syncs inside the model (.item(), .cpu(), printing tensors)",
            "each sync stalls the host until the GPU drains",
        ),
    ],
    "serialization": [
        _action(
            "Use a binary format (msgpack, numpy bytes) instead of JSON text",
            "text encoding of floats is slow in Python",
        ),
        _action("Send fewer fields (top-k, rounded)", "less to encode"),
    ],
    "periodic": [
        _action(
            "Find the job that runs at this period (a cache snapshot, a flush, a metrics export) and "
            "take it off the requests' path: copy-on-write, a shorter critical section, another process",
            "every request that arrives while it holds the lock or the core waits out the rest of it",
        ),
        _action(
            "Spread the job's work into small steps between requests",
            "many short pauses cost the tail less than one long one",
        ),
    ],
    "time": [
        _action(
            "Look beside the requests: background threads, periodic jobs, GC, idle-time frequency "
            "scaling; measure a change with a paced profile (--utilization), not back to back",
            "the requests' own work is fast closed loop: what slows them happens in time",
        ),
    ],
    "decode_growth": [
        _action(
            "Keep a KV cache: run each decode step on the newest token only, against the cached keys "
            "and values of the earlier ones",
            "without it a step recomputes attention and every projection over the whole sequence, so "
            "its time grows with the position; with it a step costs one token's work",
            {"kv_cache": True},
        ),
        _action(
            "Check the cache is used: one new token per sequence goes in per step, the cache is "
            "preallocated or grown in place (Hugging Face: use_cache=True, past_key_values passed back)",
            "a cache that is rebuilt, copied with torch.cat every step or dropped between steps "
            "still grows with the position",
        ),
    ],
    "token_host": [
        _action(
            "Capture the decode step in a CUDA graph (torch.compile mode='reduce-overhead')",
            "one replay a token instead of a launch per kernel: the GPU stops waiting for Python",
        ),
        _action(
            "Keep the sampled token on the GPU between steps and copy tokens out without a sync each "
            "step (non_blocking into pinned memory, read a few steps later)",
            "a per-token .item()/.tolist() stalls the host until the GPU drains, then the GPU waits "
            "for the host's next launches",
        ),
        _action(
            "Decode more sequences per step",
            "the host's work is per step, not per sequence: it is shared by the batch",
            {"batch_size": "double"},
        ),
    ],
    "gc": [
        _action(
            "Call gc.freeze() after warm-up (after loading the model and caches)",
            "long-lived objects move to a permanent generation and stop being rescanned by every "
            "generation-2 collection",
        ),
        _action(
            "Raise the collection thresholds (gc.set_threshold) or collect between requests",
            "fewer collections, and the long ones land where no request waits",
        ),
        _action(
            "Keep fewer long-lived cyclic objects (break cycles, weakrefs, flat arrays)",
            "a generation-2 pause grows with the objects the collector must traverse",
        ),
        _action(
            "Allocate less per request (reuse buffers)", "fewer allocations, fewer collections"
        ),
    ],
    "lock": [
        _action(
            "Shorten the other thread's critical section: copy or compute outside the lock and swap a "
            "reference inside it",
            "every request that needs the lock waits out the rest of the holder's time under it",
        ),
        _action(
            "Take the request path off the lock (copy-on-write state, a read-only snapshot, per-key locks)",
            "readers need not wait for a writer that replaces the whole state",
        ),
    ],
    "gil": [
        _action(
            "Move the background work out of the process (a worker process, a sidecar)",
            "a thread running Python holds the interpreter lock the request's thread needs",
        ),
        _action(
            "Run the background work in code that releases the GIL (NumPy, torch, I/O), or in "
            "smaller steps",
            "while it runs in C without the GIL, the request's Python runs beside it",
        ),
    ],
    "io_wait": [
        _action(
            "Batch the calls (one round trip per request, not per item)",
            "each round trip pays its latency once per call",
        ),
        _action(
            "Pipeline or overlap the calls (async, several in flight)",
            "waits in series add up; in flight together they overlap",
        ),
        _action(
            "Reuse connections (a connection pool, keep-alive)",
            "connecting again pays the handshake every time",
        ),
    ],
    "sleep": [
        _action(
            "Wait on an event instead of sleeping or polling on a timer",
            "a poll interval adds up to its whole length to every request that hits it",
        ),
    ],
    "device_wait": [
        _action(
            "Remove per-step host syncs (.item(), .cpu(), .tolist()) from loops; keep results on the "
            "device and copy once at the end",
            "each sync stalls the host until the device drains its queue",
        ),
    ],
    "off_cpu": [
        _action(
            "Check what else runs on the machine (another process had the core); pin the server's "
            "cores or measure on a quiet machine",
            "the request's thread was neither running nor waiting on anything of its own",
        ),
    ],
    "attribute": [
        _action(
            "Bound the attribute (truncate or cap inputs, bucket requests by size)",
            "the stage's time follows the attribute; the largest inputs make the tail",
        ),
        _action(
            "Replace the part that grows faster than linearly (a quadratic loop, repeated joins) "
            "with a linear one",
            "at twice the input a quadratic stage takes four times as long",
        ),
    ],
}
