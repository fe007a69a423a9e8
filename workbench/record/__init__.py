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
    is_scratch,
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

__all__ = [
    "Attributes",
    "ColdStart",
    "Config",
    "Env",
    "FORMAT",
    "Fingerprint",
    "Ingest",
    "IngestedMeta",
    "KINDS",
    "Load",
    "LoadMeta",
    "META_FILE",
    "Memory",
    "MetaError",
    "Noise",
    "ProfileMeta",
    "Quantization",
    "REQUESTS_FILE",
    "REQUEST_COLUMNS",
    "Run",
    "RunMeta",
    "SCRATCH_PREFIX",
    "ServedMeta",
    "STAGES_FILE",
    "STAGE_COLUMNS",
    "Serving",
    "Simulation",
    "SimulationMeta",
    "SummaryFailure",
    "Timing",
    "TraceInfo",
    "VERSION",
    "build_tables",
    "decode_meta",
    "exchange",
    "is_scratch",
    "load_run",
    "read_meta",
    "recover",
    "request_row",
    "save_meta",
    "save_run",
    "scratch_folder",
    "stage_rows",
    "summarized",
    "typed_table",
]
