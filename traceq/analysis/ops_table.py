"""A report's op table, cut to its top ops."""

from __future__ import annotations

import polars as pl


def top_ops(ops: pl.DataFrame, top: int | None) -> pl.DataFrame:
    """The ``top`` ops of a report's op table (trace ops by inclusive CPU time; summary rows in table
    order); None: all."""
    if top is None or ops.is_empty():
        return ops
    if "cpu_incl_ns" in ops.columns:
        ops = ops.sort("cpu_incl_ns", descending=True, nulls_last=True)
    return ops.head(top)
