"""traceq: why did mixed precision make training slower? Evidence from profiler traces.

The library does the work and returns polars frames and typed results (reports, comparisons); the
``traceq`` command only renders them. This module is the Python API: each function calls the stages
(see the README's Architecture section); reports and comparisons also take a trace file, ingested first.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from traceq import store as store_files
from traceq._version import __version__
from traceq.analysis import compare as comparison
from traceq.analysis import report as reporting
from traceq.analysis.results import Comparison, RunReport
from traceq.errors import InputError, QueryError, StoreError, TraceqError
from traceq.ingest.ingest import ingest, latest_run, pick_runs, run_id_of
from traceq.query.engine import query, sql
from traceq.readers import read_trace
from traceq.store import Store, check_store


def runs(store: Store | str | Path | None = None) -> pl.DataFrame:
    """The run catalog (the ``runs`` table) of ``store``."""
    return _store(store).catalog()


def check(store: Store | str | Path | None = None) -> pl.DataFrame:
    """Every problem of every run in ``store`` (``run_id``, ``name``, ``file``, ``problem``; no rows: whole):
    catalog rows, file sizes and CRC-32s against those written, Parquet footers."""
    return check_store(_store(store))


def remove_run(ref: str, store: Store | str | Path | None = None) -> str:
    """Remove a run (a run id, unique prefix or name; a damaged run too) from ``store``; returns its id."""
    store = _store(store)
    run_id = store.resolve(ref, damaged_ok=True)
    store_files.remove_run(store, run_id)
    return run_id


def run_report(ref: str | None = None, store: Store | str | Path | None = None) -> RunReport:
    """The report of one run: a run id, a run name, or a trace file (ingested first if not stored yet);
    by default the run ingested last."""
    store = _store(store)
    return reporting.run_report(run_id_of(ref, store) if ref is not None else latest_run(store), store)


def compare(
    base_ref: str | None = None, new_ref: str | None = None, store: Store | str | Path | None = None
) -> Comparison:
    """Why NEW's step is slower or faster than BASE's: each a run id, a run name, or a trace file (ingested
    first if not stored yet). Without runs, the two runs ingested last; with NEW alone, the run ingested
    just before it is BASE."""
    store = _store(store)
    return comparison.compare(*pick_runs(store, base_ref, new_ref), store)


def _store(store: Store | str | Path | None) -> Store:
    return store if isinstance(store, Store) else Store(store)


__all__ = [
    "InputError",
    "QueryError",
    "Store",
    "StoreError",
    "TraceqError",
    "__version__",
    "check",
    "compare",
    "ingest",
    "query",
    "read_trace",
    "remove_run",
    "run_report",
    "runs",
    "sql",
]
