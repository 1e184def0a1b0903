"""Readers: a file of any supported format into the canonical tables.

:func:`sniff_format` tells the format by content and :func:`read_trace` dispatches to its reader: chrome
traces (``chrome/``) and nsys exports (``nsys.py``) give their events in chunks, which
:mod:`~traceq.readers.assemble` turns into the tables through the model; Paddle summary text
(``paddle_summary.py``) has no events and gives its tables directly.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceq.errors import InputError
from traceq.model.kernel_classes import classify_kernels
from traceq.readers import nsys, paddle_summary
from traceq.readers.assemble import Assembled, assemble
from traceq.readers.chrome import common as chrome_common
from traceq.readers.chrome import kineto, paddle
from traceq.readers.chrome.decoder import read_chrome_trace
from traceq.readers.overview import Overview
from traceq.readers.source import Progress, check_readable, head_bytes, report_stage
from traceq.schema import RunTables


@dataclass
class ReadResult:
    """A file read into the canonical model, with what the catalog records about it."""

    tables: RunTables
    source_format: str
    flavour: str
    profiler_version: str
    devices: list[dict[str, Any]] = field(default_factory=list)
    distributed: dict[str, Any] = field(default_factory=dict)
    clock_offset_ns: int | None = None
    warnings: list[str] = field(default_factory=list)
    #: What the catalog and the summary line count of the events.
    overview: Overview | None = None
    #: The distinct kernel names of ``events``, where the events are not in memory.
    kernel_names: pl.Series | None = None
    #: Whether the source is a timeline of events (a trace), not op tables only (summary text).
    has_timeline: bool = True
    #: Whether the model was built on disk (:mod:`traceq.model.on_disk`): what follows keeps memory bounded too.
    model_on_disk: bool = False

    def __post_init__(self) -> None:
        if self.overview is None:  # every format but a streamed chrome trace (which gives its own) is in memory
            self.overview = Overview.of(self.tables.collect().events)


def sniff_format(path: str | os.PathLike[str]) -> str:
    """The input format of ``path`` judged by its content: ``chrome_json``, ``nsys_sqlite`` or ``paddle_summary``."""
    path = Path(path)
    check_readable(path)
    head = head_bytes(path, 4096)
    if nsys.is_sqlite(head):
        return "nsys_sqlite"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        raise InputError(path, "empty file" if not head else "only whitespace")
    if text[:1] in (b"{", b"["):
        return "chrome_json"
    if paddle_summary.looks_like_summary(head_bytes(path, 1 << 16)):
        return paddle_summary.FORMAT
    raise InputError(path, "not a trace (expected chrome-trace JSON, an nsys SQLite export or Paddle summary text)")


def read_trace(
    path: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    spill_dir: str | os.PathLike[str] | None = None,
    steps_from: str | None = None,
) -> ReadResult:
    """Read one trace file of any supported format into the canonical tables.

    With ``spill_dir``, a chrome trace's decoded chunks (a large nsys export's events, a summary's cells) wait in that
    folder and ``tables.events`` is a LazyFrame that produces the events chunk by chunk (write it with
    ``sink_parquet``: memory stays bounded; the folder must outlive that and is the caller's to remove).
    Otherwise every table is in memory. ``steps_from``: a regular expression; the host ranges whose names
    match it are the steps (instead of the profiler's steps, or the ranges and patterns traceq looks for).
    """
    path, spill_dir = Path(path), Path(spill_dir) if spill_dir is not None else None
    result = _read(path, progress, spill_dir, steps_from)
    report_stage(progress, "classifying kernels")
    classify_kernels(result.tables, result.kernel_names)
    if spill_dir is None:
        result.tables.collect()
    return result


def _read(path: Path, progress: Progress | None, spill_dir: Path | None, steps_from: str | None) -> ReadResult:
    fmt = sniff_format(path)
    if fmt == "nsys_sqlite":
        return _read_nsys(path, progress, spill_dir, steps_from)
    if fmt == paddle_summary.FORMAT:
        tables, warnings = paddle_summary.read_paddle_summary(path, spill_dir)
        return ReadResult(
            tables=tables,
            source_format=fmt,
            flavour=paddle_summary.FLAVOUR,
            profiler_version="paddle summary text",
            has_timeline=False,
            warnings=warnings,
        )
    trace = read_chrome_trace(path, progress, spill_dir=spill_dir)
    report_stage(progress, "building the model")
    flavour = paddle if paddle.looks_like(trace) else kineto
    params = flavour.params(trace)
    events_of = functools.partial(flavour.events, params=params)
    built = assemble(path, trace.chunks, events_of, flavour.threads(trace), tolerance_ns=params.tolerance_ns,
                     progress=progress, spill_dir=spill_dir, steps_from=steps_from)  # fmt: skip
    warnings = [*trace.warnings, *chrome_common.beyond_warning(params), *built.warnings]
    unsupported = {k: v for k, v in trace.skipped.items() if k not in chrome_common.LINK_PHASES}
    if unsupported:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(unsupported.items()))
        warnings.append(f"events of unsupported phases skipped ({kinds})")
    return _assembled(
        built,
        source_format=fmt,
        flavour=flavour.FLAVOUR,
        profiler_version=flavour.version(trace),
        devices=chrome_common.devices(trace.meta),
        distributed=flavour.distributed(trace),
        clock_offset_ns=flavour.clock_offset_ns(trace),
        warnings=warnings,
    )


def _read_nsys(path: Path, progress: Progress | None, spill_dir: Path | None, steps_from: str | None) -> ReadResult:
    export = nsys.read_nsys(path, progress, spill_dir=spill_dir)
    meta = export.meta
    report_stage(progress, "building the model")
    built = assemble(path, export.chunks, lambda raw: raw, export.threads, launch_keys=("pid",), progress=progress,
                     spill_dir=spill_dir, steps_from=steps_from)  # fmt: skip
    one_window = nsys.as_one_window(built.tables, built.overview.start_ns, built.overview.end_ns)
    return _assembled(
        built,
        source_format="nsys_sqlite",
        flavour=meta["flavour"],
        profiler_version=meta["profiler_version"],
        devices=meta["devices"],
        warnings=[*meta["warnings"], *built.warnings, *one_window],
    )


def _assembled(built: Assembled, **catalog: Any) -> ReadResult:
    """The result of a format whose events were assembled from chunks, with what the catalog records."""
    return ReadResult(
        tables=built.tables,
        overview=built.overview,
        kernel_names=built.kernel_names,
        model_on_disk=built.on_disk,
        **catalog,
    )
