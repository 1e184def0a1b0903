"""traceq: why did mixed precision make training slower? Evidence from profiler traces.

The library does the work and returns polars frames and typed results (reports, comparisons); the
``traceq`` command only renders them. This module is the Python API (:mod:`traceq.api` and the stages'
own entry points); each name is imported on first use, so that ``import traceq`` (and every command of
the ``traceq`` CLI) pays only for what it uses.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from traceq._version import __version__
from traceq.errors import InputError, QueryError, StoreError, TraceqError

if TYPE_CHECKING:
    from traceq.analysis.results import Comparison, RunReport
    from traceq.api import check, compare, ingest, remove_run, rename_run, run_report, runs
    from traceq.querying.engine import query, sql
    from traceq.readers import read_trace
    from traceq.store import Store

#: Where each public name lives (imported on first use).
_HOMES = {
    "Comparison": "traceq.analysis.results",
    "RunReport": "traceq.analysis.results",
    "Store": "traceq.store",
    "check": "traceq.api",
    "compare": "traceq.api",
    "ingest": "traceq.api",
    "query": "traceq.querying.engine",
    "read_trace": "traceq.readers",
    "remove_run": "traceq.api",
    "rename_run": "traceq.api",
    "run_report": "traceq.api",
    "runs": "traceq.api",
    "sql": "traceq.querying.engine",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'traceq' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "Comparison",
    "InputError",
    "QueryError",
    "RunReport",
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
    "rename_run",
    "run_report",
    "runs",
    "sql",
]
