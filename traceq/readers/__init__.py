"""Readers: one module per input format; each translates a file into the canonical tables."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceq._utils.lazy_frames import lazy_source
from traceq._utils.memory import release_free_memory
from traceq.errors import InputError
from traceq.model import on_disk
from traceq.model.build import KEY_COLUMNS, attach, conform_threads, derive
from traceq.model.kernel_classes import classify_kernels
from traceq.readers import nsys, paddle_summary
from traceq.readers.chrome import common as chrome_common
from traceq.readers.chrome import kineto, paddle
from traceq.readers.chrome.decoder import read_chrome_trace
from traceq.readers.chunks import Chunks
from traceq.readers.overview import Overview
from traceq.readers.source import Progress, check_readable, head_bytes, report_stage
from traceq.schema import EVENTS, RunTables


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
    #: Whether the model was built on disk (:mod:`traceq.model.on_disk`): what follows keeps memory bounded too.
    model_on_disk: bool = False

    def __post_init__(self) -> None:
        if self.overview is None:  # every format but a streamed chrome trace (which gives its own) is in memory
            self.overview = Overview.of(self.tables.collect().events)


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


def read_trace(path: Path, progress: Progress | None = None, *, spill_dir: Path | None = None) -> ReadResult:
    """Read one trace file of any supported format into the canonical tables.

    With ``spill_dir``, a chrome trace's decoded chunks (and a large nsys export's events) wait in that
    folder and ``tables.events`` is a LazyFrame that produces the events chunk by chunk (write it with
    ``sink_parquet``: memory stays bounded; the folder must outlive that and is the caller's to remove).
    Otherwise every table is in memory.
    """
    result = _read(path, progress, spill_dir)
    report_stage(progress, "classifying kernels")
    classify_kernels(result.tables, result.kernel_names)
    if spill_dir is None:
        result.tables.collect()
    return result


def _read(path: Path, progress: Progress | None, spill_dir: Path | None) -> ReadResult:
    fmt = sniff_format(path)
    if fmt == "nsys_sqlite":
        return _read_nsys(path, progress, spill_dir)
    if fmt == paddle_summary.FORMAT:
        tables, warnings = paddle_summary.read_paddle_summary(path)
        return ReadResult(
            tables=tables,
            source_format=fmt,
            flavour=paddle_summary.FLAVOUR,
            profiler_version="paddle summary text",
            warnings=warnings,
        )
    trace = read_chrome_trace(path, progress, spill_dir=spill_dir)
    report_stage(progress, "building the model")
    flavour = paddle if paddle.looks_like(trace) else kineto
    params = flavour.params(trace)
    events_of = functools.partial(flavour.events, params=params)
    built = _model_of_chunks(path, trace.chunks, events_of, params.tolerance_ns, progress, spill_dir)
    tables = RunTables(events=built.events, steps=built.steps, threads=conform_threads(flavour.threads(trace)))
    warnings = [*trace.warnings, *built.warnings]
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
        overview=built.overview,
        kernel_names=built.kernel_names,
        model_on_disk=built.on_disk,
    )


def _read_nsys(path: Path, progress: Progress | None, spill_dir: Path | None) -> ReadResult:
    export = nsys.read_nsys(path, progress, spill_dir=spill_dir)
    meta = export.meta
    if export.chunks is None:
        assert export.tables is not None and isinstance(export.tables.events, pl.DataFrame)
        tables, overview, kernel_names = export.tables, Overview.of(export.tables.events), None
        warnings, model_on_disk = list(meta["warnings"]), False
    else:
        report_stage(progress, "building the model")
        built = _model_of_chunks(path, export.chunks, lambda raw: raw, 0, progress, spill_dir, launch_keys=("pid",))
        tables = RunTables(events=built.events, steps=built.steps, threads=conform_threads(export.threads))
        overview, kernel_names, model_on_disk = built.overview, built.kernel_names, built.on_disk
        warnings = [*meta["warnings"], *built.warnings]
    warnings += nsys.as_one_window(tables, overview.start_ns, overview.end_ns)
    return ReadResult(
        tables=tables,
        source_format="nsys_sqlite",
        flavour=meta["flavour"],
        profiler_version=meta["profiler_version"],
        devices=meta["devices"],
        clock_offset_ns=None,
        warnings=warnings,
        overview=overview,
        kernel_names=kernel_names,
        model_on_disk=model_on_disk,
    )


#: The canonical events of one chunk, as a query over the chunk's decoded columns.
ChunkEvents = Callable[[pl.LazyFrame], pl.LazyFrame]


@dataclass
class _ChunkedModel:
    """The model of events kept in chunks: ``events`` streams them chunk by chunk."""

    events: pl.LazyFrame
    steps: pl.DataFrame
    overview: Overview
    kernel_names: pl.Series
    warnings: list[str]
    on_disk: bool


def _model_of_chunks(
    path: Path,
    chunks: Chunks,
    events_of: ChunkEvents,
    tolerance_ns: int,
    progress: Progress | None,
    spill_dir: Path | None,
    launch_keys: tuple[str, ...] = (),
) -> _ChunkedModel:
    """Derive the model of the events in ``chunks`` (each chunk's canonical events: ``events_of``), in
    memory or, for a large trace being spilled, on disk (:mod:`traceq.model.on_disk`)."""
    disk = None
    if spill_dir is not None and on_disk.builds_on_disk(decoded := sum(chunks.rows)):
        report_stage(progress, f"building the model on disk ({decoded:,} events)")
        starts = _sampled_starts(chunks, events_of)
        disk = on_disk.ModelOnDisk(spill_dir / "model", starts, decoded, launch_keys=launch_keys)
    keys = _ModelKeys.of(path, chunks, events_of, disk)
    release_free_memory()
    if disk is None:
        assert keys.frame is not None
        columns = list(dict.fromkeys((*KEY_COLUMNS, *launch_keys)))
        derived, steps = derive(keys.frame.select(columns), tolerance_ns=tolerance_ns, launch_keys=launch_keys)
        model = _model_in_memory(keys, derived)
        del derived
    else:
        steps = disk.derive(tolerance_ns)
        model = _model_on_disk(disk, keys.rows)
    warnings = [f"{keys.negative} events had negative durations; counted as 0"] if keys.negative else []
    return _ChunkedModel(
        events=_events_by_chunk(chunks, events_of, _KEPT_WRITTEN, model),
        steps=steps,
        overview=keys.overview,
        kernel_names=keys.kernel_names,
        warnings=warnings,
        on_disk=disk is not None,
    )


#: Event columns kept while the model of chunked events is built (the others wait in the chunks until
#: the events are written); ``name`` only on step events.
_KEPT = (*KEY_COLUMNS, "device", "stream")

#: The kept columns written from the kept values (``name`` is mapped again with the other columns).
_KEPT_WRITTEN = [c for c in _KEPT if c != "name"]


@dataclass
class _ModelKeys:
    """The kept columns of every event of a chunked trace, in the trace's order, from one pass over its
    chunks: what the model build needs, and what the other columns are joined back to by position. They
    are held in ``frame``, or in ``disk`` where the model is built on disk (``frame`` is then None)."""

    frame: pl.DataFrame | None
    rows: list[int]
    kernel_names: pl.Series
    negative: int
    overview: Overview

    @classmethod
    def of(cls, path: Path, chunks: Chunks, events_of: ChunkEvents, disk: on_disk.ModelOnDisk | None) -> _ModelKeys:
        parts, rows, names, negative, overview = [], [], [], 0, Overview()
        is_kernel, is_step = pl.col("kind") == "kernel", pl.col("kind") == "step"

        def query(raw: pl.LazyFrame) -> pl.LazyFrame:
            return events_of(raw).select(_KEPT)

        read = chunks.columns_read_by(query)
        for kept in chunks.map(lambda raw: query(raw.lazy()).collect(), read=read):
            # through categorical: the names hold their own bytes, not the chunk's block of names
            names.append(kept.filter(is_kernel).get_column("name").unique().cast(pl.Categorical).cast(pl.String))
            negative += kept.filter(pl.col("dur_ns") < 0).height
            step_name = pl.when(is_step).then(pl.col("name")).alias("name")
            kept = kept.with_columns(pl.col("dur_ns").clip(lower_bound=0), step_name)
            overview += Overview.of(kept)
            if disk is None:  # categorical: a step name holds its own bytes, not the chunk's block of names
                parts.append(kept.with_columns(pl.col("name").cast(pl.Categorical)))
            else:
                disk.add(kept)
            rows.append(kept.height)
        if not sum(rows):
            raise InputError(path, "a trace with no timed events")
        frame = pl.concat(parts).with_columns(pl.col("name").cast(pl.String)) if disk is None else None
        return cls(frame, rows, pl.concat(names).unique(), negative, overview)


def _sampled_starts(chunks: Chunks, events_of: ChunkEvents) -> pl.Series:
    """The start times (ns) of every :data:`on_disk.SAMPLE_EVERY`-th decoded event of each chunk."""

    def query(raw: pl.LazyFrame) -> pl.LazyFrame:
        return events_of(raw).select("ts_ns")

    read = chunks.columns_read_by(query)
    every = on_disk.SAMPLE_EVERY
    parts = chunks.map(lambda raw: query(raw.gather_every(every).lazy()).collect().get_column("ts_ns"), read=read)
    return pl.concat(list(parts))


#: A chunked trace's kept and derived columns, chunk by chunk (the rows of each decoded chunk in turn).
ModelRows = Callable[[], Iterator[pl.DataFrame]]


def _model_in_memory(keys: _ModelKeys, derived: pl.DataFrame) -> ModelRows:
    assert keys.frame is not None
    model = keys.frame.select(_KEPT_WRITTEN).hstack(derived.get_columns())

    def chunks() -> Iterator[pl.DataFrame]:
        offset = 0
        for n in keys.rows:
            yield model.slice(offset, n)
            offset += n

    return chunks


def _model_on_disk(disk: on_disk.ModelOnDisk, rows: list[int]) -> ModelRows:
    return lambda: _rebatched(disk.rows_in_order(_KEPT_WRITTEN), rows)


def _rebatched(frames: Iterator[pl.DataFrame], sizes: list[int]) -> Iterator[pl.DataFrame]:
    """The rows of ``frames`` in frames of ``sizes`` rows."""
    held: list[pl.DataFrame] = []
    have = 0
    for size in sizes:
        while have < size:
            frame = next(frames)
            held.append(frame)
            have += frame.height
        whole = pl.concat(held) if len(held) > 1 else held[0]
        yield whole.slice(0, size)
        held, have = [whole.slice(size)], have - size


def _events_by_chunk(chunks: Chunks, events_of: ChunkEvents, kept: list[str], model: ModelRows) -> pl.LazyFrame:
    """The ``events`` table as a LazyFrame that maps the chunks one at a time, joined by position to
    their ``kept`` and derived columns (``model``)."""

    def others(raw: pl.LazyFrame) -> pl.LazyFrame:
        mapped = events_of(raw)
        return mapped.select(c for c in mapped.collect_schema().names() if c in EVENTS.schema and c not in kept)

    read = chunks.columns_read_by(others)

    def chunk_events(columns: list[str] | None) -> Iterator[pl.DataFrame]:
        for raw, rows in zip(chunks.frames(read=read), model(), strict=True):
            yield attach(others(raw.lazy()).collect(), rows)

    return lazy_source(chunk_events, EVENTS.schema)
