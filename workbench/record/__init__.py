"""Run records: what one run measured, as plain data that saves and loads (``docs/json.md``).

A run is a folder: ``run.json`` (:class:`RunMeta`, :mod:`~workbench.record.meta`), the
``requests.parquet`` and ``stages.parquet`` tables (:mod:`~workbench.record.tables`) and the traced
run's trace file when there is one; every kind of run alike (``kind`` tells them apart).
"""

from __future__ import annotations

from .folder import META_FILE, REQUESTS_FILE, STAGES_FILE, exchange, read_meta, recover
from .meta import (
    FORMAT,
    KINDS,
    VERSION,
    IngestedMeta,
    LoadMeta,
    MetaError,
    ProfileMeta,
    RunMeta,
    ServedMeta,
    SimulationMeta,
    decode_meta,
)
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
    Attributes,
    ColdStart,
    Config,
    Env,
    Fingerprint,
    Ingest,
    Load,
    Memory,
    Noise,
    Quantization,
    Serving,
    Simulation,
    Timing,
    TraceInfo,
)
from .tables import (
    REQUEST_COLUMNS,
    STAGE_COLUMNS,
    build_tables,
    request_row,
    stage_rows,
    typed_table,
)
