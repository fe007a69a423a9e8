"""Run records: what one run measured, as plain data that saves and loads.

A run is a folder::

    run.json          meta (:class:`RunMeta`): kind, pipeline, stages, config, environment, timing, ...
    requests.parquet  one row per request (warm-up rows flagged)
    stages.parquet    one row per request and stage that ran
    <worker>.<time_ns>.pt.trace.json.gz   the traced run, when there is one

The table columns are described in :mod:`workbench.record.tables`, the meta
fields in :mod:`workbench.record.meta`, and the writer and reader in
:mod:`workbench.record.folder`. Profile, load and simulation runs share this
one format (``kind`` tells them apart); ``docs/json.md`` lists it.
"""
from __future__ import annotations

from .folder import META_FILE, REQUESTS_FILE, STAGES_FILE, exchange, load_run, read_meta, recover, save_run
from .meta import FORMAT, KINDS, VERSION, RunMeta
from .run import SCRATCH_PREFIX, Run, is_scratch, scratch_folder
from .tables import REQUEST_COLUMNS, STAGE_COLUMNS, build_tables, request_row, stage_rows, typed_table

__all__ = [
    "FORMAT", "KINDS", "META_FILE", "REQUESTS_FILE", "REQUEST_COLUMNS", "Run", "RunMeta", "SCRATCH_PREFIX",
    "STAGES_FILE", "STAGE_COLUMNS", "VERSION", "build_tables", "exchange", "is_scratch", "load_run", "read_meta",
    "recover", "request_row", "save_run", "scratch_folder", "stage_rows", "typed_table",
]
