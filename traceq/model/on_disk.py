"""The model of a large trace built on disk, with a working set that does not grow with the trace.

The rules are the in-memory build's (:func:`traceq.model.build.derive`), applied to bounded pieces whose
rows wait in Arrow IPC files in a folder:

1. the key columns of every event are added chunk by chunk, numbered in the trace's order, into buckets
   of consecutive start times (cut at quantiles of a sample of the starts, taken before);
2. bucket by bucket in time order: events are numbered by start (longest first on ties, then the
   trace's order), continuing the numbers of the buckets before; host threads are nested, each
   bucket starting with the ranges the one before left open (:func:`nest_with_open_ranges`); steps are
   assigned (:func:`assign_steps`); launches and GPU work go to buckets of correlation ids;
3. correlation bucket by bucket: GPU work is linked to its launch (:func:`first_launches`, the rule of
   :func:`~traceq.model.links.link_launches`) and takes the launch's op, top op and step (runtime calls
   and GPU work wait in buckets of their own, each with the columns it gives the link);
4. :meth:`ModelOnDisk.rows_in_order` gives every event's derived columns in the trace's order, a range of
   rows at a time (:func:`~traceq.model.links.inherit_from_launch`). Only they wait in the row buckets,
   with the columns the caller asks to have carried (what it mapped already and would otherwise map
   again): the other key columns as read are the trace's own, read again with the events' other columns.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa

from traceq._utils.in_order import InOrder
from traceq._utils.spill_files import read_pool, write_options
from traceq.errors import spill_io
from traceq.model.links import first_launches, inherit_from_launch, launch_keys
from traceq.model.nesting import nest_with_open_ranges
from traceq.model.steps import as_step_kind, assign_steps, find_steps
from traceq.schema import GPU_WORK_KINDS, OP_TREE_KINDS, STEPS

#: Chrome traces of at least this many events have their model built on disk during ``ingest``.
MIN_EVENTS = 2_000_000


def builds_on_disk(n_events: int) -> bool:
    """Whether ``ingest`` builds the model of a chrome trace of ``n_events`` events on disk (and keeps
    the metrics it stores within a memory limit)."""
    return n_events >= MIN_EVENTS


#: Events per bucket of start times, of correlation ids and of rows (the working set's unit).
BUCKET_ROWS = 1 << 18

#: Every this many events, one start time is sampled to cut the time buckets.
SAMPLE_EVERY = 64

_NESTED_KINDS = (*OP_TREE_KINDS, "annotation", "runtime")
_NEST_COLUMNS = ["event_id", "kind", "ts_ns", "dur_ns", "pid", "tid"]
_LAST = 2**63 - 1
#: The columns of the row buckets (besides the carried ones): the row's position in the trace and what the
#: model derives for it (``kind``: ranges that are steps become steps, :func:`as_step_kind`).
_DERIVED = ["row", "kind", "event_id", "parent_id", "depth", "op_id", "top_op_id", "step"]
_LAUNCHED = {
    "row": pl.Int64,
    "launch_id": pl.Int64,
    "launch_op_id": pl.Int64,
    "launch_top_op_id": pl.Int64,
    "launch_step": pl.Int32,
}


class _Buckets:
    """Frames appended to numbered buckets (one Arrow IPC stream file each) and read back whole.

    Frames are split and written on a thread of their own, in order, while the caller goes on (two
    frames waiting at most); :meth:`close` waits for them.
    """

    def __init__(self, folder: Path, name: str) -> None:
        self.folder, self.name = folder, name
        self._writers: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
        self._writes = InOrder(name)

    def _path(self, bucket: int) -> Path:
        return self.folder / f"{self.name}-{bucket:06d}.arrow"

    def add(self, frame: pl.DataFrame, bucket: pl.Expr) -> None:
        """Append each row of ``frame`` to the bucket ``bucket`` gives it."""
        self._writes.submit(self._write, frame, bucket)

    def _write(self, frame: pl.DataFrame, bucket: pl.Expr) -> None:
        parts = frame.with_columns(bucket.alias("_bucket")).partition_by("_bucket", as_dict=True, include_key=False)
        with spill_io(self.folder, "write"):
            for (number,), part in parts.items():
                table = part.to_arrow(compat_level=pl.CompatLevel.newest())  # string views as they are
                writer = self._writers.get(number)  # type: ignore[arg-type]
                if writer is None:
                    path = str(self._path(number))  # type: ignore[arg-type]
                    stream = pa.ipc.new_stream(path, table.schema, options=write_options())
                    writer = self._writers[number] = stream  # type: ignore[index]
                writer.write_table(table)

    def close(self) -> None:
        """Finish every bucket's file (call before reading)."""
        try:
            self._writes.drain()
        finally:
            with spill_io(self.folder, "write"):
                for writer in self._writers.values():
                    writer.close()
            self._writers.clear()

    def read(self, bucket: int, keep: bool = False) -> pl.DataFrame | None:
        """The rows of ``bucket`` (None where none were added); its file is removed unless ``keep``."""
        path = self._path(bucket)
        if not path.exists():
            return None
        with spill_io(self.folder, "read"), pa.OSFile(str(path)) as f:
            frame = _frame(pa.ipc.open_stream(f, memory_pool=read_pool()).read_all())
        if not keep:
            path.unlink()
        return frame


def _step_rows(events: pl.DataFrame) -> pl.DataFrame:
    """The events of ``events`` that may be steps (those whose names were kept: see
    :func:`~traceq.model.steps.is_step_candidate`), with the columns :func:`find_steps` reads, their names
    in bytes of their own (not a block of the whole frame's names)."""
    steps = events.filter(pl.col("name").is_not_null()).select(
        "kind", "name", "ts_ns", "dur_ns", "pid", "tid", "event_id"
    )
    return steps.with_columns(pl.col("name").cast(pl.Categorical).cast(pl.String))


def _rows_of(events: pl.DataFrame, which: pl.Expr, columns: list[str]) -> pl.DataFrame:
    """``columns`` of the rows of ``events`` that ``which`` selects (only those columns are gathered)."""
    return events.lazy().filter(which).select(columns).collect()


def _frame(data: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(data)
    assert isinstance(frame, pl.DataFrame)
    return frame


class ModelOnDisk:
    """The key columns of a trace's events (``kind``, ``name`` of steps, times, process, thread,
    correlation and the launch keys), added chunk by chunk, and the model derived from them in ``folder``."""

    def __init__(
        self,
        folder: Path,
        starts: pl.Series,
        events: int,
        launch_keys: tuple[str, ...] = (),
        steps_from: str | None = None,
        carried: tuple[str, ...] = (),
    ) -> None:
        """``starts``: a sample of the start times (every :data:`SAMPLE_EVERY`-th event's, say) of
        about ``events`` events to come; ``launch_keys``: kept columns a launch and its GPU work share
        besides the correlation id (:func:`link_launches`); ``steps_from``: the pattern of the ranges that
        are steps, where given (:func:`find_steps`); ``carried``: columns added with the keys and handed
        back as they were by :meth:`rows_in_order`."""
        self.steps_from = steps_from
        self.carried = carried
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.launch_keys = launch_keys
        self.rows = 0
        buckets = max(1, math.ceil(events / BUCKET_ROWS))
        starts = starts.drop_nulls().sort()
        cuts = [starts[len(starts) * i // buckets] for i in range(1, buckets)] if len(starts) else []
        self._cuts = pl.Series(cuts, dtype=pl.Int64).unique(maintain_order=True)
        self._times = _Buckets(folder, "time")
        self._step_rows: list[pl.DataFrame] = []

    def add(self, frame: pl.DataFrame) -> None:
        """Append ``frame``'s rows (the key and ``carried`` columns of some events, numbered on from the rows
        added before) to their time buckets (equal times in one bucket)."""
        frame = frame.with_columns(pl.int_range(self.rows, self.rows + frame.height, dtype=pl.Int64).alias("row"))
        at = frame.get_column("ts_ns").fill_null(_LAST)  # nulls sort last
        self._times.add(frame, pl.lit(self._cuts.search_sorted(at, side="right")) if len(self._cuts) else pl.lit(0))
        self._step_rows.append(_step_rows(frame.with_columns(pl.lit(None, pl.Int64).alias("event_id"))))
        self.rows += frame.height

    def derive(self, tolerance_ns: int = 0) -> pl.DataFrame:
        """Number, nest and link the events and find their steps; returns the ``steps`` table."""
        self._times.close()
        times, buckets = self._times, len(self._cuts) + 1
        links = max(1, math.ceil(self.rows / BUCKET_ROWS))  # buckets of correlation ids
        # the step windows (their events' ids come with their buckets)
        windows = find_steps(pl.concat(self._step_rows), self.steps_from)
        calls, work = _Buckets(self.folder, "calls"), _Buckets(self.folder, "work")
        keys = launch_keys(self.launch_keys)
        self._rows = _Buckets(self.folder, "rows")
        offset, stacks, step_rows = 0, None, []
        for bucket in range(buckets):
            events = times.read(bucket)
            if events is None:
                continue
            events = events.sort(["ts_ns", pl.col("dur_ns").neg(), "row"], nulls_last=True).with_columns(
                pl.int_range(offset, offset + events.height, dtype=pl.Int64).alias("event_id")
            )
            offset += events.height
            step_rows.append(_step_rows(events))
            events = as_step_kind(events, windows)  # ranges that are steps are no ops
            host = _rows_of(events, pl.col("kind").is_in(_NESTED_KINDS) & pl.col("tid").is_not_null(), _NEST_COLUMNS)
            nested, still_open = nest_with_open_ranges(
                host if stacks is None else pl.concat([stacks, host]), tolerance_ns
            )
            if stacks is not None:  # placed with the buckets before
                nested = nested.join(stacks.select("event_id"), on="event_id", how="anti")
            stacks = still_open
            events = events.with_columns(assign_steps(events, windows).alias("step"))
            events = events.join(nested, on="event_id", how="left")
            self._rows.add(events.select(*_DERIVED, *self.carried), pl.col("row") // BUCKET_ROWS)
            linked = pl.col("correlation").is_not_null()
            by_correlation = pl.col("correlation").hash() % links
            runtime = linked & (pl.col("kind") == "runtime")
            calls.add(_rows_of(events, runtime, [*keys, "event_id", "op_id", "top_op_id", "step"]), by_correlation)
            work.add(_rows_of(events, linked & pl.col("kind").is_in(GPU_WORK_KINDS), ["row", *keys]), by_correlation)
        calls.close()
        work.close()
        self._rows.close()
        self._link(calls, work, links)
        return STEPS.conform(find_steps(pl.concat(step_rows), self.steps_from))

    def _link(self, calls: _Buckets, work: _Buckets, buckets: int) -> None:
        """GPU work's launch, and the launch's op, top op and step, into the row buckets (``launched``; GPU
        work without a launch has no row there)."""
        self._launched = _Buckets(self.folder, "launched")
        keys = launch_keys(self.launch_keys)
        for bucket in range(buckets):
            launching, launched = calls.read(bucket), work.read(bucket)
            if launching is None or launched is None:
                continue
            launches = first_launches(launching, self.launch_keys).join(
                launching.select(
                    pl.col("event_id").alias("launch_id"),
                    pl.col("op_id").alias("launch_op_id"),
                    pl.col("top_op_id").alias("launch_top_op_id"),
                    pl.col("step").alias("launch_step"),
                ),
                on="launch_id",
            )
            launched = launched.join(launches, on=keys).select(list(_LAUNCHED))
            self._launched.add(launched, pl.col("row") // BUCKET_ROWS)
        self._launched.close()

    def rows_in_order(self) -> Iterator[pl.DataFrame]:
        """Every event's derived columns (``kind``, ``event_id``, nesting, ``launch_id``, ``step``) and the
        ``carried`` ones, in the order added, a bucket of rows at a time."""
        derived = ["kind", "event_id", "parent_id", "depth", "op_id", "top_op_id", "launch_id", "step", *self.carried]
        for bucket in range(math.ceil(self.rows / BUCKET_ROWS)):
            rows = self._rows.read(bucket, keep=True)  # the events may be produced again
            assert rows is not None
            launched = self._launched.read(bucket, keep=True)
            if launched is None:
                launched = pl.DataFrame(schema=_LAUNCHED)
            rows = rows.sort("row").join(launched, on="row", how="left", maintain_order="left")
            rows = inherit_from_launch(rows, rows.get_column("kind").is_in(GPU_WORK_KINDS))
            yield rows.select(derived)
