"""Decoded event columns kept chunk by chunk: in memory, or spilled to Arrow IPC files in a folder.

A reader decodes a file in bounded pieces; keeping them in chunks (not as one table) lets the model be
built from a few narrow columns while the wide ones (names, args, shapes) wait on disk until the events
are written. Spilled chunks are read back one at a time, only the columns asked for.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import TypeVar

import polars as pl
import pyarrow as pa

from traceq._utils.in_order import InOrder
from traceq._utils.lazy_frames import lazy_source
from traceq._utils.spill_files import read_pool, write_options
from traceq.errors import StoreError, spill_io

#: Rows per chunk: decoded bodies are gathered until a chunk has this many events (the unit the model
#: is read back in; ``events`` is written in row groups of :data:`traceq.store.ROW_GROUP_ROWS`).
CHUNK_ROWS = 1 << 16

#: Threads :meth:`Chunks.map` works on.
THREADS = 2

#: Tables waiting for the spill writer at most (each a decoded body of a few MB).
_QUEUED = 2

T = TypeVar("T")

_ARROW_TYPES = {
    pl.String(): pa.string(),
    pl.Int64(): pa.int64(),
    pl.Int32(): pa.int32(),
    pl.Float64(): pa.float64(),
    pl.List(pl.String()): pa.list_(pa.string()),
}
#: The same for tables made by Polars (``DataFrame.to_arrow``), whose strings and lists have 64-bit offsets.
_LARGE_ARROW_TYPES = {
    **_ARROW_TYPES,
    pl.String(): pa.large_string(),
    pl.List(pl.String()): pa.large_list(pa.large_string()),
}


class Chunks:
    """Event columns in chunks of about :data:`CHUNK_ROWS` rows, in the order they were added, with one
    column schema (``schema``). With ``spill_dir`` the chunks are written there, else held in memory.
    ``from_polars``: the tables added are Polars frames' (``to_arrow``), kept with their 64-bit string
    offsets (a cast to the C decoder's 32-bit ones copies every string and loads Arrow's compute functions).

    Spilled tables are written on a thread of their own, in order, while the caller decodes the next
    ones (a few tables ahead at most); reading a chunk back first waits for every write.
    """

    def __init__(
        self, schema: Mapping[str, pl.DataType], spill_dir: Path | None = None, *, from_polars: bool = False
    ) -> None:
        self.schema = dict(schema)
        self.spill_dir = spill_dir
        arrow = _LARGE_ARROW_TYPES if from_polars else _ARROW_TYPES
        self._arrow = pa.schema([(name, arrow[dtype]) for name, dtype in self.schema.items()])
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._writer: pa.ipc.RecordBatchFileWriter | None = None
        self._spills = InOrder("spill", ahead=_QUEUED)
        self._held: list[pa.Table] = []
        self._paths: list[Path] = []
        self.rows: list[int] = []
        if spill_dir is not None:
            spill_dir.mkdir(parents=True, exist_ok=True)

    def add(self, table: pa.Table) -> None:
        """Add the rows of ``table`` (some of ``schema``'s columns; those left out are null)."""
        if self.spill_dir is None:
            self._pending.append(self._conform(table))
        else:  # written as it comes: a spilled chunk is never whole in memory
            self._spills.submit(self._write, table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= CHUNK_ROWS:
            self.finish()

    def finish(self) -> None:
        """Close the chunk being gathered (call once all rows are added)."""
        if not self._pending_rows:
            return
        self.rows.append(self._pending_rows)
        self._pending_rows = 0
        if self.spill_dir is not None:
            self._spills.submit(self._close_file)
        else:
            self._held.append(pa.concat_tables(self._pending))
            self._pending = []

    def _conform(self, table: pa.Table) -> pa.Table:
        n, present = table.num_rows, set(table.column_names)
        return pa.Table.from_arrays(
            [_as(table.column(f.name), f.type) if f.name in present else pa.nulls(n, f.type) for f in self._arrow],
            schema=self._arrow,
        )

    def _spilled(self) -> None:
        """Wait for every queued write (raising the first one's error) and stop the spill thread."""
        self._spills.drain()

    def _write(self, table: pa.Table) -> None:
        with self._spill_io("write"):
            if self._writer is None:
                assert self.spill_dir is not None
                path = self.spill_dir / f"chunk-{len(self._paths):06d}.arrow"
                self._paths.append(path)
                self._writer = pa.ipc.new_file(str(path), self._arrow, options=write_options())
            self._writer.write_table(self._conform(table))

    def _close_file(self) -> None:
        if self._writer is not None:
            with self._spill_io("write"):
                self._writer.close()
            self._writer = None

    def __len__(self) -> int:
        return len(self.rows)

    def frame(self, i: int, columns: list[str] | None = None, *, read: list[str] | None = None) -> pl.DataFrame:
        """Chunk ``i`` as a frame of ``columns`` (all by default), with the schema's types; columns with
        no value in the chunk, or not in ``read`` where it is given, are constant nulls."""
        names = list(self.schema) if columns is None else columns
        table = self._table(i, names if read is None else [c for c in names if c in read])
        table = table.select([c for c in table.column_names if table.column(c).null_count < table.num_rows])
        present = table.column_names
        frame = pl.from_arrow(table) if present else pl.DataFrame(height=table.num_rows)
        assert isinstance(frame, pl.DataFrame)
        del table
        return frame.select(
            pl.col(c).cast(self.schema[c]) if c in present else pl.lit(None, self.schema[c]).alias(c) for c in names
        )

    def columns_read_by(self, query: Callable[[pl.LazyFrame], pl.LazyFrame]) -> list[str]:
        """The columns ``query`` (a function of one chunk as a LazyFrame) reads, as Polars' optimizer
        works them out: run on an empty chunk."""
        read: set[str] = set()

        def empty(columns: list[str] | None) -> Iterator[pl.DataFrame]:
            read.update(self.schema if columns is None else columns)
            yield pl.DataFrame(schema=self.schema)

        query(lazy_source(empty, self.schema)).collect()
        return [c for c in self.schema if c in read]

    def map(
        self, fn: Callable[[pl.DataFrame], T], columns: list[str] | None = None, *, read: list[str] | None = None
    ) -> Iterator[T]:
        """``fn`` of every chunk's frame (as :meth:`frame` gives it), in order, computed on
        :data:`THREADS` threads a few chunks ahead: reading a chunk back and Polars' work on it overlap
        with the next one's (a chunk alone is too small to keep two cores busy)."""
        self._spilled()  # here, not in the threads below
        mapping = InOrder("map", THREADS, ahead=THREADS)
        try:
            for i in range(len(self)):
                yield from mapping.submit(lambda i=i: fn(self.frame(i, columns, read=read)))
            yield from mapping.drain()
        finally:
            mapping.close()  # the caller may stop early

    def frames(self, columns: list[str] | None = None, *, read: list[str] | None = None) -> Iterator[pl.DataFrame]:
        """Every chunk in turn, as :meth:`frame` gives it."""
        for i in range(len(self)):
            yield self.frame(i, columns, read=read)

    def concat(self, columns: list[str] | None = None) -> pl.DataFrame:
        """All chunks as one frame of ``columns`` (all by default)."""
        names = list(self.schema) if columns is None else columns
        frames = list(self.frames(names))
        if not frames:
            return pl.DataFrame(schema={c: self.schema[c] for c in names})
        return pl.concat(frames, how="vertical_relaxed")

    def head(self, n: int, columns: list[str] | None = None) -> pl.DataFrame:
        """The first ``n`` rows of the first chunks."""
        frames, left = [], n
        for frame in self.frames(columns):
            frames.append(frame.head(left))
            left -= frames[-1].height
            if left <= 0:
                break
        if not frames:
            return self.concat(columns)
        return pl.concat(frames, how="vertical_relaxed")

    def _table(self, i: int, columns: list[str]) -> pa.Table:
        """Chunk ``i``'s table of ``columns``. Spilled chunks are read into memory, not mapped: frames
        made from them may keep a buffer, which would keep a whole mapping resident."""
        if self.spill_dir is None:
            return self._held[i].select(columns)
        self._spilled()
        fields = [self._arrow.get_field_index(c) for c in columns]
        with self._spill_io("read"), pa.OSFile(str(self._paths[i])) as f:
            options = pa.ipc.IpcReadOptions(included_fields=fields)
            table = pa.ipc.open_file(f, options=options, memory_pool=read_pool()).read_all()
        # The columns are slices of one block read from the file, and frames share fixed-width buffers
        # with Arrow: copied, a kept column holds its own bytes, not the whole block.
        return pa.Table.from_arrays(
            [pa.concat_arrays(c.chunks) if pa.types.is_primitive(c.type) else c for c in table.columns],
            names=table.column_names,
        )

    def _spill_io(self, verb: str) -> AbstractContextManager[None]:
        return spill_io(self.spill_dir, verb)

    def close(self) -> None:
        """Drop every chunk (and the spill folder)."""
        with suppress(StoreError):  # dropped anyway
            self._spilled()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._held.clear()
        if self.spill_dir is not None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)


def _as(column: pa.ChunkedArray, dtype: pa.DataType) -> pa.ChunkedArray:
    """``column`` as ``dtype`` (the C decoder's columns already are: a cast would load Arrow's compute
    functions, 80 ms at first use)."""
    return column if column.type == dtype else column.cast(dtype)
