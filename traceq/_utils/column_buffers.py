"""Polars columns as the contiguous buffers the optional C parts read (:mod:`traceq._utils.native`)."""

from __future__ import annotations

from array import array

import polars as pl
import pyarrow as pa


def column_bytes(column: pl.Series, dtype: pl.DataType | type[pl.DataType] = pl.Int64) -> memoryview:
    """The values of a null-free numeric column, cast to ``dtype`` (8 bytes a value: ``Int64`` or
    ``Float64``), as one contiguous buffer (the column's own memory where it already is one chunk of
    that type)."""
    array = column.cast(dtype).rechunk().to_arrow()
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count:
        raise ValueError(f"column {column.name!r} has nulls: the C parts read values only")
    return memoryview(array.buffers()[1]).cast("B")[array.offset * 8 : (array.offset + len(array)) * 8]


def float_series(values: array) -> pl.Series:
    """A Float64 column over an ``array("d")`` (such as a C part wrote), without a Python float per value."""
    return pl.Series(pa.Array.from_buffers(pa.float64(), len(values), [None, pa.py_buffer(values)]))
