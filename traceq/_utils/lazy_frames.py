"""LazyFrames whose rows come from Python: how traceq streams frames into Polars' Parquet writer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a source is made: the query engine's users' SQL runs without Polars
    import polars as pl

#: Rows of the frames a LazyFrame of :func:`lazy_source` hands on at most. Polars' streaming Parquet sink
#: holds frames in flight for each of its threads, so whole chunks (64-128 k rows) made its peak grow with
#: the threads; slices this small keep it down, no slower (benchmarks/README.md, tenth round).
SLICE_ROWS = 1 << 14


def lazy_source(
    produce: Callable[[list[str] | None], Iterator[pl.DataFrame]], schema: Mapping[str, pl.DataType]
) -> pl.LazyFrame:
    """A LazyFrame of ``schema`` whose rows are the frames ``produce(columns)`` yields (in slices of at most
    :data:`SLICE_ROWS` rows), asked for only the ``columns`` a query reads (all where None); the
    projection and any pushed-down filter are applied here."""
    from polars.io.plugins import register_io_source

    def source(
        with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None, batch_size: int | None
    ) -> Iterator[pl.DataFrame]:
        for frame in produce(with_columns):
            frame = frame if with_columns is None else frame.select(with_columns)
            frame = frame if predicate is None else frame.filter(predicate)
            yield from frame.iter_slices(SLICE_ROWS)

    return register_io_source(source, schema=dict(schema))
