"""LazyFrames whose rows come from Python: how traceq streams frames into Polars' Parquet writer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import polars as pl
from polars.io.plugins import register_io_source


def lazy_source(
    produce: Callable[[list[str] | None], Iterator[pl.DataFrame]], schema: Mapping[str, pl.DataType]
) -> pl.LazyFrame:
    """A LazyFrame of ``schema`` whose rows are the frames ``produce(columns)`` yields, asked for only the
    ``columns`` a query reads (all where None); the projection and any pushed-down filter are applied
    here."""

    def source(
        with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None, batch_size: int | None
    ) -> Iterator[pl.DataFrame]:
        for frame in produce(with_columns):
            frame = frame if with_columns is None else frame.select(with_columns)
            yield frame if predicate is None else frame.filter(predicate)

    return register_io_source(source, schema=dict(schema))
