"""Nsight Systems SQLite exports (``nsys export --type sqlite``, nsys 2021.3 to 2026.x) -> canonical events.

The export is opened read-only and immutable (no journal, no lock, no index is ever created in it) and
read table by table; one in WAL mode with frames not yet written back into it is copied with its WAL into
a private temporary folder and the copy read, so the frames count and the input is never written. Read
table by table into Arrow through the ADBC SQLite driver. Tables exist only when their data was
traced, so a missing table means "not traced". Columns are feature-tested with ``PRAGMA table_info``.

Mapping: kernels, memcpy, memset -> GPU work (pid = launching process, tid = stream); CUDA runtime and
driver calls (``eventClass`` 0/1; ``_vNNNN`` name suffixes dropped) -> ``runtime``; synchronisation
records -> ``sync``; NVTX push/pop and start/end ranges -> ``step`` when named like a profiler step,
``op`` when PyTorch's ``emit_nvtx`` made them (their text carries an ``op_id``: ``aten::mm, op_id = 12,
sizes = [[2, 3]]`` is reduced to the op name, the rest kept in ``args`` and the sizes in ``input_shapes``),
``annotation`` otherwise (a user's range such as ``backward``, a library's such as NCCL's); NVTX marks ->
``marker``.
Correlation ids repeat across processes, so GPU work is joined to its launch on (correlation, process).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import polars as pl
import pyarrow as pa

from traceq._utils.in_order import InOrder
from traceq._utils.jobs import default_jobs
from traceq._utils.leftovers import private_dir
from traceq._utils.memory import release_free_memory
from traceq.errors import InputError
from traceq.model import on_disk
from traceq.model.steps import STEP_NAME, WHOLE_CAPTURE
from traceq.readers.chunks import Chunks
from traceq.readers.source import Progress, TruncatedInput, is_gzip, iter_content, report_stage
from traceq.schema import EVENTS, NSYS, RunTables

FLAVOUR = NSYS
SQLITE_MAGIC = b"SQLite format 3\x00"
#: nsys's ``copyKind`` values (ENUM_CUDA_MEMCPY_OPER), for exports that lack the ENUM tables.
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP", 11: "Managed HtoD", 12: "Managed DtoH", 13: "Managed DtoD"}  # fmt: skip
SYNC_TYPES = {1: "Event sync", 2: "Stream wait event", 3: "Stream sync", 4: "Context sync"}
NVTX_RANGE_TYPES = (59, 60)  # push/pop, start/end
NVTX_MARK = 34
#: PyTorch ``emit_nvtx`` range text: ``name[, seq = N][, op_id = N][, sizes = [...]][, input_op_ids = ...]``,
#: the name as short as it can be, the sizes too; a text with a line break in its name has no parts (see
#: :func:`emit_nvtx_parts`). The parts after the name, the name's end being where they match to the end:
_EMIT_NVTX_TAIL = r"(?:, seq = \d+)?(?:, op_id = \d+)?(?:, sizes = \[.*?\])?(?:, input_op_ids = .*)?$"
#: ... and what comes before the sizes in them.
_BEFORE_SIZES = r"^(?:, seq = \d+)?(?:, op_id = \d+)?, sizes = "
API_SUFFIX = r"_v\d+$"
_GPU_TABLES = {
    "kernel": "CUPTI_ACTIVITY_KIND_KERNEL",
    "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
    "memset": "CUPTI_ACTIVITY_KIND_MEMSET",
    "sync": "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
}
#: Source columns kept in ``args`` per table (the rest of the export stays in the export).
_ARG_COLUMNS = {
    "kernel": ["gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
               "staticSharedMemory", "dynamicSharedMemory", "contextId", "graphId", "graphNodeId"],
    "memcpy": ["copyKind", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId", "contextId"],
    "memset": ["value", "memKind", "contextId"],
    "sync": ["syncType", "eventId", "contextId"],
    "runtime": ["eventClass", "returnValue"],
}  # fmt: skip
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_NVTX = "NVTX_EVENTS"
#: Threads that read the export (each on its own connection) at most; large tables are read in parts.
_READ_THREADS = 8
#: The columns read as integers (ids, times, sizes), where a value of another type is refused.
_INTEGER_COLUMNS = frozenset(
    ("start", "end", "correlationId", "globalPid", "globalTid", "deviceId", "streamId", "bytes", "nameId",
     "demangledName", "shortName", "eventType", "textId", "domainId", "copyKind", "syncType")
)  # fmt: skip
#: A table read is split into parts (rowid ranges) of at least this many rows, one per reading thread.
PART_ROWS = 1 << 19
#: Rows per part where the events go to chunks on disk (a few parts are in memory at once).
CHUNK_PART_ROWS = 1 << 16
#: Up to this many parts, a table is cut into rowid ranges however sparse its rowids (empty ranges cost
#: a query each); beyond it, where rowids are sparse, by row counts.
MAX_RANGE_PARTS = 1 << 12
#: The columns of the events of an export read into chunks (its reads' canonical columns).
CHUNK_SCHEMA = {c: EVENTS.schema[c] for c in ("kind", "category", "name", "ts_ns", "dur_ns", "pid", "tid", "device",
                                              "stream", "correlation", "bytes", "input_shapes", "args")}  # fmt: skip
NO_STEPS = (
    "no step ranges (no profiler-step NVTX ranges, no ranges named like steps, no optimizer steps): the whole "
    "capture is one window (step 0); name the ranges with --steps-from REGEX"
)
_EXPORT_MARKERS = {"StringIds", _RUNTIME, _NVTX, "TARGET_INFO_SYSTEM_ENV", "META_DATA_EXPORT", "EXPORT_META_DATA"}


def is_sqlite(head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC)


@dataclass(frozen=True)
class _Read:
    """One table read, ``select COLUMNS from TABLE [where WHERE]``; it can be run in rowid ranges."""

    table: str
    columns: str
    where: str | None = None

    def sql(self, rows: tuple[int, int] | None = None) -> str:
        """The statement, restricted to ``rows`` (first and last rowid) if given."""
        conditions = [c for c in (self.where, rows and f"rowid between {rows[0]} and {rows[1]}") if c]
        where = f" where {' and '.join(conditions)}" if conditions else ""
        return f'select {self.columns} from "{self.table}"{where}'


class _Connection:
    """A connection to an export through the ADBC SQLite driver's own objects, not its DB-API layer: that
    layer imports pyarrow's datasets and compute, 43-67 ms here, up to a tenth of the ingest of a 23 MB capture
    (benchmarks/README.md, twenty-third round)."""

    def __init__(self, uri: str) -> None:
        import adbc_driver_manager
        import adbc_driver_sqlite

        self._database = adbc_driver_sqlite.connect(uri)
        try:
            self._connection = adbc_driver_manager.AdbcConnection(self._database)
        except BaseException:
            self._database.close()
            raise

    def arrow(self, sql: str) -> pa.Table:
        """``sql``'s rows, whole."""
        import adbc_driver_manager

        statement = adbc_driver_manager.AdbcStatement(self._connection)
        try:
            statement.set_sql_query(sql)
            stream, _ = statement.execute_query()
            return pa.RecordBatchReader.from_stream(stream).read_all()
        finally:
            statement.close()

    def close(self) -> None:
        try:
            self._connection.close()
        finally:
            self._database.close()


class _Export:
    """A read-only view of one export: table names, columns and Arrow reads."""

    def __init__(self, path: Path, source: Path, immutable: bool = True) -> None:
        self.source = source
        # a private copy (with its WAL) is opened as a database, so that SQLite reads the WAL's frames
        self.uri = f"file:{quote(str(path.resolve()))}" + ("?mode=ro&immutable=1" if immutable else "")
        try:
            self.con = _Connection(self.uri)
            self.tables = set(self._column("select name from sqlite_master where type = 'table'"))
        except InputError:
            raise
        except Exception as e:  # the driver raises its own error types
            raise InputError(source, f"not a readable SQLite database ({_short(e)})") from None
        self._columns: dict[str, set[str]] = {}

    def _column(self, sql: str) -> list[Any]:
        return self.query(sql).to_series(0).to_list()

    def query(self, sql: str, con: _Connection | None = None) -> pl.DataFrame:
        """``sql``'s result as a frame, on this export's connection or ``con``."""
        try:
            return pl.from_arrow((con or self.con).arrow(sql))  # type: ignore[return-value]
        except Exception as e:
            raise InputError(self.source, f"corrupt or unreadable nsys export ({_short(e)})") from None

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = set(self._column(f"select name from pragma_table_info('{table}')"))
        return self._columns[table]

    def has(self, table: str, *cols: str) -> bool:
        return table in self.tables and set(cols) <= self.columns(table)

    def read_all(self, reads: dict[str, _Read]) -> dict[str, pl.DataFrame]:
        """Run several table reads at once on a few threads, each part on its own read-only connection
        (the driver reads SQLite without the GIL). A large table is read in rowid ranges of at least
        :data:`PART_ROWS` rows, concatenated in rowid order: the rows a whole-table read gives, in its
        order, with every core reading."""
        threads = min(_READ_THREADS, default_jobs())
        parts = [(name, rows) for name, read in reads.items() for rows in self._ranges(read.table, threads)]
        if len(parts) <= 1:
            return {name: self.query(read.sql()) for name, read in reads.items()}
        with ThreadPoolExecutor(min(threads, len(parts))) as pool:
            futures = [(name, pool.submit(self._read_rows, reads[name], rows)) for name, rows in parts]
            done: dict[str, list[pl.DataFrame]] = {}  # each name's parts, in rowid order
            for name, future in futures:
                done.setdefault(name, []).append(future.result())
        return {name: pl.concat(frames, rechunk=False) for name, frames in done.items()}

    def _ranges(self, table: str, threads: int) -> list[tuple[int, int] | None]:
        """Rowid ranges splitting ``table`` into about equal parts of :data:`PART_ROWS` rows or more
        (``[None]``: the whole table in one read)."""
        if threads <= 1:
            return [None]
        lo, hi = self.rowids(table)
        if lo is None or hi - lo + 1 < 2 * PART_ROWS:
            return [None]
        n = min(threads, (hi - lo + 1) // PART_ROWS)
        step = -(-(hi - lo + 1) // n)
        return [(a, min(a + step - 1, hi)) for a in range(lo, hi + 1, step)]

    def rowids(self, table: str) -> tuple[int | None, int | None]:
        """The first and last rowid of ``table`` (None, None where it is empty)."""
        # apart: SQLite finds a lone min() or max() of the rowid in the index; together, it scans the table
        lo, hi = self.query(f'select (select min(rowid) from "{table}"), (select max(rowid) from "{table}")').row(0)
        return lo, hi

    def rows(self, table: str) -> int:
        """How many rows ``table`` holds."""
        return int(self.query(f'select count(*) from "{table}"').item())

    def parts(self, table: str, part_rows: int) -> list[tuple[int, int]]:
        """Rowid ranges (first and last rowid) of about ``part_rows`` rows each covering ``table``, in
        order: ranges of ``part_rows`` rowids where rowids are dense (an export's), else cut every
        ``part_rows`` rows (a row at rowid 2^62 makes no 2^46 empty parts)."""
        lo, hi = self.rowids(table)
        if lo is None or hi is None:
            return []
        # few ranges need no count (a scan of the table, which would meet a corrupt page before any part)
        if (hi - lo) // part_rows < MAX_RANGE_PARTS or hi - lo + 1 <= 2 * self.rows(table):
            return [(a, min(a + part_rows - 1, hi)) for a in range(lo, hi + 1, part_rows)]
        ranges: list[tuple[int, int]] = []
        while lo <= hi:
            after = f'select rowid from "{table}" where rowid >= {lo} order by rowid'
            last = self.query(f"select ({after} limit 1 offset {part_rows - 1})").item()
            ranges.append((lo, hi if last is None else last))
            lo = ranges[-1][1] + 1
        return ranges

    def mistyped(self) -> str | None:
        """The first column read as integers that holds something else (a BLOB, text), said in words."""
        for table in sorted(self.tables & {*_GPU_TABLES.values(), _RUNTIME, _NVTX}):
            for col in sorted(self.columns(table) & _INTEGER_COLUMNS):
                kind = f'typeof("{col}")'
                found = self.query(f"select {kind} from \"{table}\" where {kind} not in ('integer', 'null') limit 1")
                if found.height:
                    return f"column {col} of {table} holds {found.item()} values where integers belong"
        return None

    def read_parts(
        self,
        reads: dict[str, tuple[_Read, list[tuple[int, int]]]],
        shape: Callable[[str, pl.DataFrame], pl.DataFrame],
    ) -> Iterator[pl.DataFrame]:
        """``shape(name, part)`` of every part of each read (with its table's rowid ranges, :meth:`parts`)
        in turn, in rowid order, read and shaped on a few threads (each part on its own read-only
        connection), a few parts ahead."""

        def run(name: str, rows: tuple[int, int]) -> pl.DataFrame:
            return shape(name, self._read_rows(reads[name][0], rows))

        threads = min(_READ_THREADS, default_jobs())
        reading = InOrder("nsys-read", threads, ahead=threads)
        try:
            for name, (_, ranges) in reads.items():
                for rows in ranges:
                    yield from reading.submit(run, name, rows)
            yield from reading.drain()
        finally:
            reading.close()

    def _read_rows(self, read: _Read, rows: tuple[int, int] | None) -> pl.DataFrame:
        """``read`` restricted to ``rows`` (first and last rowid), on a read-only connection of its own
        (for a reading thread)."""
        con = _Connection(self.uri)
        try:
            return self.query(read.sql(rows), con)
        finally:
            con.close()

    def close(self) -> None:
        self.con.close()


#: The bytes of a WAL file's header: a longer WAL holds frames not yet written back into the database.
WAL_HEADER = 32


def pending_wal(path: Path) -> Path | None:
    """The WAL file beside an SQLite database in WAL mode (header bytes 18-19 are 2) when it holds frames
    not yet written back into the database; None otherwise (immutable reads skip a WAL)."""
    wal = path.with_name(path.name + "-wal")
    try:
        with path.open("rb") as f:
            head = f.read(20)
        pending = wal.is_file() and wal.stat().st_size > WAL_HEADER
    except OSError:
        return None
    return wal if pending and len(head) == 20 and head[18:20] == b"\x02\x02" else None


@contextlib.contextmanager
def _local_sqlite(path: Path, progress: Progress | None) -> Iterator[tuple[Path, bool]]:
    """The export as a plain SQLite file and whether it may be opened immutable: the file itself; a
    ``.sqlite.gz`` expanded into a temporary file; a database with a pending WAL copied with it into a
    private temporary folder (opened there as a database, its WAL read and the input left untouched)."""
    wal = None if is_gzip(path) else pending_wal(path)
    if not is_gzip(path) and wal is None:
        if progress:
            progress(path.stat().st_size)
        yield path, True
        return
    tmp = private_dir("traceq-nsys")
    try:
        out = tmp / "export.sqlite"
        if wal is not None:
            shutil.copyfile(path, out)
            shutil.copyfile(wal, tmp / "export.sqlite-wal")
            if progress:
                progress(path.stat().st_size)
            yield out, False
            return
        with out.open("wb") as f:
            try:
                for block in iter_content(path, progress):
                    f.write(block)
            except TruncatedInput:
                raise InputError(path, "the gzip stream ends early; a cut-short SQLite file cannot be read") from None
        yield out, True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class NsysRead:
    """An export read: its events in chunks of :data:`CHUNK_SCHEMA` (for :mod:`traceq.readers.assemble`),
    its threads and what the catalog records about it."""

    meta: dict[str, Any]
    chunks: Chunks
    threads: pl.DataFrame | None = None


def read_nsys(path: Path, progress: Progress | None = None, *, spill_dir: Path | None = None) -> NsysRead:
    """Read an nsys SQLite export: its canonical events in chunks (held in memory, or, with ``spill_dir``,
    where the export holds enough rows for the model to be built on disk, spilled there), its threads
    and what the catalog records about it."""
    with _local_sqlite(path, progress) as (local, immutable):
        with local.open("rb") as f:
            if not is_sqlite(f.read(16)):
                raise InputError(path, "not an SQLite file")
        export = _Export(local, path, immutable)
        try:
            return _read(export, path, progress, spill_dir)
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException, pa.ArrowException) as e:  # wrong types
            raise InputError(path, f"corrupt nsys export: {export.mistyped() or _short(e)}") from None
        finally:
            export.close()


def _read(export: _Export, path: Path, progress: Progress | None, spill_dir: Path | None) -> NsysRead:
    if not (_EXPORT_MARKERS & export.tables) or "StringIds" not in export.tables:
        raise InputError(path, "an SQLite file that is not an Nsight Systems export (no StringIds or CUPTI tables)")
    warnings: list[str] = []
    reads: dict[str, _Read] = {}
    for kind, table in _GPU_TABLES.items():
        if (read := _gpu_read(export, kind, table)) is not None:
            reads[kind] = read
    for name, plan in (("runtime", _runtime_read), ("nvtx", _nvtx_read)):
        if (read := plan(export)) is not None:
            reads[name] = read
    if not export.has(_RUNTIME) and not any(t in export.tables for t in _GPU_TABLES.values()):
        warnings.append("no CUDA tables in the export: CUDA was not traced")
    # as text: a BLOB among the names (valid UTF-8 or not) would be binary in Arrow
    strings = export.read_all({"strings": _Read("StringIds", "id, CAST(value AS TEXT) AS value")})["strings"]
    strings = _unique_ids(strings, warnings)
    shape = _Shaping(export, strings, reads)
    meta = {
        "flavour": FLAVOUR,
        "profiler_version": _version(export),
        "devices": _devices(export),
        "warnings": warnings,
    }
    # the rows of the tables: an upper bound (rowids may have gaps, and NVTX has rows of other types); from
    # the rowids, not counted (a scan of every table, which would meet a corrupt page before any part)
    spans = [export.rowids(read.table) for read in reads.values()] if spill_dir is not None else []
    large = spill_dir is not None and on_disk.builds_on_disk(sum(hi - lo + 1 for lo, hi in spans if lo is not None))
    chunks = Chunks(CHUNK_SCHEMA, spill_dir / "nsys" if large and spill_dir is not None else None, from_polars=True)
    try:
        for part in _read_in_parts(export, reads, shape, progress) if large else _read_whole(export, reads, shape):
            if not part.is_empty():
                chunks.add(part.to_arrow())
        chunks.finish()
    except BaseException:
        chunks.close()
        raise
    if not sum(chunks.rows):
        chunks.close()
        raise InputError(path, "an nsys export with no CUDA or NVTX events")
    release_free_memory()  # what the SQLite reads allocated and freed, before the model build
    return NsysRead(meta, chunks, _threads(export, strings))


def _read_whole(export: _Export, reads: dict[str, _Read], shape: _Shaping) -> Iterator[pl.DataFrame]:
    """Each read's canonical events, every table read whole (in rowid ranges on the reading threads)."""
    raw = export.read_all(reads)
    for name in list(raw):
        yield shape(name, raw.pop(name))


def _read_in_parts(
    export: _Export, reads: dict[str, _Read], shape: _Shaping, progress: Progress | None
) -> Iterator[pl.DataFrame]:
    """Each read's canonical events in parts of :data:`CHUNK_PART_ROWS` rows (a few in memory at once)."""
    parts = {name: (read, export.parts(read.table, CHUNK_PART_ROWS)) for name, read in reads.items()}
    n_parts = sum(len(ranges) for _, ranges in parts.values())
    for k, part in enumerate(export.read_parts(parts, shape), 1):
        report_stage(progress, f"reading the export in parts: {k:,} of {n_parts:,}")
        yield part


def as_one_window(tables: RunTables, start_ns: int | None, end_ns: int | None) -> list[str]:
    """Where ``tables`` has no profiler steps, make the capture (``start_ns`` to ``end_ns``) its one
    window, step 0 of every event; the warning that says so (none where there are steps)."""
    if not tables.steps.is_empty():
        return []
    tables.steps = whole_capture(start_ns, end_ns)
    tables.events = tables.events.with_columns(step=pl.lit(0, pl.Int32))
    return [NO_STEPS]


class _Shaping:
    """Raw rows of one of an export's reads -> canonical events (with the export's string lookups and
    each read table's columns, found here: shaping runs on the reading threads, off the connection)."""

    def __init__(self, export: _Export, strings: pl.DataFrame, reads: dict[str, _Read]) -> None:
        self.columns = {name: export.columns(read.table) for name, read in reads.items()}
        self.strings = strings
        # the API version suffix stripped once per distinct string, not once per call
        self.api_names = strings.with_columns(pl.col("value").cast(pl.String).str.replace(API_SUFFIX, ""))

    def __call__(self, name: str, raw: pl.DataFrame) -> pl.DataFrame:
        if name in _GPU_TABLES:
            events = _gpu_events(raw, name, self.columns[name], self.strings)
        elif name == "runtime":
            events = _runtime_events(raw, self.columns[name], self.api_names)
        else:
            events = _nvtx_events(raw, self.strings)
        return events.filter(pl.col("ts_ns").is_not_null())


def _unique_ids(strings: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """``StringIds`` with one text per id: nsys writes each id once, and a join on a repeated id would
    repeat the events named by it; repeated ids keep their first row, with a warning."""
    unique = strings.unique("id", keep="first", maintain_order=True)
    if unique.height < strings.height:
        differing = strings.unique().height - unique.height
        warnings.append(
            f"StringIds repeats {strings.height - unique.height:,} ids ({differing:,} with another text); "
            "the first text of each id is used"
        )
    return unique


def _names(frame: pl.DataFrame, strings: pl.DataFrame, id_col: str, out: str) -> pl.DataFrame:
    lookup = strings.rename({"id": id_col, "value": out})
    return frame.join(lookup, on=id_col, how="left")


def _pid(col: str) -> pl.Expr:
    return ((pl.col(col) // (1 << 24)) % (1 << 24)).cast(pl.Int64)


def _tid(col: str) -> pl.Expr:
    return (pl.col(col) % (1 << 24)).cast(pl.Int64)


def _args(frame: pl.DataFrame, cols: list[str]) -> pl.Expr:
    present = [c for c in cols if c in frame.columns]
    if not present:
        return pl.lit("{}")
    return pl.struct(present).struct.json_encode()


def _gpu_read(export: _Export, kind: str, table: str) -> _Read | None:
    """The read of one GPU activity table, or None where it was not traced."""
    if not export.has(table, "start", "end", "correlationId", "globalPid"):
        return None
    cols = export.columns(table)
    wanted = ["start", "end", "correlationId", "globalPid", "deviceId", "streamId", "bytes", "demangledName",
              "shortName", *_ARG_COLUMNS[kind]]  # fmt: skip
    wanted = list(dict.fromkeys(c for c in wanted if c in cols))
    return _Read(table, ", ".join(_quoted(c) for c in wanted))


def _gpu_events(raw: pl.DataFrame, kind: str, cols: set[str], strings: pl.DataFrame) -> pl.DataFrame:
    extra = [c for c in _ARG_COLUMNS[kind] if c in cols]
    if kind == "kernel":
        raw = _names(raw, strings, "demangledName" if "demangledName" in cols else "shortName", "name")
        if "shortName" in cols:
            raw = _names(raw, strings, "shortName", "short_name")
            extra = [*extra, "short_name"]
    elif kind == "memcpy":
        label = pl.col("copyKind").replace_strict(COPY_KINDS, default=None) if "copyKind" in cols else pl.lit(None)
        raw = raw.with_columns(pl.format("Memcpy {}", label.fill_null("?")).alias("name"))
    elif kind == "memset":
        raw = raw.with_columns(pl.lit("Memset").alias("name"))
    else:
        label = pl.col("syncType").replace_strict(SYNC_TYPES, default=None) if "syncType" in cols else pl.lit(None)
        raw = raw.with_columns(label.fill_null("Synchronization").alias("name"))
    return raw.select(
        pl.lit(kind).alias("kind"),
        pl.lit(_GPU_TABLES[kind]).alias("category"),
        pl.col("name").cast(pl.String),
        pl.col("start").alias("ts_ns"),
        (pl.col("end") - pl.col("start")).alias("dur_ns"),
        _pid("globalPid").alias("pid"),
        pl.col("streamId").cast(pl.Int64).alias("tid") if "streamId" in cols else pl.lit(None, pl.Int64).alias("tid"),
        pl.col("deviceId").cast(pl.Int32).alias("device") if "deviceId" in cols else pl.lit(None, pl.Int32),
        pl.col("streamId").cast(pl.Int64).alias("stream") if "streamId" in cols else pl.lit(None, pl.Int64),
        pl.col("correlationId").cast(pl.Int64).alias("correlation"),
        (pl.col("bytes").cast(pl.Int64) if "bytes" in cols else pl.lit(None, pl.Int64)).alias("bytes"),
        _args(raw, extra).alias("args"),
    )


def _runtime_read(export: _Export) -> _Read | None:
    """The read of the CUDA runtime/driver call table, or None where it was not traced."""
    if not export.has(_RUNTIME, "start", "end", "globalTid", "correlationId", "nameId"):
        return None
    extra = [c for c in _ARG_COLUMNS["runtime"] if c in export.columns(_RUNTIME)]
    wanted = ", ".join(_quoted(c) for c in ["start", "end", "globalTid", "correlationId", "nameId", *extra])
    return _Read(_RUNTIME, wanted)


def _runtime_events(raw: pl.DataFrame, cols: set[str], api_names: pl.DataFrame) -> pl.DataFrame:
    extra = [c for c in _ARG_COLUMNS["runtime"] if c in cols]
    raw = _names(raw, api_names, "nameId", "name")
    api = pl.col("eventClass") if "eventClass" in cols else pl.lit(0)
    return raw.select(
        pl.lit("runtime").alias("kind"),
        pl.when(api == 1).then(pl.lit("cuda_driver")).otherwise(pl.lit("cuda_runtime")).alias("category"),
        pl.col("name").cast(pl.String),
        pl.col("start").alias("ts_ns"),
        (pl.col("end") - pl.col("start")).alias("dur_ns"),
        _pid("globalTid").alias("pid"),
        _tid("globalTid").alias("tid"),
        pl.col("correlationId").cast(pl.Int64).alias("correlation"),
        _args(raw, extra).alias("args"),
    )


def _nvtx_read(export: _Export) -> _Read | None:
    """The read of NVTX ranges and marks, or None where NVTX was not traced."""
    if not export.has(_NVTX, "start", "eventType", "globalTid"):
        return None
    cols = export.columns(_NVTX)
    sel = ["start", '"end"', "eventType", "globalTid"]
    sel += ["CAST(text AS TEXT) AS text"] if "text" in cols else ["NULL AS text"]
    sel += ["textId"] if "textId" in cols else ["NULL AS textId"]
    sel += ["domainId"] if "domainId" in cols else ["NULL AS domainId"]
    types = ", ".join(str(t) for t in (*NVTX_RANGE_TYPES, NVTX_MARK))
    return _Read(_NVTX, ", ".join(sel), f"eventType in ({types})")


def _nvtx_events(raw: pl.DataFrame, strings: pl.DataFrame) -> pl.DataFrame:
    raw = _names(raw.with_columns(pl.col("textId").cast(pl.Int64)), strings, "textId", "registered")
    text = pl.coalesce(pl.col("text").cast(pl.String), pl.col("registered").cast(pl.String)).fill_null("")
    parts = emit_nvtx_parts(raw.lazy().with_columns(text.alias("_text")), "_text")
    is_range = pl.col("eventType").is_in(NVTX_RANGE_TYPES)
    name = pl.col("_name")
    return (
        parts.select(
            pl.when(~is_range)
            .then(pl.lit("marker"))
            .when(name.str.contains(STEP_NAME))
            .then(pl.lit("step"))
            .when(pl.col("_op_id").is_not_null())
            .then(pl.lit("op"))
            .otherwise(pl.lit("annotation"))
            .alias("kind"),
            pl.format("NVTX domain {}", pl.col("domainId").fill_null(0)).alias("category"),
            name.alias("name"),
            pl.col("start").alias("ts_ns"),
            pl.when(is_range).then(pl.col("end") - pl.col("start")).otherwise(0).alias("dur_ns"),
            _pid("globalTid").alias("pid"),
            _tid("globalTid").alias("tid"),
            pl.col("_sizes").alias("input_shapes"),
            pl.struct(
                pl.col("_text").alias("nvtx_text"),
                pl.col("_seq").cast(pl.Int64).alias("seq"),
                pl.col("_op_id").cast(pl.Int64).alias("op_id"),
            )
            .struct.json_encode()
            .alias("args"),
        )
        .filter(pl.col("dur_ns").is_not_null())
        .collect()
    )


def emit_nvtx_parts(frame: pl.LazyFrame, text: str) -> pl.LazyFrame:
    """``frame`` with the parts of the ``emit_nvtx`` range texts in its column ``text`` (no nulls) as
    ``_name``, ``_seq``, ``_op_id`` and ``_sizes`` (strings; null where a part is absent, all four where the
    name would span lines, as ``.`` does not match a line break). Found by searches without capture groups,
    each from where the one before ended: one expression with a group per part, which the regex crate runs
    on a slower engine than a plain search, took 1.4 us a range, three times as long (benchmarks/README.md,
    twenty-third round)."""
    tail = pl.col("_tail")
    parsed = pl.when(~pl.col("_name").str.contains("\n", literal=True))
    return (
        frame.with_columns(pl.col(text).str.replace(_EMIT_NVTX_TAIL, "").alias("_name"))
        .with_columns(pl.col(text).str.slice(pl.col("_name").str.len_chars()).alias("_tail"))
        .with_columns(
            parsed.then(pl.col("_name")).alias("_name"),
            parsed.then(tail.str.extract(r"^, seq = (\d+)", 1)).alias("_seq"),
            parsed.then(tail.str.extract(r"^(?:, seq = \d+)?, op_id = (\d+)", 1)).alias("_op_id"),
            parsed.then(
                pl.when(tail.str.contains(_BEFORE_SIZES)).then(
                    # the sizes end at the first ']' that only input ids, or nothing, follow
                    tail.str.replace(_BEFORE_SIZES, "").str.replace(r"\](?:, input_op_ids = .*)?$", "]")
                )
            ).alias("_sizes"),
        )
        .drop("_tail")
    )


def _threads(export: _Export, strings: pl.DataFrame) -> pl.DataFrame | None:
    if not export.has("ThreadNames", "nameId", "globalTid"):
        return None
    raw = _names(export.query("select nameId, globalTid from ThreadNames"), strings, "nameId", "name")
    return raw.select(_pid("globalTid").alias("pid"), _tid("globalTid").alias("tid"), pl.col("name").cast(pl.String))


def whole_capture(start_ns: int | None, end_ns: int | None) -> pl.DataFrame:
    """The ``steps`` table of a capture without step ranges: one window from its first start to its last end."""
    return pl.DataFrame(
        {
            "step": [0],
            "name": [WHOLE_CAPTURE],
            "ts_ns": [start_ns],
            "dur_ns": [None if start_ns is None or end_ns is None else end_ns - start_ns],
            "event_id": [None],
        },
        schema={"step": pl.Int32, "name": pl.String, "ts_ns": pl.Int64, "dur_ns": pl.Int64, "event_id": pl.Int64},
    )


def _version(export: _Export) -> str:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if export.has(table, "name", "value"):
            meta = dict(export.query(f"select name, value from {table}").iter_rows())
            product = meta.get("EXPORT_PRODUCT_VERSION")
            schema = meta.get("EXPORT_SCHEMA_VERSION")
            if product or schema:
                return f"nsys {product or '?'}" + (f" (schema {schema})" if schema else "")
    if export.has("TARGET_INFO_SYSTEM_ENV", "name", "value"):
        env = dict(export.query("select name, value from TARGET_INFO_SYSTEM_ENV").iter_rows())
        m = re.search(r"(\d{4}\.\d+\.\d+)", str(env.get("TargetInstallDir", "")))
        if m:
            return f"nsys {m.group(1)}"
    return "nsys (version not recorded)"


def _devices(export: _Export) -> list[dict[str, Any]]:
    if not export.has("TARGET_INFO_GPU", "id", "name"):
        return []
    wanted = ["id", "name", "computeMajor", "computeMinor", "smCount", "totalMemory", "busLocation", "chipName"]
    cols = [c for c in wanted if c in export.columns("TARGET_INFO_GPU")]
    rows = export.query(f"select {', '.join(cols)} from TARGET_INFO_GPU").to_dicts()
    return json.loads(json.dumps(rows, default=str))


def _quoted(col: str) -> str:
    return f'"{col}"'


def _short(e: Exception) -> str:
    """SQLite's own words in a driver error (``INVALID_ARGUMENT: [SQLite] Failed to prepare query: database
    disk image is malformed\nquery: ...`` -> ``database disk image is malformed``)."""
    lines = str(e).strip().splitlines()
    text = re.sub(r"^[A-Z_]+: (?:\[SQLite\] )?(?:Failed to [^:]*: )?", "", lines[0] if lines else type(e).__name__)
    return " ".join(text.split())[:160]
