"""The sentences the notebooks print agree with the numbers printed next to them, on whatever machine ran them.

Each teaching notebook prints its claims about live numbers from those numbers,
with both outcomes written; a claim about recorded data is a fixed fact that is
asserted here against the same data. Each test below reads the executed
notebook's stdout, finds a claim by its fixed wording and checks the claim's
condition against the figures in the same line (or the lines printed with it).
"""
from __future__ import annotations

import re

import pytest
from nbexec import NOTEBOOKS

pytestmark = pytest.mark.slow
NUM = r"(-?\d+(?:\.\d+)?)"


def notebook(number: str):
    return next(p for p in NOTEBOOKS if p.name.startswith(number))


def stdout(nb) -> str:
    return "\n".join(out["text"] for cell in nb.cells for out in cell.get("outputs", [])
                     if out.get("output_type") == "stream" and out.get("name") == "stdout")


def claim(text: str, pattern: str) -> re.Match:
    found = re.search(pattern, text, flags=re.M)
    assert found, f"no line matches {pattern!r} in:\n{text[-3000:]}"
    return found


def claims(text: str, pattern: str) -> list[re.Match]:
    found = list(re.finditer(pattern, text, flags=re.M))
    assert found, f"no line matches {pattern!r}"
    return found


def near(value: float, threshold: float, printed_decimals: int) -> bool:
    """True when rounding to the printed decimals could put ``value`` on either side of ``threshold``."""
    return abs(value - threshold) <= 0.5 * 10 ** -printed_decimals


def check_sla(text: str) -> None:
    noise = claim(text, r"^noise: (NOISY|quiet|unknown)").group(1)
    m = claim(text, rf"^end-to-end p99 {NUM} ms (meets|misses) the {NUM} ms SLA(.*)$")
    p99, verdict, sla, rest = float(m.group(1)), m.group(2), float(m.group(3)), m.group(4)
    if not near(p99, sla, 3):
        assert (verdict == "meets") == (p99 <= sla), m.group(0)
    assert ("NOISY machine" in rest) == (noise == "NOISY"), (m.group(0), noise)


def test_01_quickstart(executed):
    nb = executed(notebook("01"))
    text = stdout(nb)
    check_sla(text)
    m = claim(text, rf"^(\w+) takes {NUM}% of the end-to-end mean(: this run is compute-bound|, more than any other)")
    shares = {k: v["share"] for k, v in summary_table(nb).items() if k not in ("end_to_end", "unattributed")}
    assert m.group(1) == max(shares, key=shares.get), (m.group(0), shares)
    if "compute-bound" in m.group(3):
        assert m.group(1) == "forward" and float(m.group(2)) >= 50, m.group(0)
    else:
        assert m.group(1) != "forward" or float(m.group(2)) < 50.5, m.group(0)
    nums = claim(text, rf"^first request {NUM} ms, warm-up mean {NUM} ms, measured p50 {NUM} ms")
    first, p50 = float(nums.group(1)), float(nums.group(3))
    m = claim(text, rf"^the first request took (?:only )?{NUM}x the measured p50: (that is the lazy|little was slow)")
    ratio = float(m.group(1))
    assert abs(ratio - first / p50) <= 0.05 + 0.01 * first / p50, (m.group(0), first, p50)
    if not near(ratio, 1.5, 1):
        assert (m.group(2) == "that is the lazy") == (ratio >= 1.5), m.group(0)
    m = claim(text, rf"^live p50 {NUM} ms against recorded {NUM} ms \({NUM}x\): (this machine|another CPU)")
    live, recorded, x = map(float, m.group(1, 2, 3))
    assert abs(x - live / recorded) <= 0.01 + 0.01 * x
    if not (near(x, 0.8, 2) or near(x, 1.25, 2)):
        assert (m.group(4) == "this machine") == (0.8 <= x <= 1.25), m.group(0)


def shares_table(nb) -> dict[str, dict[str, float]]:
    """The '% of mean' table of notebook 2: example -> stage -> percent, parsed from its text output."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            plain = out.get("data", {}).get("text/plain", "")
            if "(% of mean)" in plain:
                lines = plain.splitlines()
                examples = re.findall(r"(\w+) \(% of mean\)", lines[0])
                rows = [line.split() for line in lines[2:] if line.strip()]
                return {ex: {row[0]: float(row[1 + i]) for row in rows} for i, ex in enumerate(examples)}
    raise AssertionError("notebook 2 printed no shares table")


def test_02_where_the_latency_budget_goes(executed):
    nb = executed(notebook("02"))
    text, table = stdout(nb), shares_table(nb)
    built_for = {"tabular": "hydrate", "text": "forward", "image": "preprocess"}
    for m in claims(text, rf"^(\w+)\s+dominant stage (\w+) \({NUM}%\)(: as built|, not (\w+))"):
        example, stage, pct = m.group(1), m.group(2), float(m.group(3))
        column = {k: v for k, v in table[example].items() if k != "unattributed"}
        assert stage == max(column, key=column.get) and abs(column[stage] - pct) <= 0.051, (m.group(0), column)
        assert (m.group(4) == ": as built") == (stage == built_for[example]), m.group(0)
    m = claim(text, rf"^batch 8 took {NUM}x as long as batch 1 at p50 \({NUM}x at p99\) for 8x the items\.\n(.*)$")
    x, verdict = float(m.group(1)), m.group(3)
    expected = "far less than 8x" if x < 8 / 1.5 else "only a little less than 8x" if x < 8 else "8x or more"
    if not (near(x, 8 / 1.5, 1) or near(x, 8, 1)):
        assert verdict.startswith(expected), m.group(0)


def test_03_measuring_honestly(executed):
    text = stdout(executed(notebook("03")))
    m = claim(text, rf"^mixing the warm-up in (?:moves p99 from {NUM} to {NUM} ms|leaves p99 at {NUM} ms \(against {NUM}\))")
    if m.group(1):
        assert float(m.group(2)) > float(m.group(1)), m.group(0)
    else:
        assert float(m.group(3)) <= float(m.group(4)), m.group(0)
    m = claim(text, rf"^live: the first request took (?:only )?{NUM}x the median of the measured ones(, as in the recording|: this)")
    if not near(float(m.group(1)), 1.5, 1):
        assert (m.group(2) == ", as in the recording") == (float(m.group(1)) >= 1.5), m.group(0)
    m = claim(text, rf"^live: mixing warm-up in gives (?:a LOWER p99 \({NUM} against {NUM} ms\)|p99 {NUM} ms against {NUM} ms)")
    if m.group(1):
        assert float(m.group(1)) <= float(m.group(2)), m.group(0)
    else:
        assert float(m.group(3)) >= float(m.group(4)), m.group(0)
    m = claim(text, rf"^live: the hand-off timer saw {NUM}% of the work's p50: (it measured the submit|the machine was so busy)")
    if not near(float(m.group(1)), 50, 1):
        assert (m.group(2) == "it measured the submit") == (float(m.group(1)) < 50), m.group(0)
    m = claim(text, rf"forward {NUM} ms against {NUM} ms of GPU time, and postprocess {NUM} ms against {NUM}: "
                    r"the forward pass's GPU work is charged to the stage that first waits for it")
    fwd_host, fwd_gpu, post_host, post_gpu = map(float, m.group(1, 2, 3, 4))
    assert fwd_host < fwd_gpu and post_host > post_gpu, m.group(0)  # the recorded runs show the lesson
    m = claim(text, rf"^recorded: with --sync stage the host clock and CUDA events agree within {NUM}% on every stage(\.|: NOT)")
    assert m.group(2) == "." and float(m.group(1)) <= 5, m.group(0)
    m = claim(text, rf"^here a record_function range costs {NUM}x a pair of clock reads \({NUM} ns against {NUM} ns\)(\.|: not what)")
    assert (m.group(4) == ".") == (float(m.group(2)) > float(m.group(3))), m.group(0)
    m = claim(text, r"^here the traced run was slower in (\d+) of (\d+) stages")
    slower, total = int(m.group(1)), int(m.group(2))
    assert ("traced faster or equal in" in text) == (slower < total), m.group(0)


def test_04_kernel_launches_and_transfers(executed):
    from workbench.analysis.verdict import launch_verdict
    from workbench.examples import data_dir
    from workbench.trace import load_trace

    text = stdout(executed(notebook("04")))
    m = claim(text, r"^the biggest GPU item of this trace is a (\w+) .*?(: the input copy outweighs every convolution\.|\.)$")
    assert (m.group(2) != ".") == (m.group(1) == "memcpy"), m.group(0)
    alexnet = load_trace(data_dir() / "traces" / "hta_critical_path_alexnet.json.gz")
    m = claim(text, r"^alexnet: (launch-bound|not launch-bound)")
    assert (m.group(1) == "launch-bound") == launch_verdict(alexnet.events)[0], m.group(0)
    m = claim(text, r"^(.*)\n(launch-bound|not launch-bound) at batch 1: ")
    assert (m.group(2) == "launch-bound") == m.group(1).startswith("Launch-bound"), m.group(0)
    m = claim(text, rf"^recorded: at batch 1 the forward's kernels ran {NUM}x the host's launch time "
                    rf"\((launch-bound|not launch-bound)[^;]*; at batch 1024 {NUM}x \((compute-bound|still not)")
    assert (m.group(2) == "launch-bound") == (float(m.group(1)) < 0.5), m.group(0)  # GPU_SHARE, with >= 10 launches
    if not near(float(m.group(3)), 1, 2):
        assert (m.group(4) == "compute-bound") == (float(m.group(3)) >= 1), m.group(0)
    m = claim(text, rf"^recorded: at batch 1024 parse and preprocess take {NUM} ms at p50 against the forward's {NUM} ms"
                    r"(: the next bottleneck|\.)")
    assert (m.group(3) != ".") == (float(m.group(1)) > float(m.group(2))), m.group(0)
    m = claim(text, rf"with {NUM} graph launches instead of {NUM} kernel launches; kernel time {NUM} -> {NUM} ms; "
                    rf"forward p50 {NUM} -> {NUM} ms, end to end {NUM} -> {NUM} ms(: the launches were the cost\.|: NO faster\.)")
    assert float(m.group(1)) < float(m.group(2)), m.group(0)
    assert (m.group(9) == ": the launches were the cost.") == (float(m.group(6)) < float(m.group(5))), m.group(0)
    assert float(m.group(6)) < float(m.group(5)), m.group(0)  # the recorded runs show the lesson
    m = claim(text, rf"^recorded: {NUM} MB host-to-device in each run \((the same bytes|DIFFERENT bytes)\): "
                    rf"HtoD Pinned {NUM} GB/s against HtoD Pageable {NUM} GB/s, {NUM}x (faster|SLOWER)")
    assert m.group(2) == "the same bytes", m.group(0)  # the lesson needs the same copy
    pinned, pageable = float(m.group(3)), float(m.group(4))
    assert m.group(6) == "faster" and pinned > pageable, m.group(0)  # the text says pageable runs at a fraction
    for m in claims(text, rf"^(\w+): torch operators cover (only )?{NUM}% of the stage"):
        if not near(float(m.group(3)), 50, 0):
            assert bool(m.group(2)) == (float(m.group(3)) < 50), m.group(0)


def test_05_batch_size_and_precision(executed):
    nb = executed(notebook("05"))
    text = stdout(nb)
    m = claim(text, rf"^recorded: the best throughput is at batch (\d+): {NUM}x the items per second of batch 1, "
                    rf"for {NUM}x the p50 latency\.\n(.*)$")
    gain, cost = float(m.group(2)), float(m.group(3))
    assert m.group(4).startswith("throughput grew at least as fast" if gain >= cost else "latency grew far faster"), m.group(0)
    table = batch_table(nb)
    best = max(table, key=lambda bs: table[bs]["items_per_s"])
    assert int(m.group(1)) == best, (m.group(0), table)
    fell = [f"{a} to {b}" for a, b in zip(sorted(table), sorted(table)[1:]) if table[b]["items_per_s"] < table[a]["items_per_s"]]
    if fell:
        assert "throughput fell from batch " + ", ".join(fell) + ":" in text
    else:
        assert "throughput never fell as the batch grew." in text
    for m in claims(text, rf"^recorded: (bf16|int8) forward p50 is {NUM}x fp32's \((faster|slower)\)"):
        if not near(float(m.group(2)), 1, 2):
            assert (m.group(3) == "faster") == (float(m.group(2)) < 1), m.group(0)


def batch_table(nb) -> dict[int, dict[str, float]]:
    """Notebook 5's first table (batch_size, p50_ms, p99_ms, items_per_s, requests), from its text output."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            plain = out.get("data", {}).get("text/plain", "")
            if "items_per_s" in plain and "batch_size" in plain.splitlines()[0]:
                head = plain.splitlines()[0].split()
                rows = [line.split()[1:] for line in plain.splitlines()[1:] if line.strip()]
                return {int(float(r[0])): dict(zip(head[1:], map(float, r[1:]))) for r in rows}
    raise AssertionError("notebook 5 printed no batch-size table")


def test_06_dynamic_batching_and_wait_time(executed):
    text = stdout(executed(notebook("06")))
    line = claim(text, r"^recorded: capacity by max batch size: (.*)$").group(1)
    caps = {int(b): float(c) for b, c in re.findall(rf"(\d+): {NUM} req/s", line)}
    values = [caps[b] for b in sorted(caps)]
    if all(b > a for a, b in zip(values, values[1:])):
        assert "capacity rises with every larger batch" in text
    else:
        m = claim(text, r"^capacity peaks at batch (\d+): ")
        assert int(m.group(1)) == max(caps, key=caps.get), (m.group(0), caps)
        assert "capacity rises with every larger batch" not in text
    m = claim(text, rf"^simulated p50 per part: batch_wait {NUM} ms, queue_wait {NUM} ms, service {NUM} ms; the largest is (\w+)\.")
    parts = dict(zip(("batch_wait", "queue_wait", "service"), map(float, m.group(1, 2, 3))))
    assert parts[m.group(4)] == max(parts.values()), m.group(0)
    m = claim(text, rf"^live service p50 is {NUM}x the simulated one: the recorded runs (describe|came from)")
    x = float(m.group(1))
    if not (near(x, 0.67, 2) or near(x, 1.5, 2)):
        assert (m.group(2) == "describe") == (0.67 <= x <= 1.5), m.group(0)


def summary_table(nb) -> dict[str, dict[str, float]]:
    """The first stage summary a notebook shows (name, count, ..., share), from its text output."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            lines = out.get("data", {}).get("text/plain", "").splitlines()
            if lines and lines[0].split()[:2] == ["name", "count"] and "share" in lines[0]:
                head = lines[0].split()
                return {r[1]: dict(zip(head[1:], map(float, r[2:]))) for r in (line.split() for line in lines[1:])}
    raise AssertionError("no stage summary printed")


def test_08_profile_your_own_pipeline(executed):
    nb = executed(notebook("08"))
    text = stdout(nb)
    check_sla(text)
    m = claim(text, rf"^(\w+) is the largest stage here: {NUM}% of the end-to-end mean")
    shares = {k: v["share"] for k, v in summary_table(nb).items() if k not in ("end_to_end", "unattributed")}
    assert m.group(1) == max(shares, key=shares.get), (m.group(0), shares)
    assert abs(100 * shares[m.group(1)] - float(m.group(2))) <= 0.6, (m.group(0), shares)


def test_09_serving_over_http(executed):
    nb = executed(notebook("09"))
    text = stdout(nb)
    m = claim(text, rf"^(\w+) is the largest share here \({NUM}%\); the network and the server's HTTP work take {NUM}%, "
                    rf"the batcher's waits {NUM}%, forward {NUM}%\.\n(.*)$")
    shares = {k: v["share"] for k, v in summary_table(nb).items() if k not in ("end_to_end", "unattributed")}
    assert m.group(1) == max(shares, key=shares.get), (m.group(0), shares)
    outside = sum(shares.get(k, 0) for k in ("network", "ingress", "handoff", "egress"))
    waits = sum(shares.get(k, 0) for k in ("batch_wait", "queue_wait"))
    assert abs(100 * outside - float(m.group(3))) <= 0.6 and abs(100 * waits - float(m.group(4))) <= 0.6, m.group(0)
    more = m.group(6).startswith("more of a served request went to waiting")
    assert more == (outside + waits > shares.get("forward", 0)), m.group(0)


def test_09_cache_knob(executed):
    text = stdout(executed(notebook("09")))
    rows = {m.group(1): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(rf"^cache=(none|lru): p50 {NUM} ms, p99 {NUM} ms", text, flags=re.M)}
    m = claim(text, rf"^the cache answered {NUM}% of items; with it p50 is {NUM}x and p99 {NUM}x of no cache\.\n(.*)$")
    r50, r99 = rows["lru"][0] / rows["none"][0], rows["lru"][1] / rows["none"][1]
    assert abs(r50 - float(m.group(2))) <= 0.006 and abs(r99 - float(m.group(3))) <= 0.006, (m.group(0), rows)
    follow = m.group(4)
    if r50 < 1 and r99 < 1:
        assert follow.startswith("both percentiles fell")
    elif r50 < 1:
        assert follow.startswith("the median fell but p99 did not")
    else:
        assert follow.startswith("the cache did not help here")
