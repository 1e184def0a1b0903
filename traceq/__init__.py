"""traceq: why did mixed precision make training slower? Evidence from profiler traces.

The library does the work and returns polars frames; the ``traceq`` command only renders them.
"""

from __future__ import annotations

import polars as pl

from traceq._version import __version__
from traceq.analysis.compare import compare
from traceq.analysis.report import run_report
from traceq.errors import InputError, QueryError, StoreError, TraceqError
from traceq.ingest.ingest import ingest
from traceq.query.engine import query, sql
from traceq.readers import read_trace
from traceq.store import Store


def runs(store: Store | str | None = None) -> pl.DataFrame:
    """The run catalog (the ``runs`` table) of ``store``."""
    return (store if isinstance(store, Store) else Store(store)).catalog()


__all__ = [
    "InputError",
    "QueryError",
    "Store",
    "StoreError",
    "TraceqError",
    "__version__",
    "compare",
    "ingest",
    "query",
    "read_trace",
    "run_report",
    "runs",
    "sql",
]
