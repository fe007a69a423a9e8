"""Flame tree of a trace: nested host events with GPU work under its launch call.

Host events nest by time on their thread (:func:`.trace_report.nest`, the request chart's rule);
each kernel, copy or memset hangs under the runtime call with its correlation (else under a
root ``(no launch call)``). Identical paths merge (``ProfilerStep#N`` as ``ProfilerStep``; stage
ranges as the stage name, kind ``stage``), so counts aggregate. A trace with stage ranges starts at
its stages (:func:`harness_cut`; what was cut in ``tree.attrs["cut"]``, None when nothing was).

The tree is a flat node table, parents first: :data:`COLUMNS`. Host nodes: ``total_ns`` = summed
host duration, ``self_ns`` = total minus host children (>= 0). GPU nodes: ``total_ns`` = ``self_ns``
= GPU time, not subtracted from the parent (another clock). ``gpu_ns``: GPU time launched in the
subtree; ``bytes``: copy and memset bytes (null for host nodes). :func:`library_shares` reads it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..naming import STAGE_PREFIX, stage_from_range_name
from ..trace import GPU_WORK_KINDS, HOST_KINDS, Trace
from ..units import ns_to_ms
from .trace_report import nest, nesting_order
from .steps import STEP_NAME

# python frames of the workbench's own instrumentation and of the profiler, cut even inside a stage
INSTRUMENTATION = (
    "workbench/memory.py",
    "workbench/timing.py",
    "workbench/guard.py",
    "workbench/runner.py",
    "workbench/sampling.py",
    "torch/autograd/profiler.py",
    "torch/profiler/",
)
NO_LAUNCH = "(no launch call)"
OTHER = "(other)"
COLUMNS = "id parent name kind self_ns total_ns gpu_ns count bytes depth".split()


def _labels(rows: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Per row a label id, and the (name, kind) of each label."""
    name_codes = rows["name"].cat.codes.to_numpy().astype(np.int64)
    kind_codes = rows["kind"].cat.codes.to_numpy().astype(np.int64)
    n_kinds = len(rows["kind"].cat.categories) + 1
    codes, uniques = pd.factorize(name_codes * n_kinds + kind_codes)
    names, kinds = rows["name"].cat.categories, rows["kind"].cat.categories
    ids: dict[tuple[str, str], int] = {}
    remap = np.empty(len(uniques), np.int64)
    for k, key in enumerate(uniques.tolist()):
        name, kind = str(names[key // n_kinds]), str(kinds[key % n_kinds])
        stage = stage_from_range_name(name)
        if stage is not None:
            name, kind = stage, "stage"
        elif STEP_NAME.match(name):
            name = "ProfilerStep"
        remap[k] = ids.setdefault((name, kind), len(ids))
    return remap[codes], list(ids)


def _assign_nodes(
    parent: np.ndarray, label: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Node id per event (same label path, same node; ``parent < id``), nodes' parents and labels."""
    path, up = label.astype(np.int64), parent.copy()
    while (up >= 0).any():
        has = up >= 0
        above = np.where(has, path[np.maximum(up, 0)], -1)
        path = pd.factorize(path * (path.size + 1) + above + 1)[0].astype(np.int64)
        up = np.where(has, up[np.maximum(up, 0)], -1)
    node_of, uniques = pd.factorize(path)
    node_of = node_of.astype(np.int64)
    first = np.empty(uniques.size, np.int64)
    first[node_of[::-1]] = np.arange(node_of.size - 1, -1, -1)
    parent_event = parent[first]
    node_parent = np.where(parent_event >= 0, node_of[np.maximum(parent_event, 0)], -1)
    return node_of, node_parent, label[first].astype(np.int64)


def harness_cut(events: pd.DataFrame) -> tuple[pd.DataFrame, dict | None]:
    """The events inside stage ranges (host events on the stage's thread, the GPU work they
    launched) without instrumentation frames, and what was cut (None: no stage range or nothing
    cut): ``{host_events, gpu_events, outside_ns, traced_ns, frames, note}``."""
    cats = events["name"].cat.categories.astype(str)
    codes = events["name"].cat.codes.to_numpy()
    host = events["kind"].isin(HOST_KINDS).to_numpy()
    stage = host & np.asarray(cats.str.startswith(STAGE_PREFIX))[codes]
    if not stage.any():
        return events, None
    own_cat = np.array([any(m in c for m in INSTRUMENTATION) for c in cats], dtype=bool)
    own = host & (events["kind"] == "python").to_numpy() & own_cat[codes]
    thread = _threads(events)
    ts = events["ts_ns"].to_numpy()
    end = ts + events["dur_ns"].to_numpy()
    inside = np.zeros(len(events), dtype=bool)
    for t in np.unique(thread[stage]):
        on = host & (thread == t)
        mine = stage & (thread == t)
        order = np.argsort(ts[mine], kind="stable")
        starts, ends = ts[mine][order], end[mine][order]
        k = np.searchsorted(starts, ts[on], side="right") - 1
        inside[on] = (k >= 0) & (end[on] <= ends[np.maximum(k, 0)])
    keep_host = inside & ~own
    gpu = events["kind"].isin(GPU_WORK_KINDS).to_numpy()
    keep_gpu = gpu & _launched_by(events, keep_host, host & ~keep_host, gpu)
    cut_host, cut_gpu = host & ~keep_host, gpu & ~keep_gpu
    if not cut_host.any() and not cut_gpu.any():
        return events, None
    step_cat = np.array([bool(STEP_NAME.match(c)) for c in cats], dtype=bool)
    summary = _cut_summary(
        events, stage, host & step_cat[codes], cut_host, cut_gpu, np.asarray(cats)[codes]
    )
    return events[keep_host | keep_gpu | (~host & ~gpu)], summary


def _threads(events: pd.DataFrame) -> np.ndarray:
    """One int64 code per (pid, tid) for each row."""
    pid = events["pid"].cat.codes.to_numpy().astype(np.int64)
    return pid * (len(events["tid"].cat.categories) + 1) + events["tid"].cat.codes.to_numpy()


def _launched_by(
    events: pd.DataFrame, kept: np.ndarray, dropped: np.ndarray, gpu: np.ndarray
) -> np.ndarray:
    """Per event: False for GPU work whose launch call was dropped (work without a found call is kept)."""
    corr = pd.Series(pd.array(events["correlation"].array, dtype="Int64"))
    dropped_corr = set(corr[dropped].dropna().tolist()) - set(corr[kept].dropna().tolist())
    if not dropped_corr:
        return np.ones(len(events), dtype=bool)
    return ~(gpu & corr.isin(dropped_corr).to_numpy())


def _cut_summary(
    events: pd.DataFrame,
    stage: np.ndarray,
    steps: np.ndarray,
    cut_host: np.ndarray,
    cut_gpu: np.ndarray,
    names: np.ndarray,
) -> dict:
    """What :func:`harness_cut` cut; outside time is of the summed profiler steps, else the span."""
    dur = events["dur_ns"].to_numpy()
    span = int((events["ts_ns"] + events["dur_ns"]).max() - events["ts_ns"].min())
    traced = int(dur[steps].sum()) if steps.any() else span
    outside = max(traced - int(dur[stage].sum()), 0)
    short = [_short(n) for n in names[cut_host]]
    widest = pd.Series(dur[cut_host], index=short).groupby(level=0).sum()
    widest = widest.sort_values(ascending=False, kind="stable")
    frames = list(widest.index[:4])
    note = (
        f"starts at the stages: {int(cut_host.sum())} harness and instrumentation events cut "
        f"({', '.join(frames)}{', ...' if len(widest) > 4 else ''}); {ns_to_ms(outside):.3g} ms of the "
        f"{ns_to_ms(traced):.3g} ms traced is outside the stages"
    )
    if cut_gpu.any():
        note += f"; {int(cut_gpu.sum())} GPU events they launched cut"
    return {
        "host_events": int(cut_host.sum()),
        "gpu_events": int(cut_gpu.sum()),
        "outside_ns": outside,
        "traced_ns": traced,
        "frames": frames,
        "note": note,
    }


def _short(name: str) -> str:
    """``a/runner.py(393): f`` -> ``runner.py f``; ``ProfilerStep#3`` -> ``ProfilerStep``"""
    if STEP_NAME.match(name):
        return "ProfilerStep"
    head, _, func = name.partition("): ")
    return f"{head.rsplit('/', 1)[-1].split('(')[0]} {func}" if func else name[:40]


def flame_tree(events: Trace | pd.DataFrame, *, from_stages: bool = True) -> pd.DataFrame:
    """The flame tree of an events table (module docstring); ``from_stages``: apply
    :func:`harness_cut` (False keeps the whole process as profiled)."""
    events = Trace.of(events).events
    cut = None
    if from_stages:
        events, cut = harness_cut(events)
    is_host = events["kind"].isin(HOST_KINDS).to_numpy()
    is_gpu = events["kind"].isin(GPU_WORK_KINDS).to_numpy()
    all_labels, labels = _labels(events[is_host | is_gpu])
    labels = labels + [(NO_LAUNCH, "other")]
    host_first = is_host[is_host | is_gpu]
    host, gpu = events[is_host], events[is_gpu]
    thread = _threads(host)
    ts, dur = host["ts_ns"].to_numpy(), host["dur_ns"].to_numpy()
    order = nesting_order(thread, ts, dur)
    ts, dur, thread = ts[order], dur[order], thread[order]
    host_label, gpu_label = all_labels[host_first][order], all_labels[~host_first]
    parent, _ = nest(thread, ts, ts + dur)
    nodes = _assign_nodes(parent, host_label)
    # position (in sorted host order) of each GPU event's runtime call, -1 when missing
    runtime = host["kind"].to_numpy()[order] == "runtime"
    corr = host["correlation"].array[order]
    keep = runtime & ~np.asarray(corr.isna())
    lookup = pd.Series(np.flatnonzero(keep), index=pd.Index(corr[keep], dtype="Int64"))
    lookup = lookup[~lookup.index.duplicated()]
    found = lookup.reindex(pd.Index(gpu["correlation"].array, dtype="Int64"))
    launch_pos = found.fillna(-1).to_numpy(np.int64)
    tree = _table(labels, nodes, parent, dur, gpu, gpu_label, launch_pos)
    tree.attrs["cut"] = cut
    return tree


def _table(labels, nodes, parent, dur, gpu, gpu_label, launch_pos) -> pd.DataFrame:
    node_of, node_parent, node_label = nodes
    n_host_nodes, n_labels = node_parent.size, len(labels)
    count = np.bincount(node_of, minlength=n_host_nodes).astype(np.int64)
    total = _group_sums(dur, node_of, n_host_nodes)
    child = _group_sums(dur[parent >= 0], node_of[parent[parent >= 0]], n_host_nodes)
    self_ns = np.maximum(total - child, 0)
    # GPU nodes: under the launch call's node, or under a (no launch call) root
    no_launch = launch_pos < 0
    root_id = n_host_nodes if no_launch.any() else -1
    g_parent = np.where(
        no_launch, root_id, node_of[np.maximum(launch_pos, 0)] if node_of.size else root_id
    )
    codes, uniques = pd.factorize((g_parent + 1) * n_labels + gpu_label)
    first_gpu = n_host_nodes + (1 if root_id >= 0 else 0)
    g_dur = gpu["dur_ns"].to_numpy()
    g_total = _group_sums(g_dur, codes, uniques.size)
    g_bytes = gpu["bytes"].groupby(codes).sum(min_count=1).reindex(range(uniques.size))

    def stack(host_nodes, root, gpu_nodes) -> np.ndarray:
        """A column: host nodes, the (no launch call) root when there is one, GPU nodes."""
        middle = [root] if root_id >= 0 else []
        return np.concatenate([host_nodes, middle, gpu_nodes]).astype(np.int64)

    parents = stack(node_parent, -1, uniques // n_labels - 1)
    label_ids = stack(node_label, n_labels - 1, uniques % n_labels)
    totals = stack(total, g_dur[no_launch].sum(), g_total)
    selfs = stack(self_ns, 0, g_total)
    counts = stack(count, int(no_launch.sum()), np.bincount(codes, minlength=uniques.size))
    gpu_sub = np.concatenate([np.zeros(first_gpu, np.int64), g_total])
    nbytes = pd.array([pd.NA] * first_gpu + g_bytes.tolist(), dtype="Int64")
    return _finish(parents, label_ids, labels, selfs, totals, gpu_sub, counts, nbytes)


def _group_sums(values: np.ndarray, groups: np.ndarray, n: int) -> np.ndarray:
    """Sum of ``values`` per group 0..n-1 (0 where a group has none), exact in int64."""
    return pd.Series(values).groupby(groups).sum().reindex(range(n), fill_value=0).to_numpy()


def _finish(parents, label_ids, labels, selfs, totals, gpu_sub, counts, nbytes) -> pd.DataFrame:
    depth, gpu_sub = _depths_and_subtree_sums(parents, gpu_sub)
    names = np.array([n for n, _ in labels], dtype=object)[label_ids]
    kinds = np.array([k for _, k in labels], dtype=object)[label_ids]
    return pd.DataFrame(
        {
            "id": np.arange(parents.size),
            "parent": parents,
            "name": pd.Series(names, dtype=str),
            "kind": pd.Series(kinds, dtype=str),
            "self_ns": selfs,
            "total_ns": totals,
            "gpu_ns": gpu_sub,
            "count": counts,
            "bytes": nbytes,
            "depth": depth,
        },
        columns=COLUMNS,
    )


def _depths_and_subtree_sums(
    parents: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Depth of each node and the sum of ``values`` over its subtree (parents come first)."""
    up = parents.tolist()
    depth = [0] * len(up)
    for i, p in enumerate(up):
        if p >= 0:
            depth[i] = depth[p] + 1
    if not values.any():
        return np.array(depth, dtype=np.int64), values.copy()
    sums = values.tolist()
    for i in range(len(up) - 1, -1, -1):  # children after parents: walk back, adding upward
        if up[i] >= 0 and sums[i]:
            sums[up[i]] += sums[i]
    return np.array(depth, dtype=np.int64), np.array(sums, dtype=np.int64)


def prune(tree: pd.DataFrame, min_share: float = 0.01) -> pd.DataFrame:
    """Fold nodes under ``min_share`` of the roots' total and of the roots' GPU total into one
    ``(other)`` node per parent (sums of count, total, bytes, gpu_ns; self = total), descendants
    with them; ids renumbered. Composes: ``prune(prune(t, 0.001), 0.01)``. The GPU share keeps a
    CUDA run's kernels, which by host time alone fall under any share of a request."""
    if tree.empty:
        return tree.copy()
    tree = tree.reset_index(drop=True)
    ppos, path_min, roots_total = _path_minima(tree)
    gone, folded = _gone_and_folded(ppos, path_min, min_share * roots_total)
    kept = tree[~gone]
    new_id = pd.Series(np.arange(len(kept)), index=kept["id"].to_numpy())
    out = kept.assign(id=np.arange(len(kept)), parent=_remap(kept["parent"], new_id))
    grouped = tree[folded].groupby("parent", sort=True)  # one (other) node per parent
    others = grouped.agg(
        total_ns=("total_ns", "sum"),
        gpu_ns=("gpu_ns", "sum"),
        count=("count", "sum"),
        depth=("depth", "first"),
    ).reset_index()
    others["bytes"] = grouped["bytes"].sum(min_count=1).astype("Int64").to_numpy()
    others["parent"] = _remap(others["parent"], new_id)
    n = len(kept)
    others = others.assign(
        id=np.arange(n, n + len(others)), name=OTHER, kind="other", self_ns=others["total_ns"]
    ).astype({"name": str, "kind": str})
    return pd.concat([out, others], ignore_index=True)[COLUMNS]


def pruned_sizes(tree: pd.DataFrame, shares) -> list[int]:
    """``len(prune(tree, share))`` for each share, without building the pruned tables."""
    if tree.empty:
        return [0 for _ in shares]
    tree = tree.reset_index(drop=True)
    ppos, path_min, roots_total = _path_minima(tree)
    parents = tree["parent"].to_numpy()
    sizes = []
    for share in shares:
        gone, folded = _gone_and_folded(ppos, path_min, share * roots_total)
        sizes.append(int((~gone).sum()) + int(np.unique(parents[folded]).size))
    return sizes


def _path_minima(tree: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """Parent positions, each node's smallest weight on its root path, and the roots' total."""
    totals = tree["total_ns"].to_numpy(np.int64)
    ppos = _parent_positions(tree)
    roots = tree["parent"].to_numpy() < 0
    roots_total = int(totals[roots].sum())
    weight = totals.astype(np.float64)
    if "gpu_ns" in tree.columns:
        gpu = tree["gpu_ns"].fillna(0).to_numpy(np.float64)
        gpu_total = float(gpu[roots].sum())
        if gpu_total > 0:
            weight = np.maximum(weight, gpu * (roots_total / gpu_total))
    # the minimum over each node and its ancestors, by log2(depth) pointer doublings
    low, up = weight, ppos.copy()
    for _ in range(max(int(np.log2(max(len(up), 1))) + 2, 1)):
        has = np.flatnonzero(up >= 0)
        if has.size == 0:
            return ppos, low, roots_total
        low[has] = np.minimum(low[has], low[up[has]])
        up[has] = up[up[has]]
    raise ConfigError("flame tree: parent links form a cycle")


def _gone_and_folded(
    ppos: np.ndarray, path_min: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per node: gone (it or an ancestor weighs under ``threshold``), folded (gone, parent kept)."""
    gone = path_min < threshold
    parent_gone = np.where(ppos >= 0, gone[np.maximum(ppos, 0)], False)
    return gone, gone & ~parent_gone


def _parent_positions(tree: pd.DataFrame) -> np.ndarray:
    """Row position of each node's parent (-1 for roots and unknown parents)."""
    parent = tree["parent"].to_numpy(np.int64)
    position = pd.Series(np.arange(len(tree)), index=tree["id"].to_numpy())
    return np.where(parent >= 0, position.reindex(parent).fillna(-1).to_numpy(np.int64), -1)


def _remap(parents: pd.Series, new_id: pd.Series) -> np.ndarray:
    return parents.map(new_id).fillna(-1).to_numpy(np.int64)


GPU_WORK_COLUMNS = ["stage", "name", "kind", "gpu_ns", "count", "bytes"]


def gpu_work_by_stage(tree: pd.DataFrame) -> pd.DataFrame:
    """The kernels, copies and memsets of a flame tree summed per root (stage) and name:
    :data:`GPU_WORK_COLUMNS` (``bytes`` null for kernels), stages in tree order, longest first."""
    gpu = tree["kind"].isin(GPU_WORK_KINDS).to_numpy() if len(tree) else np.zeros(0, bool)
    if not gpu.any():
        return pd.DataFrame(columns=GPU_WORK_COLUMNS)
    tree = tree.reset_index(drop=True)
    ppos = _parent_positions(tree)
    root = np.where(ppos >= 0, ppos, np.arange(len(tree)))
    while not np.array_equal(root[root], root):
        root = root[root]
    rows = tree[gpu].assign(stage=tree["name"].to_numpy()[root[gpu]], order=root[gpu])
    out = (
        rows.groupby(["order", "stage", "name", "kind"], sort=False, observed=True)
        .agg(
            gpu_ns=("total_ns", "sum"),
            count=("count", "sum"),
            bytes=("bytes", lambda b: b.sum(min_count=1)),
        )
        .reset_index()
    )
    out = out.sort_values(["order", "gpu_ns"], ascending=[True, False], kind="stable")
    out = out[GPU_WORK_COLUMNS].reset_index(drop=True)
    return out.astype({"gpu_ns": "int64", "count": "int64", "bytes": "Int64"})


# library -> substrings of a frame name (``PIL/Image.py(123): resize``, ``<built-in method execute of
# sqlite3.Cursor object ...>``); matched case-sensitively, first match in this order (orjson before json).
LIBRARIES = {
    "PIL": ("PIL/",),
    "cv2": ("cv2",),
    "sqlite3": ("sqlite3",),
    "redis": ("redis/",),
    "socket": (
        "socket.py",
        "ssl.py",
        "http/client.py",
        "urllib3/",
        "httpx/",
        "requests/",
        "aiohttp/",
    ),
    "tokenizers": ("tokenizers",),
    "orjson": ("orjson",),
    "msgspec": ("msgspec",),
    "json": ("json/",),
    "torchvision": ("torchvision/",),
    "torch": ("torch/",),
}
OPERATOR_KIND = "cpu_op"  # a torch operator node of the flame tree


def library_of(name: str) -> str | None:
    """The library a frame name belongs to, or None."""
    for lib, needles in LIBRARIES.items():
        if any(n in name for n in needles):
            return lib
    return None


def library_shares(tree: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Stage -> {library: share of the stage's time in its outermost frames} (a PIL call calling
    more PIL counts once; a torch operator outside every library frame counts as ``torch``), from a
    flame tree; stages without a known library's frames are left out. The audit reads it as
    evidence of a stage's role (:mod:`workbench.roles`)."""
    ids = tree["id"].to_numpy()
    parent = tree["parent"].to_numpy()
    kinds = tree["kind"].astype(str).to_numpy()
    names = tree["name"].astype(str).to_numpy()
    total = tree["total_ns"].to_numpy(np.int64)
    pos = {int(i): k for k, i in enumerate(ids)}
    stage_of = np.full(len(ids), -1)
    inside = np.zeros(len(ids), dtype=bool)  # already inside some library's frame
    sums: dict[tuple[str, str], int] = {}
    stage_total: dict[str, int] = {}
    for k in range(len(ids)):
        p = pos.get(int(parent[k]), -1)
        if kinds[k] == "stage":
            stage_of[k], inside[k] = k, False
            stage_total[names[k]] = stage_total.get(names[k], 0) + int(total[k])
            continue
        stage_of[k] = stage_of[p] if p >= 0 else -1
        inside[k] = inside[p] if p >= 0 else False
        if stage_of[k] < 0 or inside[k] or kinds[k] not in ("python", OPERATOR_KIND):
            continue
        lib = "torch" if kinds[k] == OPERATOR_KIND else library_of(names[k])
        if lib is not None:
            key = (names[stage_of[k]], lib)
            sums[key] = sums.get(key, 0) + int(total[k])
            inside[k] = True
    out: dict[str, dict[str, float]] = {}
    for (stage, lib), ns in sums.items():
        if stage_total.get(stage):
            out.setdefault(stage, {})[lib] = ns / stage_total[stage]
    return out
