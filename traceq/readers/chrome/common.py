"""What Kineto and Paddle chrome traces share: category -> kind, id and time conversions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from traceq.readers.chunks import Chunks

#: Phases that only link or label events (flows, metadata, Paddle's closing ``{}``): skipped silently.
LINK_PHASES = {"ph=s", "ph=f", "ph=t", "ph=M", "empty"}
#: One microsecond: the nesting tolerance for sources that round times to whole microseconds.
TICK_NS = 1000


@dataclass(frozen=True)
class TraceParams:
    """What is worked out once over a whole trace and applied to each of its chunks."""

    #: A reference time near the trace's events, for :func:`us_to_ns` (the earliest start).
    base_us: float
    #: The trace's distinct categories (their kinds: :func:`~traceq.model.categories.with_kind`).
    categories: tuple[str, ...]
    #: Each raw process and thread id's integer (:func:`leading_int`), or None: too many to list.
    pids: dict[str, int | None] | None
    tids: dict[str, int | None] | None
    #: Nesting tolerance: :data:`TICK_NS` where times are rounded to whole microseconds.
    tolerance_ns: int = 0
    #: Paddle: the absolute time (ns) of its relative times' zero, where those are used.
    origin_ns: int | None = None
    #: Events whose start or duration is beyond int64 nanoseconds (:data:`MAX_US`): left out.
    beyond: int = 0


#: The largest magnitude of a time in microseconds kept (its nanoseconds fit in int64, about 285 years).
MAX_US = 9e15


def trace_params(chunks: Chunks) -> TraceParams:
    """The :class:`TraceParams` of a trace from one pass over its times and ids: the earliest start,
    the lookups, and a 1 us nesting tolerance where every start and duration is a whole number of
    microseconds (older Kineto, Paddle ``ts``)."""
    starts, whole, cats, pids, tids, beyond = [], True, [], [], [], 0
    for start, whole_ts, whole_dur, out, cat, pid, tid in chunks.map(_chunk_facts, ["ts_us", "dur_us", *_IDS]):
        starts += [] if start is None else [float(start)]
        whole = whole and whole_ts and whole_dur
        beyond += out
        cats.append(cat)
        pids.append(pid)
        tids.append(tid)
    return TraceParams(
        base_us=min(starts) if starts else 0.0,
        categories=tuple(_distinct(cats).to_list()),
        pids=id_ints(_distinct(pids)),
        tids=id_ints(_distinct(tids)),
        tolerance_ns=TICK_NS if whole else 0,
        beyond=beyond,
    )


_IDS = ("cat", "pid_raw", "tid_raw")


def _chunk_facts(f: pl.DataFrame) -> tuple[Any, ...]:
    """A chunk's earliest start, whether its starts and durations are whole microseconds, how many of its
    events have a time beyond :data:`MAX_US`, and its distinct categories, process and thread ids."""
    facts = f.select(
        pl.col("ts_us").filter(pl.col("ts_us").abs() < MAX_US).min().alias("start"),
        *((pl.col(c).drop_nulls() % 1 == 0).all().alias(f"whole_{c}") for c in ("ts_us", "dur_us")),
        ((pl.col("ts_us").abs() >= MAX_US) | (pl.col("dur_us").abs() >= MAX_US)).sum().alias("beyond"),
    ).row(0)
    return (*facts, *(f.get_column(c).unique() for c in _IDS))


def _distinct(parts: list[pl.Series]) -> pl.Series:
    return pl.concat(parts).unique().drop_nulls() if parts else pl.Series([], dtype=pl.String)


def leading_int(col: str) -> pl.Expr:
    """The integer at the start of a raw id (``"3698(C++)"`` -> 3698; ``"Spans"``, or beyond int64 -> null)."""
    return pl.col(col).str.extract(r"^\s*(-?\d+)", 1).cast(pl.Int64, strict=False)


def id_ints(distinct: pl.Series) -> dict[str, int | None] | None:
    """:func:`leading_int` of each distinct raw id (ids repeat: a trace has a few processes and threads,
    so ids become a lookup per event instead of a regex); None where there are too many to list."""
    if len(distinct) > 100_000:
        return None
    ints = distinct.to_frame("raw").with_columns(leading_int("raw").alias("int"))
    return dict(zip(ints.get_column("raw").to_list(), ints.get_column("int").to_list(), strict=True))


def leading_int_of(col: str, ints: dict[str, int | None] | None) -> pl.Expr:
    """:func:`leading_int` of ``col`` by the lookup :func:`id_ints` made (the regex where it made none)."""
    if ints is None:
        return leading_int(col)
    return pl.col(col).replace_strict(ints, default=None, return_dtype=pl.Int64)


def us_to_ns(col: str | pl.Expr, base_us: float) -> pl.Expr:
    """Microseconds (float) to int64 ns, exact to the ns near ``base_us`` (large values lose bits); null
    beyond :data:`MAX_US`."""
    e = pl.col(col) if isinstance(col, str) else col
    base = float(int(base_us)) if abs(base_us) < MAX_US else 0.0
    ns = ((e - base) * 1000.0).round().cast(pl.Int64, strict=False) + int(base) * 1000
    return pl.when(e.abs() < MAX_US).then(ns)


def dur_to_ns(col: str) -> pl.Expr:
    """A duration in microseconds (float; none: 0) to int64 ns; null beyond :data:`MAX_US`."""
    us = pl.col(col).fill_null(0.0)
    return pl.when(us.abs() < MAX_US).then((us * 1000.0).round().cast(pl.Int64, strict=False))


def beyond_warning(params: TraceParams) -> list[str]:
    """The warning for the events left out for times beyond int64 nanoseconds (none if there are none)."""
    n = params.beyond
    return [f"{n} event{'s' if n != 1 else ''} with a start or duration beyond int64 nanoseconds left out"] if n else []


def gpu_device_stream(is_gpu: pl.Expr) -> list[pl.Expr]:
    """``device`` and ``stream`` of GPU events: from args, else the pid/tid the trace gave them."""
    return [
        pl.when(is_gpu).then(pl.coalesce("device", "pid")).cast(pl.Int32).alias("device"),
        pl.when(is_gpu).then(pl.coalesce("stream", "tid")).alias("stream"),
    ]


def devices(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """GPU properties from the trace header (``deviceProperties``; absent in CPU-only traces)."""
    d = meta.get("deviceProperties")
    return [x for x in d if isinstance(x, dict)] if isinstance(d, list) else []
