"""Assembly: a trace's events, kept in chunks by its reader, into the canonical tables (for every format
with events: chrome traces and nsys exports).

The model is derived from a few narrow columns of every event (:data:`KEY_COLUMNS` and the launch keys),
read in one pass over the chunks, in memory or, for a large trace read with a spill folder, on disk
(:mod:`traceq.model.on_disk`). The other columns (names, args, shapes) wait in the chunks: ``events``
is a LazyFrame that maps the chunks one at a time again and joins each by position to its rows of the
kept and derived columns, since rows keep the trace's order (a model built on disk keeps only what it
derives: the key columns are mapped again with the others).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceq._utils.lazy_frames import lazy_source
from traceq._utils.memory import release_free_memory
from traceq._utils.words import count
from traceq.errors import InputError
from traceq.model import on_disk
from traceq.model.build import KEY_COLUMNS, attach, conform_threads, derive
from traceq.model.steps import is_step_candidate, kinds_made_steps
from traceq.readers.chunks import Chunks
from traceq.readers.overview import Overview
from traceq.readers.source import Progress, report_stage
from traceq.schema import EVENTS, RunTables

#: The canonical events of one chunk, as a query over the chunk's decoded columns.
ChunkEvents = Callable[[pl.LazyFrame], pl.LazyFrame]


@dataclass
class Assembled:
    """A trace's tables assembled from its events in chunks (``tables.events`` streams them chunk by
    chunk), with what the catalog counts of the events."""

    tables: RunTables
    overview: Overview
    kernel_names: pl.Series
    warnings: list[str]
    on_disk: bool


def assemble(
    path: Path,
    chunks: Chunks,
    events_of: ChunkEvents,
    threads: pl.DataFrame | None,
    *,
    tolerance_ns: int = 0,
    launch_keys: tuple[str, ...] = (),
    progress: Progress | None = None,
    spill_dir: Path | None = None,
    steps_from: str | None = None,
) -> Assembled:
    """The tables of the events in ``chunks`` (each chunk's canonical events: ``events_of``) and the
    reader's ``threads``, their model derived in memory or, for a large trace being spilled
    (``spill_dir``), on disk (:mod:`traceq.model.on_disk`). ``tolerance_ns`` and ``launch_keys`` are the
    source's nesting tolerance and the columns that must match besides the correlation id for a launch
    link (:func:`traceq.model.build.derive`); ``steps_from``: the pattern of the ranges that are steps,
    where given (:func:`traceq.model.steps.find_steps`)."""
    disk = None
    if spill_dir is not None and on_disk.builds_on_disk(decoded := sum(chunks.rows)):
        report_stage(progress, f"building the model on disk ({decoded:,} events)")
        starts = _sampled_starts(chunks, events_of)
        disk = on_disk.ModelOnDisk(spill_dir / "model", starts, decoded, launch_keys=launch_keys, steps_from=steps_from,
                                   carried=_CARRIED)  # fmt: skip
    columns = list(dict.fromkeys((*KEY_COLUMNS, *launch_keys)))  # what the model is derived from
    keys = _ModelKeys.of(path, chunks, events_of, columns, disk, steps_from)
    release_free_memory()
    if disk is None:
        assert keys.frame is not None
        derived, steps = derive(
            keys.frame.select(columns), tolerance_ns=tolerance_ns, launch_keys=launch_keys, steps_from=steps_from
        )
        model = _model_in_memory(keys, derived)
        del derived
    else:
        steps = disk.derive(tolerance_ns)
        model = _model_on_disk(disk, keys.rows)
    warnings = [f"{count(keys.negative, 'event')} had negative durations; counted as 0"] if keys.negative else []
    events = _events_by_chunk(chunks, events_of, _KEPT_WRITTEN if disk is None else ["kind", *_CARRIED], model)
    return Assembled(
        tables=RunTables(events=events, steps=steps, threads=conform_threads(threads)),
        overview=keys.overview.with_steps(kinds_made_steps(keys.candidates, steps)),  # as the events are
        kernel_names=keys.kernel_names,
        warnings=warnings,
        on_disk=disk is not None,
    )


#: Event columns kept while the model of chunked events is built (the others wait in the chunks until
#: the events are written); ``name`` only on events that may be steps (:func:`is_step_candidate`).
_KEPT = (*KEY_COLUMNS, "device", "stream")

#: The kept columns written from the kept values where the model is built in memory (``name`` is mapped
#: again with the other columns); a model built on disk keeps ``kind`` (as derived) and carries these
#: through its buckets (GPU work's device and stream need each event's kind, which the events pass would
#: otherwise map again).
_KEPT_WRITTEN = [c for c in _KEPT if c != "name"]
_CARRIED = ("device", "stream")

#: The columns of the events that may be steps, kept to count those the model makes steps.
_CANDIDATE = ("kind", "name", "ts_ns", "dur_ns")

#: Durations as the model and the events take them: a negative one counts as 0 (a warning says how many).
_DURATION = pl.col("dur_ns").clip(lower_bound=0)


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
    #: the events that may be steps and are not profiler steps (``kind``, ``name``, ``ts_ns``, ``dur_ns``)
    candidates: pl.DataFrame

    @classmethod
    def of(
        cls,
        path: Path,
        chunks: Chunks,
        events_of: ChunkEvents,
        columns: list[str],
        disk: on_disk.ModelOnDisk | None,
        steps_from: str | None = None,
    ) -> _ModelKeys:
        parts, rows, names, negative, overview, candidates = [], [], [], 0, Overview(), []
        is_kernel = pl.col("kind") == "kernel"
        is_step = is_step_candidate(pl.col("kind"), pl.col("name"), steps_from)

        def query(raw: pl.LazyFrame) -> pl.LazyFrame:
            return events_of(raw).select(_KEPT)

        read = chunks.columns_read_by(query)
        for kept in chunks.map(lambda raw: query(raw.lazy()).collect(), read=read):
            # through categorical: the names hold their own bytes, not the chunk's block of names
            names.append(kept.filter(is_kernel).get_column("name").unique().cast(pl.Categorical).cast(pl.String))
            negative += kept.filter(pl.col("dur_ns") < 0).height
            step_name = pl.when(is_step).then(pl.col("name")).alias("name")
            kept = kept.with_columns(_DURATION, step_name)
            overview += Overview.of(kept)
            candidates.append(kept.filter(is_step & (pl.col("kind") != "step")).select(_CANDIDATE))
            if disk is None:  # categorical: a step name holds its own bytes, not the chunk's block of names
                parts.append(kept.with_columns(pl.col("name").cast(pl.Categorical)))
            else:
                disk.add(kept.select(*columns, *disk.carried))
            rows.append(kept.height)
        if not sum(rows):
            raise InputError(path, "a trace with no timed events")
        frame = pl.concat(parts).with_columns(pl.col("name").cast(pl.String)) if disk is None else None
        return cls(frame, rows, pl.concat(names).unique(), negative, overview, pl.concat(candidates))


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
    kept = [c for c in _KEPT_WRITTEN if c not in derived.columns]  # derived: kind (ranges that are steps)
    model = keys.frame.select(kept).hstack(derived.get_columns())

    def chunks() -> Iterator[pl.DataFrame]:
        offset = 0
        for n in keys.rows:
            yield model.slice(offset, n)
            offset += n

    return chunks


def _model_on_disk(disk: on_disk.ModelOnDisk, rows: list[int]) -> ModelRows:
    return lambda: _rebatched(disk.rows_in_order(), rows)


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
        names = [c for c in mapped.collect_schema().names() if c in EVENTS.schema and c not in kept]
        return mapped.select(_DURATION if c == "dur_ns" else pl.col(c) for c in names)

    read = chunks.columns_read_by(others)

    def chunk_events(columns: list[str] | None) -> Iterator[pl.DataFrame]:
        for raw, rows in zip(chunks.frames(read=read), model(), strict=True):
            yield attach(others(raw.lazy()).collect(), rows)

    return lazy_source(chunk_events, EVENTS.schema)
