"""What a terminal table shows of a users' query: its first and last rows, fetched from DuckDB without a
frame (Polars' import is several times Python's own start-up), where its columns are shown alike either way."""

from __future__ import annotations

import warnings
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    import duckdb
    import pyarrow as pa

#: DuckDB's types whose values a frame shows as DuckDB gives them (the others are converted first, or
#: are times and lists, whose Python values differ).
_NUMBERS = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "FLOAT", "DOUBLE"}
)
PLAIN = _NUMBERS | {"BOOLEAN", "VARCHAR"}


@dataclass(frozen=True)
class Shown:
    """The rows of a result that a table of at most ``shown_rows`` rows shows: all of them (``head``), or
    its first and last ``shown_rows // 2`` (``head`` and ``tail``) of ``height``. As a sequence: its length
    is ``height``; a slice gives the rows kept (the head's or the tail's)."""

    #: (name, numeric) of each column
    columns: list[tuple[str, bool]]
    head: list[tuple[object, ...]]
    tail: list[tuple[object, ...]]
    height: int

    def __len__(self) -> int:
        return self.height

    def __getitem__(self, part: slice) -> list[tuple[object, ...]]:
        start, stop, _ = part.indices(self.height)
        if stop <= len(self.head):
            return self.head[start:stop]
        first_of_tail = self.height - len(self.tail)
        if start >= first_of_tail:
            return self.tail[start - first_of_tail : stop - first_of_tail]
        raise IndexError(f"rows {start}-{stop} of {self.height}: only the first and last are kept")


def shown(con: duckdb.DuckDBPyConnection, query: str, columns: list[tuple[str, bool]], shown_rows: int) -> Shown:
    """Run ``query`` on ``con`` and keep what a table of ``shown_rows`` rows shows: up to ``shown_rows + 1``
    rows as Python values; of a longer result, the rest counted in Arrow batches, of which only the last
    rows are converted."""
    cursor = con.execute(query)
    head = cursor.fetchmany(shown_rows + 1)
    if len(head) <= shown_rows:
        return Shown(columns, head, [], len(head))
    if not fetched_rows_reach_arrow():  # run again, read as Arrow from its first row
        return _from_batches(_batches(con.execute(query)), columns, shown_rows)
    half = shown_rows // 2
    tail: deque[tuple[object, ...]] = deque(head[half:], maxlen=half)
    height = len(head)
    for batch in _batches(cursor):
        height += batch.num_rows
        tail.extend(tuple(row.values()) for row in batch.slice(max(0, batch.num_rows - half)).to_pylist())
    return Shown(columns, head[:half], list(tail), height)


def fetched_rows_reach_arrow() -> bool:
    """Whether DuckDB's Arrow reader of a result begins right after the rows ``fetchmany`` returned (DuckDB
    2): DuckDB 1 begins it after the whole chunk those rows came from, dropping the rest of it (2,007 of the
    22,786 rows of ``events`` of the bundled FP16 sample, after 41). There, a result longer than a table
    shows is run again and read as Arrow from its first row (Python 3.10 installs DuckDB 1)."""
    import duckdb

    return int(duckdb.__version__.split(".")[0]) >= 2


def _batches(cursor: duckdb.DuckDBPyConnection) -> Iterator[pa.RecordBatch]:
    with warnings.catch_warnings():  # DuckDB warns that a pending result's Arrow batches are a copy
        warnings.simplefilter("ignore")
        return iter(cursor.to_arrow_reader(1 << 16))


def _from_batches(batches: Iterator[pa.RecordBatch], columns: list[tuple[str, bool]], shown_rows: int) -> Shown:
    """:func:`shown` of a result read as Arrow batches only."""
    half = shown_rows // 2
    head: list[tuple[object, ...]] = []
    tail: deque[tuple[object, ...]] = deque(maxlen=half)
    height = 0
    for batch in batches:
        if len(head) <= shown_rows:
            head.extend(tuple(row.values()) for row in batch.slice(0, shown_rows + 1 - len(head)).to_pylist())
        height += batch.num_rows
        tail.extend(tuple(row.values()) for row in batch.slice(max(0, batch.num_rows - half)).to_pylist())
    if height <= shown_rows:
        return Shown(columns, head, [], height)
    return Shown(columns, head[:half], list(tail), height)


def numeric(duck_type: str) -> bool:
    """Whether a column of ``duck_type`` (one of :data:`PLAIN`) holds numbers."""
    return duck_type in _NUMBERS
