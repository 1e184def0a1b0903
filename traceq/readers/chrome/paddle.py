"""PaddlePaddle profiler (``paddle.profiler``) chrome traces -> canonical events.

Paddle writes ``ts`` as whole microseconds (floored) and, in ``args``, ``start_time``/``end_time`` as
float32 microseconds relative to the profile's start. Where the profile is shorter than 2**24 us
(16.8 s) the relative times are finer than 1 us, so they order and nest events; ``ts`` anchors them on
the absolute clock. Longer profiles fall back to ``ts`` with a 1 us nesting tolerance.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec
import polars as pl

from traceq.model.categories import with_kind
from traceq.readers.chrome.common import (
    TICK_NS,
    TraceParams,
    dur_to_ns,
    gpu_device_stream,
    leading_int_of,
    trace_params,
    us_to_ns,
)
from traceq.readers.chrome.decoder import ChromeTrace
from traceq.schema import GPU_WORK_KINDS, PADDLE

FLAVOUR = PADDLE
#: Paddle appends the duration to every name: ``conv2d dygraph[12.345 us]``, ``ProfileStep#2[31.2 ms]``.
NAME_SUFFIX = r"\[[0-9.]+ ?(?:ms|us|ns|s)\]$"
_REL_LIMIT_US = float(1 << 24)


def looks_like(trace: ChromeTrace) -> bool:
    """Paddle writes ``span_indx``/``span_index``/``ExtraInfo`` and ``"<tid>(C++)"`` thread ids."""
    if {"span_indx", "span_index", "ExtraInfo"} & trace.meta.keys():
        return True
    tids = trace.chunks.head(10_000, ["tid_raw"]).get_column("tid_raw")
    return bool(tids.str.ends_with("(C++)").any() or tids.str.ends_with("(Python)").any())


def params(trace: ChromeTrace) -> TraceParams:
    """``ts`` is whole microseconds; the relative times, where usable (every one within 2**24 us), are
    anchored on it by the median offset between the two over all events (else ``ts`` is used, with a
    1 us nesting tolerance)."""
    found = trace_params(trace.chunks)
    offset = (us_to_ns("ts_us", found.base_us) + 500 - _rel_ns()).alias("offset")
    spans, counts = [], pl.DataFrame(schema={"offset": pl.Int64, "count": pl.UInt32})
    for span, part in trace.chunks.map(
        lambda f: (f.select(_rel_us("start_time").abs().max()).item(), f.select(offset).get_column("offset")),
        ["ts_us", "start_time"],
    ):
        spans += [] if span is None else [span]
        # the offsets lie within a microsecond or two of each other: their counts stay small
        counts = pl.concat([counts, part.drop_nulls().value_counts(name="count")])
        counts = counts.group_by("offset").agg(pl.col("count").sum())
    if not spans or max(spans) >= _REL_LIMIT_US:
        return replace(found, tolerance_ns=TICK_NS)
    return replace(found, origin_ns=_median(counts))


def _median(counts: pl.DataFrame) -> int:
    """The median of the values counted in ``counts`` (``offset``, ``count``), as Polars' median of the
    values themselves gives it (the two middle values averaged), truncated to an integer."""
    ranked = counts.sort("offset").with_columns(pl.col("count").cast(pl.Int64).cum_sum().alias("upto"))
    n = ranked.get_column("upto")[-1]
    middle = [ranked.filter(pl.col("upto") > k).get_column("offset")[0] for k in ((n - 1) // 2, n // 2)]
    return int(pl.Series(middle).median())  # type: ignore[arg-type]


def events(raw: pl.LazyFrame, params: TraceParams) -> pl.LazyFrame:
    """Canonical events (before linking) from one chunk of a decoded Paddle trace."""
    abs_ns = us_to_ns("ts_us", params.base_us)
    ts_ns = abs_ns if params.origin_ns is None else pl.coalesce(_rel_ns() + params.origin_ns, abs_ns)
    is_gpu = pl.col("kind").is_in(GPU_WORK_KINDS)
    return (
        with_kind(raw.with_columns(pl.col("name").str.replace(NAME_SUFFIX, "")), params.categories)
        .with_columns(
            pl.col("cat").alias("category"),
            ts_ns.alias("ts_ns"),
            dur_to_ns("dur_us").alias("dur_ns"),
            leading_int_of("pid_raw", params.pids).alias("pid"),
            leading_int_of("tid_raw", params.tids).alias("tid"),
            pl.coalesce("correlation_id", "correlation").alias("correlation"),
            pl.coalesce("bytes", "Bytes").alias("bytes"),
            pl.col("input_dtypes").map_elements(_flat_dtypes, return_dtype=pl.List(pl.String)),
            pl.when(pl.col("input_shapes") != "{}").then(pl.col("input_shapes")).alias("input_shapes"),
        )
        .with_columns(*gpu_device_stream(is_gpu))
        .filter(pl.col("ts_ns").is_not_null() & pl.col("dur_ns").is_not_null())
    )


def _rel_us(col: str) -> pl.Expr:
    return pl.col(col).str.strip_suffix(" us").str.strip_chars().cast(pl.Float64, strict=False)


def _rel_ns() -> pl.Expr:
    return (_rel_us("start_time") * 1000.0).round().cast(pl.Int64)


def _flat_dtypes(text: str) -> list[str] | None:
    """``{"X": ["float16"], "Y": ["float32"]}`` -> ``["float16", "float32"]``; ``{}`` -> null."""
    if not text or text == "{}":
        return None
    try:
        obj = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    out = []
    for v in obj.values():
        out += [str(x) for x in v] if isinstance(v, list) else [str(v)]
    return out or None


def threads(trace: ChromeTrace) -> pl.DataFrame:
    """Thread names from ``ExtraInfo`` (``"<tid>": "<name>"``), for the trace's host process."""
    extra = trace.meta.get("ExtraInfo")
    pids = pl.concat(
        f.filter(pl.col("tid_raw").str.ends_with(")")).get_column("pid_raw").drop_nulls()
        for f in trace.chunks.frames(["pid_raw", "tid_raw"])
    )
    if not isinstance(extra, dict) or pids.is_empty():
        return pl.DataFrame(schema={"pid": pl.Int64, "tid": pl.Int64, "name": pl.String})
    pid = int(pids.mode()[0])
    rows = [(pid, int(k), str(v)) for k, v in extra.items() if str(k).isdigit()]
    return pl.DataFrame(rows, schema={"pid": pl.Int64, "tid": pl.Int64, "name": pl.String}, orient="row")


def version(trace: ChromeTrace) -> str:
    v = trace.meta.get("schemaVersion")
    return f"paddle schema {v}" if v is not None else "paddle"


def distributed(trace: ChromeTrace) -> dict[str, Any]:
    return {}


def clock_offset_ns(trace: ChromeTrace) -> int | None:
    """Paddle writes ``ts`` as Unix-epoch microseconds."""
    return 0
