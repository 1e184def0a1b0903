"""One file's share of an ingest: read it, write its rank partition into a run being written, report back.

This runs wherever the executor puts it (this process, a pool worker, a Ray task), so it takes and
returns plain values only. The tables never travel back: the worker writes them, the caller gets counts.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from traceq._utils.memory import release_free_memory
from traceq._utils.words import count
from traceq.errors import StoreError, TraceqError, as_text
from traceq.ingestion import metrics
from traceq.ingestion.metrics import WholeRunStep
from traceq.model.steps import step_rule
from traceq.readers import ReadResult, read_trace
from traceq.readers.source import hashing_reads, identity, report_stage
from traceq.store import publish_partition, spill_folder, stage_partition


@dataclass(frozen=True)
class FileTask:
    """Read ``path`` (content hash ``digest``) and write it as ``run_dir/part``."""

    path: str
    digest: str
    run_dir: str
    part: str
    #: the pattern of the ranges that are steps, where given (``ingest --steps-from``)
    steps_from: str | None = None
    #: the file's :func:`~traceq.readers.source.identity` when ``digest`` was taken, and on which host
    identity: tuple[int, ...] | None = None
    hashed_on: str | None = None
    #: where the file is the whole run (not one rank of several): what else to store with its metrics
    #: (:class:`traceq.ingestion.metrics.WholeRunStep`, of module-level functions: it travels by name)
    whole_run_step: WholeRunStep | None = None


def ingest_file(task: FileTask, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Do ``task``; return the file's ``source`` row, counts and summary line, or ``{"error": message,
    "error_in": "input" | "store"}``."""
    run_dir = Path(task.run_dir)
    spill = spill_folder(run_dir)
    try:
        spill.mkdir(mode=0o700)  # spilled events are the trace's: for this user only
        os.chmod(spill, 0o700)
    except OSError as e:
        return _store_error(task, e)
    try:
        return _ingest(task, spill, progress)
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _ingest(task: FileTask, spill: Path, progress: Callable[[int], None] | None) -> dict[str, Any]:
    start = time.perf_counter()
    path, run_dir = Path(task.path), Path(task.run_dir)
    try:
        before = identity(path)
        with hashing_reads(path) as passes:
            result = read_trace(path, progress, spill_dir=spill, steps_from=task.steps_from)
        after = identity(path)
    except StoreError as e:  # writing or reading back the spill folder
        return _store_error(task, e)
    except TraceqError as e:
        return {"error": str(e), "error_in": "input"}
    except OSError as e:
        return {"error": as_text(f"{path}: {e.strerror or e}"), "error_in": "input"}
    # the bytes decoded are those hashed: the file did not change or get replaced since (size, times,
    # inode), and where the reader read it whole, the sha256 of what it read is the digest
    # (another host may see the file on another device and inode: there, its size and mtime must match)
    elsewhere = task.hashed_on != socket.gethostname()
    hashed = tuple(task.identity or before)
    if (
        (hashed[2:4] != before[2:4] if elsewhere else hashed != before)
        or after != before
        or (any(p != task.digest for p in passes))
    ):
        return {"error": f"{path}: the file changed while it was read (replaced, or written to); nothing stored: "
                "ingest it again once it is complete", "error_in": "input"}  # fmt: skip
    report_stage(progress, "writing Parquet")
    try:
        staging = stage_partition(run_dir, task.part, result.tables)
    except (OSError, StoreError) as e:  # StoreError: the events stream from the spill folder as written
        return _store_error(task, e)
    ev = result.overview
    declared = result.distributed.get("rank")
    info = {
        "error": None,
        "error_in": None,
        "declared_rank": declared if isinstance(declared, int) and declared >= 0 else None,
        "source": {
            "source_path": as_text(path.resolve()),
            "source_hash": task.digest,
            "source_bytes": path.stat().st_size,
            "source_format": result.source_format,
            "has_timeline": result.has_timeline,
            "flavour": result.flavour,
            "profiler_version": result.profiler_version,
            "devices": json.dumps(result.devices),
            "distributed": json.dumps(result.distributed),
            "clock_offset_ns": result.clock_offset_ns,
            "n_events": ev.n_events,
            "n_steps": result.tables.steps.height,
            "step_rule": step_rule(result.tables.steps, task.steps_from),
            "start_ns": ev.start_ns,
            "end_ns": ev.end_ns,
        },
        "events_by_kind": dict(ev.by_kind),
        "summary": summary_line(result),  # (from a summary's cells, which may still be in the spill folder)
    }
    shutil.rmtree(spill, ignore_errors=True)
    bounded, warnings = result.model_on_disk, list(result.warnings)
    del result, ev  # the metrics below read the staged files: the tables need not stay in memory
    release_free_memory()
    try:
        step = task.whole_run_step
        whole_run = (step, info["source"]["flavour"] or "", info["events_by_kind"]) if step is not None else None
        unstored = metrics.save(staging, info["source"]["n_events"], bounded, progress, whole_run)
        warnings += [] if unstored is None else [unstored]
        info["source"]["warnings"] = json.dumps(warnings)
        publish_partition(staging, run_dir, task.part)
    except (OSError, StoreError) as e:
        return _store_error(task, e)
    return {**info, "seconds": time.perf_counter() - start, "peak_rss_bytes": peak_rss_bytes(),
            "worker": f"{socket.gethostname()}:{os.getpid()}"}  # fmt: skip


def _store_error(task: FileTask, e: OSError | StoreError) -> dict[str, Any]:
    message = str(e) if isinstance(e, StoreError) else f"{task.run_dir}: cannot write the store: {e.strerror or e}"
    return {"error": message, "error_in": "store"}


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory (VmHWM): unlike ru_maxrss, not inherited from a parent."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def summary_line(result: ReadResult) -> str:
    """``events by kind, steps, devices, time span`` in one line (for summary text: its tables)."""
    ev = result.overview
    # (the cells may wait in a spill folder: only their sections are read)
    cells = result.tables.summary_cells.lazy().select(pl.col("section").unique(maintain_order=True))
    if not ev.n_events and (sections := cells.collect()["section"].to_list()):
        ops = result.tables.op_stats
        kernel_rows = ops.filter(pl.col("row_type") == "kernel").height + result.tables.kernel_stats.height
        return (
            f"{result.profiler_version}: {count(len(sections), 'table')} ({', '.join(sections)}); "
            f"{count(ops.filter(pl.col('row_type') == 'op').height, 'op row')}, {count(kernel_rows, 'kernel row')}; "
            "no timeline, so time-based metrics need a trace"
        )
    kinds = ", ".join(f"{k} {n:,}" for k, n in sorted(ev.by_kind.items(), key=lambda kn: (-kn[1], kn[0])))
    gpus = sorted({str(d.get("name")) for d in result.devices if d.get("name")})
    devices = len(ev.devices)
    dev_text = (count(devices, "GPU") if devices else "no GPU events") + (f" ({', '.join(gpus)})" if gpus else "")
    return (
        f"{result.profiler_version}: {ev.n_events:,} events ({kinds}); "
        f"{count(result.tables.steps.height, 'step')}; {dev_text}; span {ev.span_ns / 1e6:,.1f} ms"
    )
