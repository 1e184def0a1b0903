"""Storing, once a run is committed, its report as ``traceq report RUN`` prints it
(:mod:`traceq.render.report_document`), for the runs that store everything their report reads."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import polars as pl

from traceq._utils.leftovers import tag
from traceq.analysis.replay.stored import has_estimate
from traceq.analysis.results import RunReport
from traceq.render.op_list import listed
from traceq.render.report_document import DOCUMENT
from traceq.render.reports import report_document
from traceq.store import Store

#: How a stored run's report is computed: ``report_of(run_id, store, lanes=False)`` (no steps' lanes: the
#: HTML page's).
ReportOf = Callable[..., RunReport]


def store_report_documents(store: Store, ingested: pl.DataFrame, report_of: ReportOf) -> None:
    """Store the report of each run just ``ingested`` (:func:`traceq.ingest`'s frame) that stores everything
    its report reads, the estimate without the profiler among it, as ``traceq report RUN`` prints it
    (:mod:`traceq.render.report_document`): that command then shows it without computing it.
    ``report_of`` computes a stored run's report as that command does (the API and the command pass
    :func:`~traceq.analysis.replay.explain.explained_report`). A run whose report cannot be made stores
    none (an optional copy: its reports are computed, and say why)."""
    for run_id in ingested.filter(pl.col("status") == "ingested")["run_id"].unique(maintain_order=True):
        if not has_estimate(store.runs_dir, run_id):
            continue
        run_dir = store.runs_dir / f"run_id={run_id}"
        try:
            text = report_document(listed(report_of(run_id, store, lanes=False)), store.catalog_row(run_id))
            if text is not None:
                write(store, run_dir, text)
        except Exception:  # the run is stored: this copy of its report is not needed
            continue


def write(store: Store, run_dir: Path, text: str) -> None:
    """Put a document into a committed run's folder in one rename, staged under the store's ``tmp/``
    (``doc.<host>.<pid>.<hex>``: a process that dies before the rename leaves it there, and the next
    writer of the store removes it)."""
    staged = store.tmp_dir() / f"doc.{tag()}"
    try:
        staged.write_text(text + "\n", encoding="utf-8")
        os.replace(staged, run_dir / DOCUMENT)
    finally:
        staged.unlink(missing_ok=True)
