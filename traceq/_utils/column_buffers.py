"""Polars columns as the contiguous buffers the optional C parts read (:mod:`traceq._utils.native`), and back.

pyarrow is imported where first used: the replay's modules load with a report of stored runs, which
replays nothing and reads no Arrow (``tests/cli/test_start_imports.py``).
"""

from __future__ import annotations

from array import array

import polars as pl


def column_bytes(column: pl.Series, dtype: pl.DataType | type[pl.DataType] = pl.Int64) -> memoryview:
    """The values of a null-free numeric column, cast to ``dtype`` (8 bytes a value: ``Int64`` or
    ``Float64``), as one contiguous buffer (the column's own memory where it already is one chunk of
    that type)."""
    import pyarrow as pa

    values = column.cast(dtype).rechunk().to_arrow()
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.null_count:
        raise ValueError(f"column {column.name!r} has nulls: the C parts read values only")
    return memoryview(values.buffers()[1]).cast("B")[values.offset * 8 : (values.offset + len(values)) * 8]


def float_series(values: array) -> pl.Series:
    """A Float64 column over an ``array("d")`` (such as a C part wrote), without a Python float per value.
    Through a one-column batch: Polars converts a lone Arrow array with Arrow's compute functions, whose
    first use loads them (25 ms of a report's replay)."""
    import pyarrow as pa

    column = pa.Array.from_buffers(pa.float64(), len(values), [None, pa.py_buffer(values)])
    batch = pa.RecordBatch.from_arrays([column], names=["values"])
    return pl.from_arrow(batch).to_series().alias("")  # type: ignore[union-attr]
