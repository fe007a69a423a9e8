"""The offline audit: baseline -> bottleneck -> evidence -> actions, from saved runs.

``rules`` turns a run's budget, tail attribution and trace report into
findings (pure functions over dicts, no torch or plotly); ``catalog`` maps each
finding kind to concrete actions; ``report`` writes the self-contained HTML
file (plotly embedded once) or the JSON of ``python -m workbench audit``.
"""
