"""A report's op table in its order: the most CPU time (inclusive) first."""

from __future__ import annotations

import polars as pl


def by_cpu_time(ops: pl.DataFrame) -> pl.DataFrame:
    """Every op of ``ops``, the most CPU time (inclusive) first (ties in their order); as given where
    there is no CPU time."""
    if ops.is_empty() or "cpu_incl_ns" not in ops.columns:
        return ops
    return ops.sort("cpu_incl_ns", descending=True, nulls_last=True, maintain_order=True)
