"""Run records: what one run measured, as plain data that saves and loads (docs/json.md)."""

from __future__ import annotations

from .folder import META_FILE, read_meta
from .meta import IngestedMeta, LoadMeta, ProfileMeta, RunMeta, ServedMeta, SimulationMeta
from .run import (
    SCRATCH_PREFIX,
    Run,
    SummaryFailure,
    load_run,
    save_meta,
    save_run,
    scratch_folder,
    summarized,
)
from .sections import (
    Config,
    Env,
    Ingest,
    Load,
    Noise,
    Serving,
    Simulation,
    Timing,
)
from .tables import (
    REQUEST_COLUMNS,
    STAGE_COLUMNS,
    build_tables,
    request_row,
    stage_rows,
    typed_table,
)
