"""The Python API: each function calls the stages (see the README's Architecture section) and returns
polars frames or typed results; reports and comparisons also take a trace file, ingested first. Imported
by :mod:`traceq` on first use of one of its names."""

from __future__ import annotations

from functools import wraps
from pathlib import Path
from typing import Any

import polars as pl

from traceq.analysis.replay.explain import estimate_memory, explained_comparison, explained_report, store_estimate
from traceq.analysis.results import Comparison, RunReport
from traceq.ingestion.ingest import ingest as ingest_files
from traceq.ingestion.ingest import pick_refs, runs_to_report
from traceq.ingestion.metrics import WholeRunStep
from traceq.ingestion.run_refs import latest_run
from traceq.render.documents import store_report_documents
from traceq.store import Store, check_store
from traceq.store import remove_run as _remove_run
from traceq.store import rename_run as _rename_run

#: The step stored with a one-file run's metrics: its step estimated without the profiler.
ESTIMATE_STEP = WholeRunStep(store_estimate, estimate_memory)


@wraps(ingest_files, assigned=("__module__", "__name__", "__qualname__", "__annotations__"))
def ingest(paths: Any, store: Store | str | Path | None = None, *args: Any, **kwargs: Any) -> pl.DataFrame:
    """Ingest trace files into a store (:func:`traceq.ingestion.ingest.ingest`, whose arguments it takes),
    with the step estimated without the profiler stored with each one-file run whose diagnosis is stored
    (:mod:`traceq.analysis.replay.stored`): its reports read it instead of replaying the run; then such a
    run's report too (:func:`~traceq.render.documents.store_report_documents`)."""
    store = Store.of(store)
    ingested = ingest_files(paths, store, *args, whole_run_step=ESTIMATE_STEP, **kwargs)
    store_report_documents(store, ingested, explained_report)
    return ingested


def runs(store: Store | str | Path | None = None) -> pl.DataFrame:
    """The run catalog (the ``runs`` table) of ``store``."""
    return Store.of(store).catalog()


def check(store: Store | str | Path | None = None) -> pl.DataFrame:
    """Every problem of every run in ``store`` (``run_id``, ``name``, ``file``, ``problem``; no rows: whole):
    catalog rows, file sizes and CRC-32s against those written, Parquet footers."""
    return check_store(Store.of(store))


def remove_run(ref: str, store: Store | str | Path | None = None) -> str:
    """Remove a stored run (a run id, a unique run id prefix or a run name; a damaged run too) from
    ``store``; returns its id."""
    store = Store.of(store)
    run_id = store.resolve(ref, damaged_ok=True)
    _remove_run(store, run_id)
    return run_id


def rename_run(ref: str, new_name: str, store: Store | str | Path | None = None) -> str:
    """Give a stored run (a run id, a unique run id prefix or a run name) the name ``new_name``; returns its
    id. A name another run has is refused."""
    store = Store.of(store)
    run_id = store.resolve(ref)
    _rename_run(store, run_id, new_name)
    return run_id


def run_report(
    ref: str | None = None,
    store: Store | str | Path | None = None,
    *,
    steps_from: str | None = None,
    what_if: bool = False,
    unprofiled: bool | None = None,
) -> RunReport:
    """The report of one run: a run id, a run name, or a trace file (ingested first if not stored yet);
    by default the run ingested last. ``steps_from``: a regular expression naming the host ranges that are
    the steps (the trace is read again with it, into a scratch store: ``store`` is not written). The report
    carries every op (``report.ops``, the most CPU time first; :func:`traceq.render.render` lists the first
    :data:`~traceq.render.formats.TOP_OPS` unless asked for all). ``what_if``: replay the run with each cause removed
    (``report.what_if``, each finding's ``what_if_ms``); ``unprofiled``: its step time estimated without
    the profiler (``report.unprofiled``): by default wherever the replay can run, False for the traced
    report only."""
    store = Store.of(store)
    with runs_to_report(store, [ref if ref is not None else latest_run(store)], steps_from) as (source, ids):
        return explained_report(ids[0], source, what_if, unprofiled)


def compare(
    base_ref: str | None = None,
    new_ref: str | None = None,
    store: Store | str | Path | None = None,
    *,
    base_step_ms: float | None = None,
    new_step_ms: float | None = None,
    steps_from: str | None = None,
    what_if: bool = False,
    unprofiled: bool | None = None,
) -> Comparison:
    """Why NEW's step is slower or faster than BASE's: each a run id, a run name, or a trace file (ingested
    first if not stored yet). Without runs, the two runs ingested last; with NEW alone, the run ingested
    just before it is BASE. ``base_step_ms``/``new_step_ms``: step times measured without the profiler.
    ``steps_from``, ``what_if``: see :func:`run_report`; ``unprofiled``: the verdict on both runs' step
    times estimated without the profiler (``diff.unprofiled``; by default wherever the replay can run, False
    for the traced comparison only), unless measured ones are given."""
    store = Store.of(store)
    with runs_to_report(store, pick_refs(store, base_ref, new_ref, steps_from), steps_from) as (source, ids):
        return explained_comparison(ids[0], ids[1], source, base_step_ms, new_step_ms, what_if, unprofiled)
