"""Values placed at rows by index: how the model attaches per-event results without order-keeping joins."""

from __future__ import annotations

import polars as pl


def nulls(name: str, dtype: pl.DataType, n: int) -> pl.Series:
    """A column of ``n`` nulls."""
    return pl.select(pl.repeat(None, n, dtype=dtype)).to_series().alias(name)


def placed_at(values: pl.Series, rows: pl.Series, n: int) -> pl.Series:
    """A column of ``n`` rows holding ``values[i]`` at row ``rows[i]`` and null elsewhere."""
    return nulls(values.name, values.dtype, n).scatter(rows, values)
