"""Issue 35: the range rules of table columns, a timestamp's against a summed column's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.record.tables import (
    REQUEST_COLUMNS,
    SUM_LIMIT,
    VALUE_LIMIT,
    TableError,
    build_tables,
    checked_table,
    request_row,
    typed_table,
)

ROWS = 100_000


def requests_table(start_ns: np.ndarray, dur_ns: np.ndarray) -> pd.DataFrame:
    rows = (request_row(i, False, 0, 1, None, 1) for i in range(len(start_ns)))
    table, _ = build_tables(rows, [])
    return table.assign(start_ns=start_ns, dur_ns=dur_ns)


def test_a_long_run_s_timestamps_are_read_back():
    """simulate --rate 1 --requests 100000: starts up to 1e14 ns, refused before as if summed."""
    start = np.arange(ROWS, dtype="int64") * 1_000_000_000
    table = checked_table(requests_table(start, np.full(ROWS, 5_000_000)), REQUEST_COLUMNS)
    assert int(table["start_ns"].max()) == (ROWS - 1) * 1_000_000_000


def test_a_timestamp_past_the_value_limit_is_refused():
    start = np.zeros(ROWS, dtype="int64")
    start[7] = VALUE_LIMIT + 1
    with pytest.raises(TableError) as info:
        checked_table(requests_table(start, np.ones(ROWS, "int64")), REQUEST_COLUMNS)
    assert info.value.field == "start_ns"
    assert str(info.value) == (
        f"column 'start_ns' holds {VALUE_LIMIT + 1}, above {VALUE_LIMIT} "
        "(beyond int64 once a duration is added)"
    )


def test_a_summed_column_keeps_the_rule_on_its_total():
    dur = np.ones(ROWS, dtype="int64")
    dur[3] = SUM_LIMIT // ROWS + 1
    with pytest.raises(TableError, match="its total would overflow int64") as info:
        checked_table(requests_table(np.zeros(ROWS, "int64"), dur), REQUEST_COLUMNS)
    assert info.value.field == "dur_ns"


def test_a_batch_is_checked_against_the_whole_table_s_row_count():
    """compare streams a table in batches: the summed rule uses the whole table's rows."""
    dur = np.full(10, SUM_LIMIT // ROWS + 1, dtype="int64")
    batch = requests_table(np.zeros(10, "int64"), dur)
    assert len(checked_table(batch, REQUEST_COLUMNS)) == 10
    with pytest.raises(TableError, match="'dur_ns'"):
        checked_table(batch, REQUEST_COLUMNS, rows=ROWS)


def test_a_column_already_typed_is_shared_not_copied():
    """a deep copy doubled a million-request stage table (246 MB) for columns it left as they were."""
    table = requests_table(np.arange(10, dtype="int64"), np.ones(10, "int64"))
    typed = typed_table(table, REQUEST_COLUMNS)
    assert np.shares_memory(typed["start_ns"].to_numpy(), table["start_ns"].to_numpy())


def test_text_in_one_buffer_becomes_one_shared_string_per_distinct_value():
    """astype(object) made a string per row: 607 MB for the stage names of a million requests."""
    names = ["forward", None, "parse", "forward"] * 1_000
    table = pd.DataFrame({"stage": pd.Series(names, dtype=pd.StringDtype("pyarrow"))})
    typed = typed_table(table, {"stage": "object"})["stage"]
    assert typed.dtype == object and typed.tolist() == names
    assert len({id(v) for v in typed}) == 3  # "forward", "parse", None
