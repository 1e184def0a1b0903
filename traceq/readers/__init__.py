"""Readers: one module per input format; each translates a file into the canonical tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl

from traceq.errors import InputError
from traceq.model.build import RunTables, build_run_tables
from traceq.readers import chrome_common, kineto, nsys, paddle, paddle_summary
from traceq.readers.chrome_json import ChromeTrace, read_chrome_trace
from traceq.readers.source import Progress, check_readable, head_bytes, report_stage


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


def sniff_format(path: Path) -> str:
    """The input format of ``path`` judged by its content: ``chrome_json``, ``nsys_sqlite`` or ``paddle_summary``."""
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


def read_trace(path: Path, progress: Progress | None = None) -> ReadResult:
    """Read one trace file of any supported format into the canonical tables."""
    result = _read(path, progress)
    report_stage(progress, "classifying kernels")
    result.tables.classify_kernels()
    return result


def _timed_events(path: Path, trace: ChromeTrace, flavour: ModuleType, counts: dict[str, int]) -> pl.DataFrame:
    """The flavour's events with negative durations clamped (counted in ``counts``); the decoded
    columns are freed as soon as they are mapped."""
    events = flavour.events(trace)
    trace.events = trace.events.clear()
    if events.is_empty():
        raise InputError(path, "a chrome trace with no timed events")
    counts["negative"] = events.filter(pl.col("dur_ns") < 0).height
    return events.with_columns(pl.col("dur_ns").clip(lower_bound=0))


def _read(path: Path, progress: Progress | None) -> ReadResult:
    fmt = sniff_format(path)
    if fmt == "nsys_sqlite":
        tables, meta = nsys.read_nsys(path, progress)
        return ReadResult(
            tables=tables,
            source_format=fmt,
            flavour=meta["flavour"],
            profiler_version=meta["profiler_version"],
            devices=meta["devices"],
            clock_offset_ns=None,
            warnings=meta["warnings"],
        )
    if fmt == paddle_summary.FORMAT:
        tables, warnings = paddle_summary.read_paddle_summary(path)
        return ReadResult(
            tables=tables,
            source_format=fmt,
            flavour=paddle_summary.FLAVOUR,
            profiler_version="paddle summary text",
            warnings=warnings,
        )
    trace = read_chrome_trace(path, progress)
    report_stage(progress, "building the model")
    flavour = paddle if paddle.looks_like(trace) else kineto
    coarse = flavour is paddle and not paddle.uses_relative_times(trace)
    tolerance = chrome_common.TICK_NS if coarse or chrome_common.whole_microseconds(trace.events) else 0
    threads = flavour.threads(trace)
    counts: dict[str, int] = {}
    # passed without a local reference, so the model build can release columns as it sorts them
    tables = build_run_tables(_timed_events(path, trace, flavour, counts), threads, tolerance_ns=tolerance)
    negative = counts["negative"]
    warnings = list(trace.warnings)
    if negative:
        warnings.append(f"{negative} events had negative durations; counted as 0")
    unsupported = {k: v for k, v in trace.skipped.items() if k not in chrome_common.LINK_PHASES}
    if unsupported:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(unsupported.items()))
        warnings.append(f"events of unsupported phases skipped ({kinds})")
    return ReadResult(
        tables=tables,
        source_format=fmt,
        flavour=flavour.FLAVOUR,
        profiler_version=flavour.version(trace),
        devices=chrome_common.devices(trace.meta),
        distributed=flavour.distributed(trace),
        clock_offset_ns=flavour.clock_offset_ns(trace),
        warnings=warnings,
    )
