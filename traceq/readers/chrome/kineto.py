"""PyTorch profiler (Kineto) chrome traces -> canonical events."""

from __future__ import annotations

from typing import Any

import polars as pl

from traceq.model.categories import with_kind
from traceq.readers.chrome.common import (
    TraceParams,
    dur_to_ns,
    gpu_device_stream,
    leading_int,
    leading_int_of,
    trace_params,
    us_to_ns,
)
from traceq.readers.chrome.decoder import ChromeTrace
from traceq.schema import GPU_WORK_KINDS, KINETO

FLAVOUR = KINETO
_KINETO_CATS = {"cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "ac2g", "user_annotation"}


def looks_like(trace: ChromeTrace) -> bool:
    """Kineto writes ``baseTimeNanoseconds``/``traceName`` or its own category names."""
    if {"baseTimeNanoseconds", "traceName", "distributedInfo"} & trace.meta.keys():
        return True
    cats = set(trace.chunks.head(10_000, ["cat"]).get_column("cat").drop_nulls().unique().to_list())
    return bool(cats & _KINETO_CATS)


def params(trace: ChromeTrace) -> TraceParams:
    """Times are microseconds, written whole by older Kineto versions."""
    return trace_params(trace.chunks)


def events(raw: pl.LazyFrame, params: TraceParams) -> pl.LazyFrame:
    """Canonical events (before linking) from one chunk of a decoded Kineto trace."""
    is_gpu = pl.col("kind").is_in(GPU_WORK_KINDS)
    return (
        with_kind(raw, params.categories)
        .with_columns(
            pl.col("cat").alias("category"),
            us_to_ns("ts_us", params.base_us).alias("ts_ns"),
            dur_to_ns("dur_us").alias("dur_ns"),
            leading_int_of("pid_raw", params.pids).alias("pid"),
            leading_int_of("tid_raw", params.tids).alias("tid"),
            pl.coalesce("correlation", "correlation_id").alias("correlation"),
            pl.coalesce("bytes", "Bytes").alias("bytes"),
            pl.col("input_type").alias("input_dtypes"),
            pl.col("input_dims").alias("input_shapes"),
        )
        .with_columns(*gpu_device_stream(is_gpu))
        .filter(pl.col("ts_ns").is_not_null() & pl.col("dur_ns").is_not_null())
    )


def threads(trace: ChromeTrace) -> pl.DataFrame:
    rows = [
        (m["pid"], m["tid"], m["args"].get("name"))
        for m in trace.metadata_events
        if m["name"] == "thread_name" and isinstance(m["args"].get("name"), str)
    ]
    return _id_rows(rows)


def version(trace: ChromeTrace) -> str:
    v = trace.meta.get("schemaVersion")
    return f"kineto schema {v}" if v is not None else "kineto"


def distributed(trace: ChromeTrace) -> dict[str, Any]:
    d = trace.meta.get("distributedInfo")
    return d if isinstance(d, dict) else {}


def _id_rows(rows: list[tuple[Any, Any, str]]) -> pl.DataFrame:
    frame = pl.DataFrame(
        {"pid": [str(r[0]) for r in rows], "tid": [str(r[1]) for r in rows], "name": [r[2] for r in rows]},
        schema={"pid": pl.String, "tid": pl.String, "name": pl.String},
    )
    return frame.select(leading_int("pid").alias("pid"), leading_int("tid").alias("tid"), "name").drop_nulls(
        ["pid", "tid"]
    )


def clock_offset_ns(trace: ChromeTrace) -> int | None:
    """Kineto's ``ts`` count from ``baseTimeNanoseconds`` (Unix epoch ns), where the file records it."""
    base = trace.meta.get("baseTimeNanoseconds")
    fits = isinstance(base, int) and not isinstance(base, bool) and -(2**63) <= base < 2**63
    return base if fits else None  # beyond int64 ns (292 years from 1970): no clock offset is known
