"""A static dashboard of recorded runs: one HTML file, no kernel, no server, offline.

Every figure is computed here, ahead of time, from the recorded runs (the batching curves simulated
from those of one pipeline, device and precision at several batch sizes); the page's controls only
pick which precomputed figures to draw. plotly.js is embedded once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs

from workbench.analysis.flame import flame_tree
from workbench.batching import service_model_from_runs, sweep
from workbench.errors import WorkbenchError
from workbench.plots import distribution_figure, flame_figure
from workbench.plots.batching import batching_curves_figure
from workbench.plots.budget import run_budget_figure
from workbench.plots.style import empty_figure
from workbench.record import load_run
from workbench.record.folder import write_text_atomically
from workbench.trace import load_trace
from workbench.units import ns_to_s

RATE_FRACTIONS = (0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.97)
FLAME_MAX_NODES = 300


@dataclass(frozen=True)
class Entry:
    """One recorded run offered by the page."""

    key: str
    pipeline: str
    device: str
    batch_size: int
    precision: str
    variant: str
    path: Path
    run: Any = field(default=None, compare=False, repr=False)  # loaded once, read by every figure
    recorded_on: str = "?"  # the card (GPU runs) or CPU model the run's own record names
    torch: str = "?"  # the torch version of its record
    date: str = "?"  # the date of its record (YYYY-MM-DD)


def recorded_entries(runs_dir: str | os.PathLike) -> tuple[list[Entry], list[str]]:
    """The loadable profile runs under ``runs_dir`` and one note per folder skipped (never a crash)."""
    entries, notes = [], []
    for folder in sorted(p for p in Path(runs_dir).iterdir() if p.is_dir()):
        try:
            run = load_run(folder)
        except WorkbenchError as exc:
            notes.append(f"skipped {folder.name}: {exc}")
            continue
        if run.kind != "profile":
            continue
        cfg = run.config
        if cfg.batch_size is None:
            notes.append(f"skipped {folder.name}: run.json has no config.batch_size")
            continue
        device = (cfg.device or "cpu").split(":")[0]
        sync = run.meta.sync_policy  # request: timed the wrong way on purpose, its own variant
        named = [f"{k}={v}" for k, v in sorted(cfg.options.items())]
        variant = ", ".join(named + ([f"sync={sync}"] if sync != "stage" else [])) or "default"
        key = f"{run.meta.pipeline}|{device}|{cfg.batch_size}|{cfg.precision}|{variant}"
        if any(e.key == key for e in entries):
            notes.append(
                f"skipped {folder.name}: same configuration and options as an earlier folder"
            )
            continue
        env = run.meta.env
        own = env.device_name if device != "cpu" else env.cpu_model
        where = own or env.device_name or env.cpu_model or "?"
        entries.append(
            Entry(
                key,
                str(run.meta.pipeline),
                device,
                cfg.batch_size,
                str(cfg.precision),
                variant,
                folder,
                run,
                where,
                env.torch or "?",
                str(run.meta.created or "?")[:10],
            )
        )
    return entries, notes


def run_figures(entry: Entry) -> dict[str, Any]:
    """The budget, distribution and flame figures of one run, as plotly JSON dicts."""
    run = entry.run
    figs = {
        "budget": run_budget_figure(run),
        "distribution": distribution_figure(run.requests, run.stages, run.stage_names),
    }
    if run.trace_path is not None:
        figs["flame"] = flame_figure(
            flame_tree(load_trace(run.trace_path).events),
            max_nodes=FLAME_MAX_NODES,
            title="Flame graph of the traced requests",
        )
    else:
        figs["flame"] = empty_figure("this run has no trace")
    return {k: _plain(f) for k, f in figs.items()}


def batching_figures(entries: list[Entry], requests: int = 4_000, seed: int = 0) -> dict[str, Any]:
    """Group key (pipeline|device|precision|variant) -> batching curves simulated from its runs' service times."""
    groups: dict[str, list[Entry]] = {}
    for e in entries:
        groups.setdefault(f"{e.pipeline}|{e.device}|{e.precision}|{e.variant}", []).append(e)
    out = {}
    for key, members in groups.items():
        if len({m.batch_size for m in members}) < 2:
            continue
        try:
            model = service_model_from_runs([m.run for m in members])
        except WorkbenchError:
            continue
        sizes = model.sizes
        capacity = max(s / ns_to_s(model.mean_ns(s)) for s in sizes)
        rates = [f * capacity for f in RATE_FRACTIONS]
        curve = sweep(model, rates, sizes, [2.0], requests=requests, seed=seed)
        title = f"Simulated from the recorded runs at batch sizes {sizes}"
        out[key] = _plain(batching_curves_figure(curve, title=title))
    return out


def _plain(fig) -> dict:
    return json.loads(fig.to_json())


def build_page(
    entries: list[Entry], figures: dict[str, dict], batching: dict[str, Any], notes: list[str]
) -> str:
    """The HTML page (plotly.js inline, figures as JSON, a small controller script)."""
    shown = [f.name for f in fields(Entry) if f.name not in ("path", "run")]
    data = {
        "entries": [{k: getattr(e, k) for k in shown} | {"folder": e.path.name} for e in entries],
        "figures": figures,
        "batching": batching,
        "notes": notes,
    }
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return PAGE.replace("%PLOTLYJS%", get_plotlyjs()).replace("%DATA%", payload)


def export_dashboard(
    out_dir: str | os.PathLike, runs_dir: str | os.PathLike, progress=None
) -> Path:
    """Write ``out_dir/index.html`` atomically and return its path."""
    entries, notes = recorded_entries(runs_dir)
    figures = {}
    for i, e in enumerate(entries):
        figures[e.key] = run_figures(e)
        if progress:
            progress(i + 1, len(entries), e.path.name)
    page = build_page(entries, figures, batching_figures(entries), notes)
    path = Path(out_dir) / "index.html"
    write_text_atomically(path, page)  # a full disk leaves no .index.html.* behind
    return path


PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Inference Latency Workbench: recorded runs</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1em 2em;color:#222}
.controls{display:flex;gap:1.5em;flex-wrap:wrap;align-items:end;background:#f4f6fa;padding:.7em 1em;border-radius:6px}
label{display:flex;flex-direction:column;font-size:.9em} select{font-size:1em;padding:.2em}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:1em} .fig{min-height:420px;border:1px solid #eee}
#status{margin:.6em 0;font-size:1.05em} .note{color:#666;font-size:.85em}
@media (max-width:1000px){.grid{grid-template-columns:1fr}}
</style>
<script type="text/javascript">%PLOTLYJS%</script></head>
<body>
<h1>Inference Latency Workbench: recorded runs</h1>
<p>Every figure was computed from runs recorded on real machines (GPU runs included), so it works on a laptop
without a GPU, offline, with no server. Pick a configuration; combinations that were not recorded say so.</p>
<div class="controls">
<label>example<select id="pipeline"></select></label>
<label>device<select id="device"></select></label>
<label>batch size<select id="batch_size"></select></label>
<label>precision<select id="precision"></select></label>
<label>options<select id="variant"></select></label>
</div>
<div id="status"></div>
<div class="grid">
<div id="budget" class="fig"></div><div id="distribution" class="fig"></div>
<div id="flame" class="fig"></div><div id="batching" class="fig"></div>
</div>
<div id="notes" class="note"></div>
<script type="application/json" id="wb-data">%DATA%</script>
<script>
(function(){
const D = JSON.parse(document.getElementById('wb-data').textContent);
const fields = ['pipeline','device','batch_size','precision','variant'];
const sel = Object.fromEntries(fields.map(f => [f, document.getElementById(f)]));
const uniq = (xs) => [...new Set(xs)].sort((a,b) => (typeof a === 'number' ? a-b : String(a).localeCompare(String(b))));
function fill(field, values, keep){
  const s = sel[field]; const old = keep ?? s.value; s.innerHTML = '';
  for (const v of values){ const o = document.createElement('option'); o.value = v; o.textContent = v; s.appendChild(o); }
  if (values.map(String).includes(String(old))) s.value = old;
}
function matching(upto){
  return D.entries.filter(e => fields.slice(0, upto).every(f => String(e[f]) === sel[f].value));
}
function refreshChoices(){
  fill('pipeline', uniq(D.entries.map(e => e.pipeline)));
  for (let i = 1; i < fields.length; i++) fill(fields[i], uniq(matching(i).map(e => e[fields[i]])));
}
function message(div, text){
  Plotly.purge(div);
  div.innerHTML = '<p style="padding:2em;color:#666">' + text + '</p>';
}
function show(div, fig){
  // react, not purge + newPlot: a control change redraws in place (the page held 3.6-5.2 s per change, busy)
  if (!div.data) div.innerHTML = '';  // a message was shown (purged): clear it before the first plot
  Plotly.react(div, fig.data, fig.layout, {displaylogo:false, responsive:true});
}
function draw(){
  const e = matching(fields.length)[0];
  const status = document.getElementById('status');
  if (!e){ status.textContent = 'not recorded: no run with this combination'; 
           for (const k of ['budget','distribution','flame','batching']) message(document.getElementById(k), 'not recorded'); return; }
  status.textContent = 'recorded run ' + e.folder + ' (' + e.pipeline + ', ' + e.device + ', batch ' + e.batch_size + ', ' + e.precision + ', ' + e.variant + '), recorded on ' + e.recorded_on + ', torch ' + e.torch + ', ' + e.date;
  const figs = D.figures[e.key];
  for (const k of ['budget','distribution','flame']){
    show(document.getElementById(k), figs[k]);
  }
  const b = D.batching[[e.pipeline, e.device, e.precision, e.variant].join('|')];
  const div = document.getElementById('batching');
  if (b) show(div, b);
  else message(div, 'batching curves need recorded runs at two or more batch sizes of this pipeline, device, precision and options');
  document.body.dataset.drawn = e.key;
}
for (const f of fields) sel[f].addEventListener('change', () => { refreshChoices(); draw(); });
refreshChoices(); draw();
document.getElementById('notes').textContent = D.notes.join(' | ');
})();
</script>
</body></html>
"""
