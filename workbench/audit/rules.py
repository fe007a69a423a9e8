"""Bottleneck rules: each a pure function ``(facts) -> list[finding]`` of a run and its trace
(``facts``: :func:`workbench.audit.report.run_facts`), its threshold named here; ``docs/audit.md``
tabulates them, docs/json.md's FINDING the two it lacks (``decode_growth``, ``token_host``).
"""

from __future__ import annotations

from typing import Any

from ..analysis.tokens import growth_text
from ..analysis.waits import wait_headline
from ..roles import RoleDecision, decide_role, stage_role  # noqa: F401 (stage_role re-exported)
from .catalog import CATALOG

DOMINANT_SHARE = 0.30
TAIL_RATIO = 5.0
TAIL_SHARE = 0.5
QUEUE_SHARE = 0.30
MAX_WAIT_FIXES = 0.5
HOL_SHARE = 0.25
SERVED_GC_PAUSE_SHARE = 0.10
PAGEABLE_BYTES_PER_REQUEST = 1 << 20
SYNC_SHARE = 0.10
GC_SHARE = 0.05
TIME_TAIL_RATIO = 2.0
LOW_UTILIZATION = 0.6
PERIODIC_TAIL_SHARE = 0.5
WAIT_SHARE = 0.25
WAIT_GROWTH = 3.0
GIL_EVERY_SHARE = 0.5
CPU_SHARE = 0.5
ATTRIBUTE_SHARE = 0.10
WAIT_KIND = {
    "lock": "lock",
    "gil": "gil",
    "io": "io_wait",
    "sleep": "sleep",
    "device": "device_wait",
    "gc": "gc",
    "off_cpu": "off_cpu",
}
WAIT_NUMBERS = ("ms_per_request", "median_ms_per_request", "site", "meanwhile")
TOKEN_HOST_SHARE = 0.5

ROLE_KIND = {
    "io": "feature_io",
    "remote": "remote",
    "preprocess": "preprocess",
    "compute": "compute",
    "serialize": "serialization",
}
WAIT_STAGES = ("batch_wait", "queue_wait")
GROWTH_NUMBERS = ("growth", "agree", "requests", "slope_us_per_token", "first_ms", "last_ms")


def _finding(kind: str, stage: str | None, evidence: str, **numbers) -> list[dict]:
    """A rule's result of one finding: ``[{kind, stage, evidence, numbers}]``."""
    return [{"kind": kind, "stage": stage, "evidence": evidence, "numbers": numbers}]


def slowest_set(tail: dict[str, Any] | None) -> tuple[str, str, dict] | None:
    """``(name, label, set)`` of the tail attribution's slowest 1 % (5 % when the run is too short
    for a 1 % set); None when it has neither."""
    sets = (tail or {}).get("sets") or {}
    name = "slowest_1pct" if sets.get("slowest_1pct") else "slowest_5pct"
    if not sets.get(name):
        return None
    return name, "1 %" if name == "slowest_1pct" else "5 %", sets[name]


def dominant_stages(facts: dict[str, Any]) -> list[dict]:
    out = []
    for s in facts["budget"]["stages"]:
        decision = role_decision(s["name"], facts)
        role, share = decision.role, s.get("share")
        if s["name"] in WAIT_STAGES or role is None or share is None or share < DOMINANT_SHARE:
            continue
        why = f"; {decision.sentence}" if decision.sentence else decision.evidence
        named = s["name"] if role == s["name"] else f"{s['name']} ({role})"
        out += _finding(
            ROLE_KIND[role],
            s["name"],
            f"{named} takes {share:.0%} of the mean end to end "
            f"(p50 {s['p50_ms']:.3f} ms, p99 {s['p99_ms']:.3f} ms){why}",
            share=share,
            p50_ms=s["p50_ms"],
            p99_ms=s["p99_ms"],
            role_source=decision.source,
        )
    return out


def role_decision(stage: str, facts: dict[str, Any]) -> RoleDecision:
    """The stage's role decision: from ``role_decisions`` when the facts carry it, else decided here."""
    made = (facts.get("role_decisions") or {}).get(stage)
    if made:
        return RoleDecision(**made)
    return decide_role(
        stage, (facts.get("roles") or {}).get(stage), (facts.get("libraries") or {}).get(stage)
    )


def tail_stages(facts: dict[str, Any]) -> list[dict]:
    slowest = slowest_set(facts.get("tail"))
    if slowest is None:
        return []
    set_name, label, shares = slowest[0], slowest[1], slowest[2]["shares"]
    stacks = (facts.get("stacks") or {}).get("headline") or ""  # "STAGE, frame ...": sampled stacks
    out = []
    for s in facts["budget"]["stages"]:
        p50, p99 = s.get("p50_ms"), s.get("p99_ms")
        share = shares.get(s["name"], 0.0)
        if not p50 or p99 is None or p99 < TAIL_RATIO * p50 or share < TAIL_SHARE:
            continue
        named = f"; sampled stacks: {stacks}" if stacks.startswith(f"{s['name']}, ") else ""
        out += _finding(
            "tail",
            s["name"],
            f"{s['name']}'s p99 is {p99 / p50:.1f}x its p50 and it holds {share:.0%} of the "
            f"slowest {label}'s time (median request: "
            f"{facts['tail']['sets']['median']['shares'].get(s['name'], 0.0):.0%})"
            f"{named}",
            p99_over_p50=p99 / p50,
            tail_share=share,
            tail_set=set_name,
        )
    return out


def queue(facts: dict[str, Any]) -> list[dict]:
    stages = {s["name"]: s for s in facts["budget"]["stages"]}
    waits = [stages[n] for n in WAIT_STAGES if n in stages and stages[n].get("share") is not None]
    share = sum(s["share"] for s in waits)
    if not waits or share < QUEUE_SHARE:
        return []
    wait_ms = sum(s.get("mean_ms") or 0.0 for s in waits)
    max_wait = (facts.get("policy") or {}).get("max_wait_ms")
    evidence = (
        f"requests spend {share:.0%} of their mean end to end waiting (batch wait + queue wait)"
    )
    if max_wait is not None and max_wait < MAX_WAIT_FIXES * wait_ms:
        evidence += (
            f"; the max wait ({max_wait:g} ms) is already below the {wait_ms:.3g} ms they wait: the rest "
            "is queue wait for a busy executor, which a shorter max wait does not fix"
        )
    stage = "+".join(s["name"] for s in waits)
    return _finding("queue", stage, evidence, share=share, wait_ms=wait_ms, max_wait_ms=max_wait)


def head_of_line(facts: dict[str, Any]) -> list[dict]:
    hol = facts.get("blocking") or {}
    stage = hol.get("stage")
    share = (hol.get("share_of_wait") or {}).get(stage, 0.0) if stage else 0.0
    if not stage or share < HOL_SHARE:
        return []
    held = [h for h in hol["holders"] if h["stage"] == stage][:3]
    named = ", ".join(f"batch {h['batch']} (requests {_ids(h['requests'])})" for h in held)
    queue_share = hol["share_of_queue_wait"].get(stage, 0.0)
    return _finding(
        "head_of_line",
        stage,
        f"closed batches waited {hol['queue_wait_ns'] / 1e6:.4g} ms (summed over requests) for a "
        f"busy executor; {stage} held it for {queue_share:.0%} of that queue wait ({share:.0%} of "
        f"all batch and queue wait), most in {named}",
        share=share,
        share_of_queue_wait=queue_share,
        blocked_ms=hol["blamed_ns"][stage] / 1e6,
        holders=[h["batch"] for h in held],
    )


def _ids(ids: list[int], shown: int = 4) -> str:
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(map(str, ids[:shown])) + more


def served_gc(facts: dict[str, Any]) -> list[dict]:
    if any(c["class"] == "gc" for c in _named_waits(facts.get("waits") or {})):
        return []  # one gc finding: the sampled one names the stage, generations and threads
    gc = facts.get("serving_gc") or {}
    p99 = (facts["budget"].get("end_to_end") or {}).get("p99_ms")
    longest = gc.get("pause_ms_max")
    if not gc.get("collections") or not p99 or longest is None:
        return []
    if longest < SERVED_GC_PAUSE_SHARE * p99:
        return []
    return _finding(
        "gc",
        None,
        f"while serving, {gc['collections']} garbage collections paused the server "
        f"{gc['pause_ms_total']:.4g} ms in all, the longest {longest:.4g} ms "
        f"({longest / p99:.0%} of the end-to-end p99; gc mode {gc.get('mode')})",
        share=longest / p99,
        pause_ms_max=longest,
        collections=gc["collections"],
    )


def launch(facts: dict[str, Any]) -> list[dict]:
    trace = facts.get("trace")
    if not trace or not trace["launch_verdict"]["launch_bound"]:
        return []
    flagged = [s["stage"] for s in trace.get("stages", []) if s.get("launch_bound")]
    idle = trace["gpu"].get("idle_fraction")
    return _finding(
        "launch",
        flagged[0] if flagged else None,
        trace["launch_verdict"]["sentence"]
        + (f"; GPU idle {idle:.0%}" if idle is not None else ""),
        kernels=trace["kernels"]["count"],
        idle_fraction=idle,
    )


def transfer(facts: dict[str, Any]) -> list[dict]:
    trace = facts.get("trace")
    if not trace:
        return []
    requests = max(int(facts.get("traced_requests") or 1), 1)
    by_kind = trace["memcpy"].get("by_kind_and_host_memory", {})
    rows = {k: v for k, v in by_kind.items() if "Pageable" in k}
    pageable = sum(v.get("bytes") or 0 for v in rows.values())
    if pageable / requests < PAGEABLE_BYTES_PER_REQUEST:
        return []
    kind, biggest = max(rows.items(), key=lambda kv: kv[1].get("bytes") or 0)
    rate = biggest.get("gb_per_s")
    stage = next((s["stage"] for s in trace.get("stages", []) if s.get("transfer_bytes")), None)
    return _finding(
        "transfer",
        stage,
        f"{pageable / requests / 1e6:.1f} MB per request copied from pageable host memory "
        f"({kind}{f' at {rate:.1f} GB/s' if rate else ''})",
        pageable_bytes_per_request=pageable / requests,
        gb_per_s=rate,
    )


def sync(facts: dict[str, Any]) -> list[dict]:
    trace = facts.get("trace")
    if not trace or not trace.get("stages"):
        return []
    host_us = sum(s["host_us"] for s in trace["stages"])
    sync_us = sum(s.get("sync_us") or 0.0 for s in trace["stages"])
    if not host_us or sync_us / host_us < SYNC_SHARE:
        return []
    worst = max(trace["stages"], key=lambda s: s.get("sync_us") or 0.0)
    return _finding(
        "sync",
        worst["stage"],
        f"synchronizing calls take {sync_us / host_us:.0%} of the traced stages' host time",
        sync_share=sync_us / host_us,
    )


def gc_pauses(facts: dict[str, Any]) -> list[dict]:
    if facts.get("waits"):  # the sampled run's gc finding comes from its samples (waits)
        return []
    gc = facts.get("gc") or {}
    share = gc.get("share_slowest_5pct")
    if share is None or share < GC_SHARE:
        return []
    return _finding(
        "gc",
        gc.get("stage"),
        f"garbage-collection pauses take {share:.0%} of the slowest 5 %'s end to end",
        share_slowest_5pct=share,
    )


def waits(facts: dict[str, Any]) -> list[dict]:
    found = facts.get("waits") or {}
    out = []
    for cause in _named_waits(found):
        evidence = wait_headline(cause, found["tail_set"])
        if not _grew(cause):
            evidence += (
                f"; the median request waits {cause['median_ms_per_request']:.3g} ms there too: "
                "every request pays it"
            )
        if cause["class"] == "gc" and found.get("gc"):
            evidence += f"; {gc_sentence(found['gc'])}"
        if cause["class"] == "gc" and (facts.get("serving_gc") or {}).get("mode"):
            evidence += f" (gc mode {facts['serving_gc']['mode']})"
        out += _finding(
            WAIT_KIND[cause["class"]],
            cause["stage"],
            evidence,
            tail_share=cause["share"],
            **{k: cause[k] for k in WAIT_NUMBERS},
        )
    return out


def _named_waits(found: dict[str, Any]) -> list[dict]:
    """Causes past ``WAIT_SHARE`` of the tail that grew, or a GIL wait that every request pays (at
    least ``GIL_EVERY_SHARE`` of the median set's sampled time)."""
    median = sum(((found.get("classes") or {}).get("median") or {}).values())
    every = GIL_EVERY_SHARE * median if median > 0 else float("inf")
    return [
        c
        for c in found.get("causes") or []
        if c["share"] >= WAIT_SHARE
        and (_grew(c) or (c["class"] == "gil" and (c["median_ms_per_request"] or 0.0) >= every))
    ]


def _grew(cause: dict[str, Any]) -> bool:
    """The slowest set waits at least ``WAIT_GROWTH`` times the median set's time per request."""
    return cause["ms_per_request"] >= WAIT_GROWTH * (cause["median_ms_per_request"] or 0.0)


def gc_sentence(gc: dict[str, Any]) -> str:
    """``12 collections paused 340 ms (gen 2: 3, 310 ms; gen 0: 9, 30 ms), longest 120 ms; triggered by
    'MainThread' 300 ms, 'loader' 40 ms``."""
    gens = sorted(gc["generations"].items(), key=lambda kv: -kv[1]["pause_ms_total"])
    by_gen = "; ".join(
        f"gen {g}: {v['collections']}, {v['pause_ms_total']:.3g} ms" for g, v in gens
    )
    threads = ", ".join(f"'{t}' {ms:.3g} ms" for t, ms in list(gc["threads"].items())[:3])
    return (
        f"{gc['collections']} collections paused {gc['pause_ms_total']:.3g} ms ({by_gen}), "
        f"longest {gc['pause_ms_max']:.3g} ms; triggered by {threads}"
    )


def attribute_growth(facts: dict[str, Any]) -> list[dict]:
    summary = (facts["budget"].get("attributes_summary") or {}).get("ranking") or []
    if not summary or summary[0]["explained"] < ATTRIBUTE_SHARE:
        return []
    best = summary[0]
    effects = facts["budget"]["attributes"][best["stage"]][best["attribute"]]
    return _finding(
        "attribute",
        best["stage"],
        facts["budget"]["attributes_summary"]["headline"],
        tail_share=best["explained"],
        effect=best["effect"],
        exponent=effects.get("exponent"),
        attribute=best["attribute"],
    )


def periodic(facts: dict[str, Any]) -> list[dict]:
    found = facts.get("periodic")
    if not found:
        return []
    return _finding(
        "periodic",
        found["stage"],
        f"slow requests recur {found['sentence']}",
        share=found["share_of_requests"],
        **{k: found[k] for k in ("period_ms", "width_ms", "episodes")},
    )


def time_tail(facts: dict[str, Any]) -> list[dict]:
    pacing, spikes = facts.get("pacing") or {}, facts.get("periodic") or {}
    ratio, capacity = pacing.get("p99_over_closed_loop"), pacing.get("capacity_rps")
    load = pacing["rate_rps"] / capacity if capacity else None
    paced = ratio is not None and ratio >= TIME_TAIL_RATIO and load <= LOW_UTILIZATION
    periodic_share = spikes.get("share_of_slowest_1pct") or 0.0
    if not paced and periodic_share < PERIODIC_TAIL_SHARE:
        return []
    if paced:
        why = (
            f"paced at {load:.0%} of the capacity, p99 is {service(pacing)['p99_ms']:.3g} ms from "
            f"the send, {ratio:.1f}x the closed-loop p99 ({pacing['closed_loop']['p99_ms']:.3g} ms)"
        )
    else:
        why = (
            f"{periodic_share:.0%} of the slowest 1 % of requests recur every "
            f"{spikes['period_ms']:.3g} ms"
        )
    slowest = slowest_set(facts.get("tail"))
    shares = slowest[2]["shares"] if slowest else {}
    stage = spikes.get("stage") or (max(shares, key=shares.get) if shares else None)
    where = f"; requests wait in {stage}" if stage else ""
    return _finding(
        "time",
        stage,
        f"{why}: the tail comes from time, not from the request's own work{where}",
        share=max(periodic_share, 1.0 - 1.0 / ratio if paced else 0.0),
        p99_over_closed_loop=ratio,
        utilization=load,
    )


def decode_growth(facts: dict[str, Any]) -> list[dict]:
    tokens = facts["budget"].get("tokens") or {}
    growth = tokens.get("decode_growth") or {}
    if not growth.get("grows"):
        return []
    return _finding(
        "decode_growth",
        tokens["stage"],
        f"decode steps of {tokens['stage']} grow with the token's position: {growth_text(growth)}; "
        "each step recomputes every earlier token (no KV cache, or one that is not used)",
        share=1.0 - 1.0 / growth["growth"],
        **{k: growth[k] for k in GROWTH_NUMBERS},
    )


def token_host(facts: dict[str, Any]) -> list[dict]:
    tokens = facts["budget"].get("tokens") or {}
    stages = (facts.get("trace") or {}).get("stages") or []
    row = next((s for s in stages if s["stage"] == tokens.get("stage")), None)
    mean = (tokens.get("tokens_out") or {}).get("mean")
    if not row or not row.get("gpu_us") or not row.get("host_us") or not mean:
        return []  # no GPU in the trace: host overhead is not told apart from the model's work
    busy = row["gpu_us"] / row["host_us"]
    if busy >= 1.0 - TOKEN_HOST_SHARE:
        return []
    traced_tokens = row["count"] * mean
    per_token_us = (row["host_us"] - row["gpu_us"]) / traced_tokens
    sync_us = (row.get("sync_us") or 0.0) / traced_tokens
    syncs = f", {sync_us:.1f} us of it in synchronizing calls" if sync_us else ""
    return _finding(
        "token_host",
        row["stage"],
        f"per-token host overhead in {row['stage']}: its GPU work covers {busy:.0%} of its traced host "
        f"time; {per_token_us:.1f} us a token of host work with the GPU idle (Python between tokens, "
        f"dispatch and launches{syncs})",
        share=1.0 - busy,
        per_token_us=per_token_us,
        sync_us_per_token=sync_us,
    )


def service(pacing: dict[str, Any]) -> dict[str, Any]:
    """The paced requests timed from their sends (``paced`` in runs saved before ``service``, when
    ``paced`` was timed from the send)."""
    return pacing.get("service") or pacing["paced"]


RULES = (
    dominant_stages,
    tail_stages,
    queue,
    head_of_line,
    launch,
    transfer,
    sync,
    gc_pauses,
    waits,
    attribute_growth,
    served_gc,
    periodic,
    time_tail,
    decode_growth,
    token_host,
)


def findings(facts: dict[str, Any]) -> list[dict]:
    """Every rule's findings, each with its catalog actions, largest time share first."""
    out = [f | {"actions": _actions(f)} for rule in RULES for f in rule(facts)]
    # the stages' own work is not what the tail is made of
    if any(f["kind"] == "time" for f in out):
        out = [f for f in out if f["kind"] not in ROLE_KIND.values()]
    # compute advice only for a tail spent on CPU: slowest set >= CPU_SHARE on CPU, torch in it
    # (a run without these samples keeps it)
    found = facts.get("waits") or {}
    classes = (found.get("classes") or {}).get(found.get("tail_set")) or {}
    if sum(classes.values()):
        libraries = (facts.get("libraries") or {}).values()
        torch = any(libs.get("torch", 0.0) >= CPU_SHARE for libs in libraries)
        stages = ((facts.get("stacks") or {}).get("stages") or {}).values()
        torch = torch or any(
            "/torch/" in frame["file"] for st in stages for frame in st.get("frames") or []
        )
        if not (torch and classes.get("cpu", 0.0) >= CPU_SHARE * sum(classes.values())):
            out = [f for f in out if f["kind"] != "compute"]
    # a stage whose decode steps grow or whose GPU idles per token: not a compute finding too
    recomputed = {f["stage"] for f in out if f["kind"] in ("decode_growth", "token_host")}
    out = [f for f in out if not (f["kind"] == "compute" and f["stage"] in recomputed)]
    return sorted(out, key=lambda f: -_weight(f))


def _actions(finding: dict) -> list[dict]:
    """Copies of the finding's catalog actions, less a "lower the max wait" that cannot help."""
    n = finding["numbers"]
    futile = n.get("max_wait_ms") is not None and n["max_wait_ms"] < MAX_WAIT_FIXES * (
        n.get("wait_ms") or 0.0
    )
    actions = CATALOG.get(finding["kind"], [])
    return [dict(a) for a in actions if not (futile and (a["try"] or {}).get("max_wait_ms"))]


def _weight(finding: dict) -> float:
    n = finding["numbers"]
    weight = n.get("tail_share") or n.get("share") or n.get("idle_fraction") or n.get("sync_share")
    return float(weight or 0.1)
