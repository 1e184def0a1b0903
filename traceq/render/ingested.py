"""What ``traceq ingest`` prints as its table: a line per run (or rank) ingested or already stored on stdout;
each file skipped and each reader's warning on stderr, where a script reading stdout does not see them."""

from __future__ import annotations

import json
import sys
from typing import TextIO

import polars as pl

from traceq.render.text import visible


def ingest_lines(result: pl.DataFrame, out: TextIO | None = None, err: TextIO | None = None) -> None:
    """``result`` (what :func:`~traceq.ingestion.ingest.ingest` returns) as lines: first the files skipped (on
    ``err``, stderr), then each run ingested or found stored (on ``out``, stdout; with its rank where a run
    has several), each followed by its warnings (on ``err``)."""
    out, err = out or sys.stdout, err or sys.stderr
    multi = result["run_id"].drop_nulls().n_unique() < result["run_id"].drop_nulls().len()
    for row in result.filter(pl.col("status") == "skipped").iter_rows(named=True):
        _line(err, f"skipped {row['path']}: {row['summary']}")
    for row in result.filter(pl.col("status").is_in(["ingested", "duplicate"])).iter_rows(named=True):
        rank = f" rank {row['rank']}" if multi and row["rank"] is not None else ""
        _line(out, f"{row['status']} {row['name']}{rank} ({row['run_id']}): {row['summary']}")
        for w in json.loads(row["warnings"] or "[]"):
            _line(err, f"  warning: {w}")


def _line(stream: TextIO, text: str) -> None:
    stream.write(visible(text) + "\n")
    stream.flush()
