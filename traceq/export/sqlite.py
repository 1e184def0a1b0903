"""SQLite export: runs, their events and every metric query's result as tables of one SQLite file.

The file opens in Datasette (``datasette FILE --metadata FILE.metadata.json``), ``sqlite3`` or any
SQLite tool. Tables: ``runs`` (the catalog, keyed on ``run_id``), ``kinds`` (the event kinds),
``events``, ``steps``, ``threads``, ``kernel_classes``, and ``sources``, ``op_stats``,
``kernel_stats`` and ``summary_cells`` where the runs have rows for them, each with ``run_id`` and
``rank`` as in ``traceq sql``; then one table per metric query of ``queries/`` (``gpu_busy``,
``idle_causes``, ...) holding its result over the runs, so that the same SELECTs work on both.

Every table's ``run_id`` is a foreign key to ``runs`` (``events.kind`` to ``kinds``), which Datasette
shows as links labelled with the run's name; indexes cover ``run_id`` (with ``step`` or ``rank`` where
the table has them), ``name`` and, for events, ``kind`` and the event's key ``(run_id, rank,
event_id)``. Column documentation comes from :mod:`traceq.schema` and from the query files' Columns
headers, in two places: ``FILE.metadata.json`` in Datasette's metadata format (table descriptions and
column descriptions, which Datasette 0.65 reads with ``--metadata`` and shows on each table's page),
and as SQL comments in each table's CREATE TABLE statement (which Datasette shows as the table's schema
and every SQLite tool keeps).

sqlite-utils writes the CREATE TABLE statements with their foreign keys; ADBC's SQLite driver runs them,
takes the rows as Arrow batches streamed from DuckDB (bulk binding in C: about 4x faster here than
Python's executemany) and builds the indexes, all on one thread of its own, while the export's thread
makes the next metric; rows are never held whole, and only the columns SQLite has no type for (lists,
structs, times) go through Polars on the way. From a store the runs are written a group at a time
(:func:`run_groups`): first every group's own tables (whose indexes are then built while the metrics are
made), then each group's metrics, made in a session of its own under a memory limit and freed with it,
so the metrics held in memory are those of one group. The file is written under a temporary name and
renamed when complete.
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import sqlite_utils

from traceq._utils.outputs import atomic_output, check_output
from traceq._version import __version__
from traceq.errors import QueryError
from traceq.querying.engine import Session
from traceq.querying.files import dependency_order, doc, list_queries, query_text
from traceq.schema import KINDS, RANK_TABLES, RUNS, Table
from traceq.store import Store

#: Rows read and written at a time.
BATCH_ROWS = 1 << 14
#: Bytes of rows handed to the writer thread and not yet written, at most (beyond them the export waits:
#: while the runs' tables are indexed, the metrics of the first groups are made meanwhile).
WRITE_AHEAD = 32 * 2**20
#: At most this many events in the runs written from one session (a larger run alone). Each group's
#: session has a fixed cost (about 0.4 s of small statements), and its metrics are made under
#: :data:`MEMORY_LIMIT`, which bounds what they hold whatever the group's size (benchmarks/README.md,
#: "Constants in the code").
GROUP_EVENTS = 400_000
#: DuckDB's memory limit in the session of each group (beyond it, a metric spills, or runs on fewer
#: threads, and only then without it: :meth:`~traceq.querying.engine.Session.over_ranks`).
MEMORY_LIMIT = "300MB"
#: Canonical tables made only where the runs have rows for them.
OPTIONAL_TABLES = ("sources", "op_stats", "kernel_stats", "summary_cells")
_KEY_DOCS = {
    "run_id": "run id: the run in `runs`",
    "rank": "rank of the trace within the run (0 for a one-file run)",
}


@dataclass
class SqliteExport:
    """What :func:`write_sqlite` wrote."""

    path: Path
    #: Datasette metadata (``FILE.metadata.json``)
    metadata_path: Path
    #: rows per table, in the order written
    tables: dict[str, int] = field(default_factory=dict)
    #: metric queries that failed on these runs, with DuckDB's message (no table for them)
    failed: dict[str, str] = field(default_factory=dict)
    #: seconds spent on each table: making a metric's result, reading and writing the rows
    table_seconds: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    #: what an existing file at ``path`` was (see :func:`traceq.export.export`), or None
    replaced: str | None = None

    @property
    def rows(self) -> int:
        return sum(self.tables.values())


def write_sqlite(
    source: Session | Store, path: str | Path, run_ids: Sequence[str] | None = None, force: bool = False
) -> SqliteExport:
    """Write ``run_ids`` (all the runs of ``source`` by default) with their metrics to the SQLite file
    ``path``, and Datasette metadata to ``FILE.metadata.json`` beside it. An existing file is replaced if
    traceq exported it, or with ``force`` (:func:`check_outputs`; the result's ``replaced`` says what it was).

    ``source`` is an open :class:`~traceq.sql.Session` (its runs written from it) or a
    :class:`~traceq.store.Store`: then the runs are written a group at a time (:func:`run_groups`), each
    from a session for traceq's own queries over that group, closed before the next, so the metrics made
    in memory are those of one group, whatever the number of runs."""
    started = time.perf_counter()
    path = Path(path)
    replaced = check_outputs(path, source if isinstance(source, Store) else source.store, force)
    if isinstance(source, Store):
        catalog = source.catalog()
        ids = _wanted(catalog["run_id"].to_list(), run_ids)
        groups = run_groups(catalog.filter(pl.col("run_id").is_in(ids)))
        result = _write(lambda: _store_sessions(source, groups), path, ids, started)
    else:
        catalog = source.sql("SELECT run_id FROM runs ORDER BY ALL")["run_id"].to_list()
        ids = _wanted(catalog, run_ids)
        result = _write(lambda: iter([(source, ids, False)]), path, ids, started)
    result.replaced = replaced
    return result


def check_outputs(path: Path, store: Store | None, force: bool = False) -> str | None:
    """:func:`~traceq._utils.outputs.check_output` for an export and its metadata file; what the export replaces."""
    meta = path.with_name(path.name + ".metadata.json")
    replaced = check_output(path, store, force=force, made_by_traceq=is_sqlite_export)
    check_output(meta, store, force=force, made_by_traceq=is_metadata)
    return replaced


def run_groups(catalog: pl.DataFrame, events: int | None = None) -> list[list[str]]:
    """The run ids of ``catalog`` (rows of ``runs``) in its order, cut into groups of at most ``events``
    (default :data:`GROUP_EVENTS`) events each (a larger run alone)."""
    events = GROUP_EVENTS if events is None else events
    groups: list[list[str]] = []
    total = events
    for run_id, by_kind in catalog.select("run_id", "events_by_kind").iter_rows():
        n = sum(json.loads(by_kind or "{}").values())
        if not groups or total + n > events:
            groups.append([])
            total = 0
        groups[-1].append(run_id)
        total += n
    return groups


def _store_sessions(store: Store, groups: list[list[str]]) -> Iterator[tuple[Session, list[str], bool]]:
    for group in groups:
        with Session(store, group, own_queries=True, memory_limit=MEMORY_LIMIT) as session:
            yield session, group, True


def _wanted(catalog: list[str], run_ids: Sequence[str] | None) -> list[str]:
    ids = list(dict.fromkeys(run_ids)) if run_ids is not None else catalog
    missing = set(ids) - set(catalog)
    if missing:
        raise ValueError(f"not in this session: {', '.join(sorted(missing))}")
    return ids


#: Each group's session (a group of run ids, and whether the session is the export's own), opened anew on
#: each call: the export goes over the groups twice (the runs' tables, then their metrics).
Sessions = Callable[[], Iterator[tuple[Session, list[str], bool]]]


def _write(sessions: Sessions, path: Path, ids: list[str], started: float) -> SqliteExport:
    result = SqliteExport(path, path.with_name(path.name + ".metadata.json"))
    docs: dict[str, dict[str, Any]] = {}
    with atomic_output(path) as tmp:
        _write_file(sessions, tmp, result, docs)
    _write_metadata(result.metadata_path, path, docs, ids)
    result.seconds = time.perf_counter() - started
    return result


def _write_file(sessions: Sessions, tmp: Path, result: SqliteExport, docs: dict[str, Any]) -> None:
    """The runs' tables of every group, then their indexes (on the writer's thread, while the metrics are
    made), then each group's metrics, their indexes and the statistics."""
    db = sqlite_utils.Database(tmp)
    try:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")  # how traceq knows its exports
        loader = _Loader(tmp)
        try:
            _write_vocabulary(loader, result, docs)
            for session, group, _ in sessions():
                _write_run_tables(session, loader, group, result, docs)
            canonical = list(result.tables)
            for name in canonical:
                loader.execute_later(_index_statements(name, loader.schemas[name].names))
            for session, group, own in sessions():
                _write_metrics(session, loader, group, result, docs, free=own)
            began = time.perf_counter()
            for name in result.failed:  # a metric that failed on some runs has no table
                if name in result.tables:
                    loader.execute_later([f'DROP TABLE "{name}"'])
                    del result.tables[name]
                    docs.pop(name, None)
            for name in result.tables:
                if name not in canonical:
                    loader.execute_later(_index_statements(name, loader.schemas[name].names))
        except BaseException:
            loader.close(discard=True)
            raise
        loader.close()
        db.execute("PRAGMA analysis_limit = 1000")  # statistics from a sample of each index (ANALYZE's own limit)
        db.analyze()
        result.table_seconds["(indexes)"] = time.perf_counter() - began  # and the rows still being written
    finally:
        db.close()


#: ``PRAGMA application_id`` of traceq's SQLite exports ("trcq").
APPLICATION_ID = 0x74726371


def is_sqlite_export(path: Path) -> str | None:
    """What the file is if traceq exported it (``a traceq export of 2 runs: a, b``), else None: its
    application id, or for exports older than it, the tables ``runs``, ``kinds`` and ``events``. The
    file is opened read-only and immutable (nothing is written to it)."""
    import sqlite3
    from urllib.parse import quote

    try:
        con = sqlite3.connect(f"file:{quote(str(path))}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return None
    try:
        app = con.execute("PRAGMA application_id").fetchone()[0]
        tables = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
        if app != APPLICATION_ID and not {"runs", "kinds", "events"} <= tables:
            return None
        names = [r[0] for r in con.execute("select coalesce(name, run_id) from runs order by 1")]
    except sqlite3.Error:
        return None
    finally:
        con.close()
    listed = ", ".join(map(str, names[:5])) + (", ..." if len(names) > 5 else "")
    return f"a traceq export of {len(names)} run{'' if len(names) == 1 else 's'}" + (f": {listed}" if names else "")


def is_metadata(path: Path) -> str | None:
    """ "its Datasette metadata" if the file is the metadata traceq writes beside an export."""
    try:
        with path.open("rb") as f:
            head = f.read(1 << 12)
    except OSError:
        return None
    return "its Datasette metadata" if head.startswith(b'{\n  "title": "traceq export"') else None


def _write_vocabulary(loader: _Loader, result: SqliteExport, docs: dict[str, dict[str, Any]]) -> None:
    kinds = pl.DataFrame({"kind": list(KINDS), "meaning": list(KINDS.values())})
    meaning = {"kind": "event kind", "meaning": "what an event of this kind is"}
    docs["kinds"] = _docs("The event kinds: the vocabulary of `events.kind`.", kinds.columns, meaning)
    result.tables["kinds"] = loader.table("kinds", _frame_batches(kinds), docs["kinds"], pk="kind")


def _write_rows(
    loader: _Loader,
    result: SqliteExport,
    docs: dict[str, dict[str, Any]],
    name: str,
    batches: _Batches,
    documented: Callable[[], dict[str, Any]],
    **keys: Any,
) -> None:
    """Hand ``batches`` to table ``name``, made (and documented in ``docs``) the first time it has rows."""
    if name not in docs:
        docs[name] = documented()
        loader.create(name, batches.schema, docs[name], **keys)
    result.tables[name] = result.tables.get(name, 0) + loader.append(name, batches)


def _write_run_tables(
    session: Session, loader: _Loader, ids: list[str], result: SqliteExport, docs: dict[str, dict[str, Any]]
) -> None:
    """The catalog rows and the canonical tables' rows (the optional tables' where they have any) of the
    runs ``ids`` of ``session``."""
    where = _where(ids)
    with session.memory_limit_lifted():  # the session's limit is for making metrics: these scans hold a batch
        runs = session.sql(f"SELECT * FROM runs WHERE {where} ORDER BY ingested_at, run_id")
        _write_rows(loader, result, docs, "runs", _frame_batches(runs), lambda: _table_docs(RUNS, runs.columns),
                    pk="run_id")  # fmt: skip
        for table in RANK_TABLES:
            began = time.perf_counter()
            query = f"SELECT * FROM {table.name} WHERE {where}"
            if table.name in OPTIONAL_TABLES and not session.sql(f"SELECT count(*) FROM ({query})").item():
                continue
            batches = _batches(session, query)
            foreign = [("kind", "kinds", "kind")] if table.name == "events" else []
            _write_rows(loader, result, docs, table.name, batches,
                        lambda t=table, b=batches: _table_docs(t, [f.name for f in b.schema]),
                        foreign=foreign)  # fmt: skip
            result.table_seconds[table.name] = result.table_seconds.get(table.name, 0.0) + time.perf_counter() - began


def _write_metrics(
    session: Session,
    loader: _Loader,
    ids: list[str],
    result: SqliteExport,
    docs: dict[str, dict[str, Any]],
    free: bool = False,
) -> None:
    """Each metric query's rows of the runs ``ids`` of ``session``. With ``free`` (a session of the export's
    own) each metric's blocks are dropped from the session once no metric left to write needs them."""
    where = _where(ids)
    metrics = list_queries()["name"].to_list()
    blocks = {name: {name} | {dep for dep, _ in dependency_order(f"-- Requires: {name}")} for name in metrics}
    for k, name in enumerate(metrics):
        # what no metric left to write needs is freed first: a run's blocks (_gpu_work, _idle_pieces) are
        # the most memory an export holds
        if free:
            later = set().union(*(blocks[m] for m in metrics[k:]))
            session.drop(set().union(*(blocks[m] for m in metrics[:k])) - later)
        if name in result.failed:
            continue
        began = time.perf_counter()
        try:
            session.make([name])
        except QueryError as e:
            result.failed[name] = str(e)
            continue
        with session.memory_limit_lifted():
            batches = _batches(session, f"SELECT * FROM {name} WHERE {where}")
            _write_rows(loader, result, docs, name, batches,
                        lambda n=name, b=batches: _metric_docs(n, [f.name for f in b.schema]))  # fmt: skip
        result.table_seconds[name] = result.table_seconds.get(name, 0.0) + time.perf_counter() - began


def _where(ids: list[str]) -> str:
    return "run_id IN (" + ", ".join(_quote(r) for r in ids) + ")" if ids else "false"


class _Batches:
    """A query's result as Arrow batches (its schema known before the first)."""

    def __init__(self, reader: pa.RecordBatchReader) -> None:
        self.reader = reader
        self.schema = _sqlite_schema(reader.schema)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for batch in self.reader:
            if batch.num_rows:
                yield from _plain_batch(batch).cast(self.schema).to_batches()


def _batches(session: Session, query: str) -> _Batches:
    """``query``'s result streamed from the session's connection (read one before the next query)."""
    return _Batches(session.con.sql(query).to_arrow_reader(BATCH_ROWS))


def _frame_batches(frame: pl.DataFrame) -> _Batches:
    return _Batches(_plain(frame).to_arrow().to_reader())


def _sqlite_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow types rows are written in: integers, floats, text (JSON for lists and structs,
    ISO 8601 for times), booleans as 0/1."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_boolean(t) or (pa.types.is_integer(t) and t.bit_width <= 64):
            out = pa.int64()
        elif pa.types.is_floating(t) or pa.types.is_decimal(t):
            out = pa.int64() if pa.types.is_decimal(t) and t.scale == 0 else pa.float64()
        else:
            out = pa.large_string()
        fields.append(pa.field(f.name, out))
    return pa.schema(fields)


def _plain_batch(batch: pa.RecordBatch) -> pa.Table:
    """``batch`` as a table whose columns :func:`_sqlite_schema`'s types take by a plain cast: the
    integers, floats, booleans and text as they are, the others through :func:`_plain` (Polars), whose
    conversions (JSON, ISO 8601 times) are the export's."""
    table = pa.Table.from_batches([batch])
    other = [f.name for f in batch.schema if not _casts_plainly(f.type)]
    if not other:
        return table
    frame = pl.from_arrow(table.select(other))
    assert isinstance(frame, pl.DataFrame)
    converted = _plain(frame).to_arrow()
    for name in other:
        table = table.set_column(table.schema.get_field_index(name), name, converted.column(name))
    return table


def _casts_plainly(t: pa.DataType) -> bool:
    """Whether Arrow's cast of a column of type ``t`` to its :func:`_sqlite_schema` type is :func:`_plain`'s."""
    return (
        pa.types.is_boolean(t)
        or pa.types.is_signed_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
    )


def _plain(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with only integer, float and text columns (see :func:`_sqlite_schema`)."""
    casts = []
    for name, dtype in frame.schema.items():
        col = pl.col(name)
        if isinstance(dtype, pl.List | pl.Array | pl.Struct):
            text = pl.struct(col.alias("v")).struct.json_encode().str.strip_prefix('{"v":').str.strip_suffix("}")
            casts.append(pl.when(col.is_null()).then(None).otherwise(text).alias(name))
        elif isinstance(dtype, pl.Datetime):
            fmt = "%Y-%m-%dT%H:%M:%S%.6f" + ("%:z" if dtype.time_zone else "")
            casts.append(col.dt.to_string(fmt).alias(name))
        elif isinstance(dtype, pl.Date | pl.Time | pl.Duration | pl.Categorical | pl.Enum | pl.Null | pl.Object):
            casts.append(col.cast(pl.String).alias(name))
        elif dtype in (pl.Boolean, pl.Int128, pl.UInt64) or (isinstance(dtype, pl.Decimal) and dtype.scale == 0):
            casts.append(col.cast(pl.Int64).alias(name))
        elif isinstance(dtype, pl.Decimal):
            casts.append(col.cast(pl.Float64).alias(name))
    return frame.with_columns(casts) if casts else frame


class _Loader:
    """Makes tables (their statements by sqlite-utils), fills them and indexes them through one ADBC
    connection, on a thread of its own: the rows of one table are written (and the runs' tables indexed)
    while the next metric is made (ADBC's writes and DuckDB's queries both run without the GIL), up to
    :data:`WRITE_AHEAD` bytes of rows behind."""

    def __init__(self, path: Path) -> None:
        import adbc_driver_sqlite.dbapi as adbc

        self.con = adbc.connect(str(path), autocommit=True)
        self.cursor = self.con.cursor()
        self.cursor.execute("PRAGMA journal_mode = OFF")
        self.cursor.execute("PRAGMA synchronous = OFF")
        #: the Arrow types of each table made
        self.schemas: dict[str, pa.Schema] = {}
        #: the tables made, empty, in memory: where sqlite-utils writes each CREATE TABLE
        self._ddl = sqlite_utils.Database(memory=True)
        #: rows to append (a table's name and a batch) or statements to run, in the order handed over
        self._queue: queue.SimpleQueue[tuple[str, pa.RecordBatch] | list[str] | None] = queue.SimpleQueue()
        #: the bytes of the batches queued, under :data:`WRITE_AHEAD` (waited for with ``_room``)
        self._queued = 0
        self._room = threading.Condition()
        self._failed: BaseException | None = None
        self._writer = threading.Thread(target=self._write_rows, name="traceq-sqlite-write", daemon=True)
        self._writer.start()

    def _write_rows(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                if self._failed is not None:  # after a failure, what is queued is dropped
                    pass
                elif isinstance(item, list):
                    for statement in item:
                        self.cursor.execute(statement)
                else:
                    self.cursor.adbc_ingest(item[0], item[1], mode="append")
            except BaseException as e:  # raised in the export's thread (append, execute_later, close)
                self._failed = e
            finally:
                if isinstance(item, tuple):
                    with self._room:
                        self._queued -= item[1].nbytes
                        self._room.notify_all()

    def execute_later(self, statements: list[str]) -> None:
        """Run ``statements`` on the writer's connection once what was handed over before is written."""
        self._raise_failure()
        self._queue.put(statements)

    def _raise_failure(self) -> None:
        if self._failed is not None:
            raise self._failed

    def create(
        self,
        name: str,
        schema: pa.Schema,
        docs: dict[str, Any],
        pk: str | None = None,
        foreign: Sequence[tuple[str, str, str]] = (),
    ) -> None:
        """Make table ``name`` with the columns of ``schema``, documented by ``docs``, its ``run_id`` a
        foreign key to ``runs`` (and ``foreign``): sqlite-utils writes the statement over an empty copy of
        the schema in memory, the writer's connection runs it in turn. (The file is never read by another
        connection while the writer writes: ADBC's driver has an SQLite of its own, whose locks Python's
        SQLite in the same process does not see.)"""
        columns = {f.name: _python_type(f.type) for f in schema}
        keys = list(foreign)
        if name not in ("runs", "kinds") and "run_id" in columns:
            keys.insert(0, ("run_id", "runs", "run_id"))
        sql = self._ddl.create_table_sql(name, columns, pk=pk, foreign_keys=keys)
        self._ddl.execute(sql)  # for the keys of tables made later
        self.execute_later([_commented(sql, docs)])
        self.schemas[name] = schema

    def append(self, name: str, batches: _Batches) -> int:
        """Hand ``batches`` over to be written into table ``name`` (in the types it was made with); returns
        the rows."""
        schema, rows = self.schemas[name], 0
        for batch in batches:
            batch = batch if batch.schema.equals(schema) else batch.cast(schema)
            with self._room:
                while self._queued and self._queued + batch.nbytes > WRITE_AHEAD and self._failed is None:
                    self._room.wait()
                self._queued += batch.nbytes
            self._raise_failure()
            self._queue.put((name, batch))
            rows += batch.num_rows
        return rows

    def table(self, name: str, batches: _Batches, docs: dict[str, Any], pk: str | None = None) -> int:
        """Make table ``name`` for ``batches`` and write them; returns the rows."""
        self.create(name, batches.schema, docs, pk=pk)
        return self.append(name, batches)

    def close(self, discard: bool = False) -> None:
        """Write what was handed over (``discard``: drop it: the export stopped), end the writer thread and
        close the connection; raise what writing raised (not when discarding)."""
        if discard:
            with self._room:
                self._failed = self._failed or _Stopped()
                self._room.notify_all()
        self._queue.put(None)
        self._writer.join()
        self.cursor.close()
        self.con.close()
        self._ddl.close()
        if not discard:
            self._raise_failure()


class _Stopped(Exception):
    """The export stopped: rows still queued are not written."""


def _python_type(t: pa.DataType) -> type:
    return int if pa.types.is_integer(t) else float if pa.types.is_floating(t) else str


def _commented(sql: str, docs: dict[str, Any]) -> str:
    """sqlite-utils' CREATE TABLE statement (a column a line) with the table's and each column's
    description as SQL comments, which SQLite keeps in the schema."""
    columns = docs.get("columns", {})
    lines = sql.strip().splitlines()
    for k, line in enumerate(lines):
        m = re.match(r'^\s+"((?:[^"]|"")+)"', line)
        if m and columns.get(m.group(1).replace('""', '"')):
            lines[k] = f"{line} -- {_one_line(columns[m.group(1)])}"
    if docs.get("description"):
        lines[0] += f" -- {_one_line(docs['description'])}"
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _index_statements(table: str, columns: Sequence[str]) -> list[str]:
    """The indexes of a table of ``columns`` (none for ``runs`` and ``kinds``, keyed already): on its
    ``run_id`` (with ``step`` or ``rank``), its ``name``, and for events the event's key and ``kind``;
    named as sqlite-utils names them (``idx_<table>_<columns>``)."""
    if table in ("runs", "kinds"):
        return []
    wanted: list[tuple[list[str], bool]] = []
    if "run_id" in columns:
        wanted.append((["run_id", "step"] if "step" in columns else ["run_id", "rank"] if "rank" in columns
                       else ["run_id"], False))  # fmt: skip
    if "name" in columns:
        wanted.append((["name"], False))
    if table == "events":
        wanted += [(["run_id", "rank", "event_id"], True), (["kind"], False)]
    return [
        f"CREATE {'UNIQUE ' if unique else ''}INDEX {_name('_'.join(['idx', table, *keys]))}\n"
        f"    ON {_name(table)} ({', '.join(map(_name, keys))})"
        for keys, unique in wanted
    ]


def _name(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


# -- documentation ---------------------------------------------------------------------------------------


def _docs(description: str, columns: Sequence[str], known: dict[str, str]) -> dict[str, Any]:
    return {
        "description": description,
        "columns": {c: known[c] for c in columns if known.get(c)},
    }


def _table_docs(table: Table, columns: Sequence[str]) -> dict[str, Any]:
    known = {**_KEY_DOCS, **{c.name: c.doc for c in table.columns}}
    if table.name == "events":
        known["kind"] = "event kind: one of the `kinds` table"
    out = _docs(table.doc, columns, known)
    if table is RUNS:
        out["columns"]["run_id"] = "run id (the store's `runs/run_id=<id>` folder)"
        out["label_column"] = "name"
    return out


def _metric_docs(name: str, columns: Sequence[str]) -> dict[str, Any]:
    text = query_text(name)
    info = doc(text)
    known = {**_KEY_DOCS, **{c: d for c, (_, d) in info["columns"].items()}}
    definition = _definition(text)
    description = f"Metric `{name}` (queries/{name}.sql): {info['summary']}" + (f" {definition}" if definition else "")
    return _docs(description, columns, known)


def _definition(text: str) -> str:
    """The ``Definition:`` paragraph of a query file's header."""
    out, inside = [], False
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        body = line[2:].strip()
        if body.lower().startswith("definition:"):
            inside, body = True, body.split(":", 1)[1].strip()
        elif re.match(r"^(Reads|Columns|Requires):", body, re.I):
            inside = False
        if inside and body:
            out.append(body)
    return " ".join(out)


def _write_metadata(meta_path: Path, path: Path, docs: dict[str, dict[str, Any]], run_ids: list[str]) -> None:
    """Datasette's metadata file: the database (named, as Datasette names it, after the file's stem) with
    each table's description and column descriptions."""
    metadata = {
        "title": "traceq export",
        "description": f"{len(run_ids)} run(s) exported by traceq {__version__}: the canonical tables "
        "(see `traceq schema`) and one table per metric query (`traceq queries`).",
        "databases": {path.stem: {"tables": docs}},
    }
    with atomic_output(meta_path) as tmp:
        tmp.write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
