"""The dispatch rule replayed slowly and obviously: the reference the simulator and the batcher are held to."""

from workbench.batching.policy import BatchFormer, BatchPolicy


def dispatch_schedule(arrivals_ns, service_ns, policy: BatchPolicy) -> list[dict[str, int]]:
    """Slow and obvious replay of the rule, batch ``m`` taking ``service_ns[m]``, that tests hold
    the simulator and the batcher to: per batch ``batch``, ``size``, ``first`` (its first request),
    ``due_ns``, ``close_ns``, ``start_ns``, ``end_ns``."""
    former, free, batches, slot_free = BatchFormer(policy), [0] * policy.concurrency, [], 0
    for i, a in enumerate(arrivals_ns):
        former.push(i, int(a))
    while len(former):
        due = former.due_ns()
        close = former.close_ns(slot_free)
        taken = former.pop(close)
        k = min(range(len(free)), key=free.__getitem__)
        start = max(close, free[k])
        end = start + int(service_ns[len(batches)])
        free[k], slot_free = end, start
        batches.append(
            {
                "batch": len(batches),
                "size": len(taken),
                "first": taken[0][0],
                "due_ns": due,
                "close_ns": close,
                "start_ns": start,
                "end_ns": end,
            }
        )
    return batches
