"""A report's op table, cut to its top ops."""

from __future__ import annotations

import polars as pl


def top_ops(ops: pl.DataFrame, top: int | None) -> pl.DataFrame:
    """The ``top`` ops of a report's op table, the most CPU time (inclusive) first; None: all of them,
    in that order."""
    if ops.is_empty() or "cpu_incl_ns" not in ops.columns:
        return ops if top is None else ops.head(top)
    ops = ops.sort("cpu_incl_ns", descending=True, nulls_last=True, maintain_order=True)
    return ops if top is None else ops.head(top)
