"""Flame tree of a trace: nested host events with GPU work under its launch call.

Host events (operators, record_function ranges, runtime calls, python functions)
nest by time on their thread: stage -> operator -> child operators -> runtime
calls. Each kernel, copy or memset hangs under the runtime call with its
correlation (work whose call is missing hangs under a root ``(no launch call)``).
Identical paths merge across requests and steps (``ProfilerStep#N`` is merged as
``ProfilerStep``; stage ranges show the stage name with kind ``stage``), so
counts aggregate.

The tree is a flat node table, parents before children (``parent < id``):
id, parent (-1 for roots), name, kind, self_ns, total_ns, gpu_ns, count, bytes,
depth. Host nodes: ``total_ns`` = summed host duration, ``self_ns`` = total minus
host children (clipped at 0). GPU nodes: ``total_ns`` = ``self_ns`` = GPU time;
they are not subtracted from their parent's self time (another clock).
``gpu_ns`` = GPU time launched within the node's subtree. ``bytes`` = copy
and memset bytes (null for host nodes). Nesting is a stack walk over events
sorted by (thread, start, longest first): linear after sorting.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..naming import stage_from_range_name
from ..trace import GPU_WORK_KINDS, HOST_KINDS

NO_LAUNCH = "(no launch call)"
OTHER = "(other)"
_STEP = re.compile(r"^ProfilerStep#\d+$")
COLUMNS = ["id", "parent", "name", "kind", "self_ns", "total_ns", "gpu_ns", "count", "bytes", "depth"]


def _labels(rows: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Per row a label id, and the (name, kind) of each label (from the categorical codes)."""
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
        elif _STEP.match(name):
            name = "ProfilerStep"
        remap[k] = ids.setdefault((name, kind), len(ids))
    return remap[codes], list(ids)


def _parents(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Index of each (sorted) event's innermost enclosing event on its thread, -1 if none."""
    parent = np.full(ts.size, -1, np.int64)
    stack: list[int] = []
    ends = end.tolist()
    for i, (t, s, e) in enumerate(zip(thread.tolist(), ts.tolist(), ends)):
        if i and t != last_thread:
            stack.clear()
        last_thread = t
        while stack and ends[stack[-1]] <= s:
            stack.pop()
        for j in reversed(stack):
            if ends[j] >= e:
                parent[i] = j
                break
        stack.append(i)
    return parent


def _walk(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parent position and depth of each sorted host event."""
    parent = _parents(thread, ts, end)
    depth = np.zeros(ts.size, np.int64)
    has = np.flatnonzero(parent >= 0)
    for i in has.tolist():  # parents come first in sorted order
        depth[i] = depth[parent[i]] + 1
    return parent, depth


def _assign_nodes(parent: np.ndarray, depth: np.ndarray, label: np.ndarray, n_labels: int):
    """Node id per event (same path -> same node), levelwise; and each node's parent and label."""
    node_of = np.empty(label.size, np.int64)
    node_parent, node_label = [], []
    base = 0
    for d in range(int(depth.max()) + 1 if depth.size else 0):
        at = np.flatnonzero(depth == d)
        pnode = node_of[parent[at]] if d else np.full(at.size, -1, np.int64)
        codes, uniques = pd.factorize((pnode + 1) * n_labels + label[at])
        node_of[at] = base + codes
        node_parent.append(uniques // n_labels - 1)
        node_label.append(uniques % n_labels)
        base += uniques.size
    cat = (lambda parts: np.concatenate(parts) if parts else np.empty(0, np.int64))
    return node_of, cat(node_parent), cat(node_label)


def flame_tree(events: pd.DataFrame) -> pd.DataFrame:
    """The flame tree of an events table as a flat node table (see module docstring)."""
    is_host = events["kind"].isin(HOST_KINDS).to_numpy()
    is_gpu = events["kind"].isin(GPU_WORK_KINDS).to_numpy()
    all_labels, labels = _labels(events[is_host | is_gpu])
    labels = labels + [(NO_LAUNCH, "other")]
    host_first = is_host[is_host | is_gpu]
    host, gpu = events[is_host], events[is_gpu]
    thread = (host["pid"].cat.codes.to_numpy().astype(np.int64) * (len(host["tid"].cat.categories) + 1)
              + host["tid"].cat.codes.to_numpy())
    ts, dur = host["ts_ns"].to_numpy(), host["dur_ns"].to_numpy()
    order = np.lexsort((-dur, ts, thread))
    ts, dur, thread = ts[order], dur[order], thread[order]
    host_label, gpu_label = all_labels[host_first][order], all_labels[~host_first]
    parent, depth = _walk(thread, ts, ts + dur)
    node_of, node_parent, node_label = _assign_nodes(parent, depth, host_label, len(labels))
    launch_pos = _launch_positions(host.iloc[order], gpu)
    return _table(labels, node_of, node_parent, node_label, parent, dur, gpu, gpu_label, launch_pos)


def _launch_positions(host_sorted: pd.DataFrame, gpu: pd.DataFrame) -> np.ndarray:
    """Position (in sorted host order) of each GPU event's runtime call, -1 when missing."""
    runtime = host_sorted["kind"].to_numpy() == "runtime"
    corr = host_sorted["correlation"].array
    keep = runtime & ~np.asarray(corr.isna())
    lookup = pd.Series(np.flatnonzero(keep), index=pd.Index(corr[keep], dtype="Int64"))
    lookup = lookup[~lookup.index.duplicated()]
    found = lookup.reindex(pd.Index(gpu["correlation"].array, dtype="Int64"))
    return found.fillna(-1).to_numpy(np.int64)


def _table(labels, node_of, node_parent, node_label, parent, dur, gpu, gpu_label, launch_pos) -> pd.DataFrame:
    n_host_nodes, n_labels = node_parent.size, len(labels)
    count = np.bincount(node_of, minlength=n_host_nodes).astype(np.int64)
    total = pd.Series(dur).groupby(node_of).sum().reindex(range(n_host_nodes), fill_value=0).to_numpy()
    child = pd.Series(dur[parent >= 0]).groupby(node_of[parent[parent >= 0]]).sum()
    self_ns = np.maximum(total - child.reindex(range(n_host_nodes), fill_value=0).to_numpy(), 0)
    # GPU nodes: under the launch call's node, or under a (no launch call) root
    no_launch = launch_pos < 0
    root_id = n_host_nodes if no_launch.any() else -1
    g_parent = np.where(no_launch, root_id, node_of[np.maximum(launch_pos, 0)] if node_of.size else root_id)
    codes, uniques = pd.factorize((g_parent + 1) * n_labels + gpu_label)
    first_gpu = n_host_nodes + (1 if root_id >= 0 else 0)
    g_dur = gpu["dur_ns"].to_numpy()
    g_total = pd.Series(g_dur).groupby(codes).sum().reindex(range(uniques.size), fill_value=0).to_numpy()
    g_bytes = gpu["bytes"].groupby(codes).sum(min_count=1).reindex(range(uniques.size))
    parents = np.concatenate([node_parent, [-1] if root_id >= 0 else [], uniques // n_labels - 1]).astype(np.int64)
    label_ids = np.concatenate([node_label, [n_labels - 1] if root_id >= 0 else [], uniques % n_labels]).astype(np.int64)
    totals = np.concatenate([total, [g_dur[no_launch].sum()] if root_id >= 0 else [], g_total]).astype(np.int64)
    selfs = np.concatenate([self_ns, [0] if root_id >= 0 else [], g_total]).astype(np.int64)
    counts = np.concatenate([count, [int(no_launch.sum())] if root_id >= 0 else [],
                             np.bincount(codes, minlength=uniques.size)]).astype(np.int64)
    gpu_sub = np.concatenate([np.zeros(first_gpu, np.int64), g_total])
    nbytes = pd.array([pd.NA] * first_gpu + g_bytes.tolist(), dtype="Int64")
    return _finish(parents, label_ids, labels, selfs, totals, gpu_sub, counts, nbytes)


def _finish(parents, label_ids, labels, selfs, totals, gpu_sub, counts, nbytes) -> pd.DataFrame:
    depth = np.zeros(parents.size, np.int64)
    for i in range(parents.size):  # parents come first
        if parents[i] >= 0:
            depth[i] = depth[parents[i]] + 1
    for d in range(int(depth.max()) if depth.size else 0, 0, -1):
        at = np.flatnonzero(depth == d)
        np.add.at(gpu_sub, parents[at], gpu_sub[at])
    names = [labels[k][0] for k in label_ids]
    kinds = [labels[k][1] for k in label_ids]
    return pd.DataFrame({"id": np.arange(parents.size), "parent": parents, "name": pd.Series(names, dtype=str),
                         "kind": pd.Series(kinds, dtype=str), "self_ns": selfs, "total_ns": totals,
                         "gpu_ns": gpu_sub, "count": counts, "bytes": nbytes, "depth": depth}, columns=COLUMNS)


def prune(tree: pd.DataFrame, min_share: float = 0.01) -> pd.DataFrame:
    """Fold nodes whose ``total_ns`` is under ``min_share`` of the roots' total into one
    ``(other)`` node per parent (kind ``other``; sums of count, total, bytes,
    gpu_ns; self = total); their descendants go with them. Same columns, ids renumbered,
    parents still before children. Composes: ``prune(prune(t, 0.001), 0.01)``.
    """
    if tree.empty:
        return tree.copy()
    tree = tree.reset_index(drop=True)
    total = tree.loc[tree["parent"] < 0, "total_ns"].sum()
    small = tree["total_ns"].to_numpy() < min_share * total
    parent, depth = tree["parent"].to_numpy(), tree["depth"].to_numpy()
    position = pd.Series(np.arange(len(tree)), index=tree["id"].to_numpy())
    ppos = np.where(parent >= 0, position.reindex(parent).fillna(-1).to_numpy(np.int64), -1)
    gone, folded = np.zeros(len(tree), bool), np.zeros(len(tree), bool)
    for d in range(int(depth.max()) + 1):
        at = np.flatnonzero(depth == d)
        parent_gone = np.where(ppos[at] >= 0, gone[np.maximum(ppos[at], 0)], False)
        folded[at] = small[at] & ~parent_gone
        gone[at] = parent_gone | small[at]
    kept = tree[~gone]
    new_id = pd.Series(np.arange(len(kept)), index=kept["id"].to_numpy())
    out = kept.assign(id=np.arange(len(kept)), parent=_remap(kept["parent"], new_id))
    return pd.concat([out, _other_nodes(tree[folded], new_id, len(kept))], ignore_index=True)[COLUMNS]


def _remap(parents: pd.Series, new_id: pd.Series) -> np.ndarray:
    return parents.map(new_id).fillna(-1).to_numpy(np.int64)


def _other_nodes(folded: pd.DataFrame, new_id: pd.Series, start: int) -> pd.DataFrame:
    """One (other) node per parent of folded nodes."""
    grouped = folded.groupby("parent", sort=True)
    out = grouped.agg(total_ns=("total_ns", "sum"), gpu_ns=("gpu_ns", "sum"), count=("count", "sum"),
                      depth=("depth", "first")).reset_index()
    out["bytes"] = grouped["bytes"].sum(min_count=1).astype("Int64").to_numpy()
    out["parent"] = _remap(out["parent"], new_id)
    return out.assign(id=np.arange(start, start + len(out)), name=OTHER, kind="other",
                      self_ns=out["total_ns"]).astype({"name": str, "kind": str})
