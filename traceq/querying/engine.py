"""Ad-hoc SQL over a store, read-only, on DuckDB.

DuckDB is used because trace analysis needs what Polars SQL lacks: window functions with explicit
``ROWS``/``RANGE`` frames (interval merging), ``ASOF`` joins, ``percentile_cont`` and ``DISTINCT ON``.
Every table of :mod:`traceq.schema` is a view over the store's Parquet files, with ``run_id`` (and
``rank``) from the folder names. The connection that runs users' SQL cannot open any file: its tables are
Arrow datasets over the store's files (read by pyarrow, outside DuckDB), registered before DuckDB's file
access is switched off with no directory allowed, so no statement can write, read other files, attach
or load anything. Only ``SELECT``/``EXPLAIN`` statements are accepted besides.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceq._utils.lazy_frames import lazy_source
from traceq._utils.leftovers import private_dir
from traceq._utils.on_first_use import OnFirstUse
from traceq._utils.signal_watch import calling_on_signal
from traceq.errors import QueryError, StoreError, TraceqError
from traceq.locations import MARKER
from traceq.querying import DEFAULT_TIMEOUT_S
from traceq.querying.files import (
    dependency_order,
    doc,
    metric_fingerprint,
    query_names,
    query_text,
    requires,
    used_queries,
)
from traceq.querying.macros import MACROS, NAMES, sql_string
from traceq.querying.shown import PLAIN, Shown, numeric, shown
from traceq.querying.stored import CACHED, stored_files
from traceq.schema import RUNS, TABLES, keys_of
from traceq.store import MARKER_TEXT, Damage, Store, check_store

if TYPE_CHECKING:
    import duckdb
    import polars as pl
else:  # ingest of small traces never loads DuckDB (82 ms, 30 MB); users' SQL shown in a table, never Polars
    duckdb = OnFirstUse("duckdb")
    pl = OnFirstUse("polars")
#: DuckDB's type of each Polars type of :mod:`traceq.schema` (by name).
_DUCK_TYPES = {"Int64": "BIGINT", "Int32": "INTEGER", "String": "VARCHAR", "Float64": "DOUBLE", "Boolean": "BOOLEAN"}


#: The spill folder of each open connection (by ``id``), removed by :func:`close` (or at exit).
_SPILLS: dict[int, Path] = {}
#: The open connections whose query was stopped (Ctrl-C, SIGTERM, the timeout), by ``id``.
_STOPPED: set[int] = set()
#: The threads closing them (:func:`_close_later`).
_CLOSING: list[threading.Thread] = []


def close(con: duckdb.DuckDBPyConnection) -> None:
    """Close a connection of :func:`connect` and remove its spill folder."""
    con.close()
    _STOPPED.discard(id(con))
    spill = _SPILLS.pop(id(con), None)
    if spill is not None:
        shutil.rmtree(spill, ignore_errors=True)


def _close_later(con: duckdb.DuckDBPyConnection) -> None:
    """:func:`close` a connection whose query was stopped on a thread of its own, without waiting: the close
    of DuckDB 1 waits for the query's tasks still running, and one sort that spilled to disk kept it 40 s
    to 3 minutes under load after Ctrl-C. The command's end does not wait for it either
    (:func:`end_without_waiting`)."""
    thread = threading.Thread(target=close, args=(con,), name="traceq-close", daemon=True)
    thread.start()
    _CLOSING.append(thread)


def _by_signal(error: BaseException) -> bool:
    """Whether ``error`` is what DuckDB made of Ctrl-C or SIGTERM (the CLI's handler raises KeyboardInterrupt
    for both): DuckDB 1 raises a RuntimeError caused by the KeyboardInterrupt."""
    return isinstance(error.__cause__, KeyboardInterrupt)


def _interrupted(error: BaseException) -> bool:
    """Whether ``error`` is DuckDB's for a query interrupted, by ``interrupt()`` or by a signal it saw first:
    DuckDB 2's InterruptException, or the RuntimeError "Query interrupted" without a cause that DuckDB 2
    raises where it runs the signal's handler itself, between its tasks, before traceq's watching thread
    has interrupted the query."""
    return isinstance(error, duckdb.InterruptException) or (
        type(error) is RuntimeError and str(error) == "Query interrupted"
    )


def end_without_waiting() -> bool:
    """Whether a connection whose query was stopped is not closed yet (closing on its thread, or left to
    the garbage collector where the signal struck during the query's cleanup); if so, every connection's
    spill folder is removed now, for the process to end at once (``os._exit``) instead of waiting for the
    close at exit (:func:`_at_exit`). A command calls this as it ends."""
    if not _STOPPED & _SPILLS.keys():
        return False
    _remove_spills()
    return True


def _remove_spills() -> None:
    for spill in list(_SPILLS.values()):
        shutil.rmtree(spill, ignore_errors=True)


@atexit.register
def _at_exit() -> None:
    """The spill folders of connections left open, removed at exit once the stopped queries' connections
    are closed: a program that calls traceq waits for those here, not in the call that was stopped."""
    for thread in _CLOSING:
        thread.join()
    _remove_spills()


def connect(
    store: Store | str | Path | None = None,
    runs: list[str] | None = None,
    locked: bool = True,
    own_queries: bool = False,
    memory_limit: int | None = None,
    read: Collection[str] | None = None,
    settable: bool = False,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per canonical table.

    ``runs`` restricts every view to those run ids (the files of other runs are never opened). By default
    (users' SQL) the connection can open no file at all (:func:`_connect`). ``own_queries=True``, only for
    traceq's own queries (reports): DuckDB reads the runs' Parquet files itself and may open those files
    and no other. ``locked=False`` leaves file access open (traceq's own queries over a run being written).
    ``memory_limit``: DuckDB's memory bound in bytes (set before the configuration is locked). ``read``:
    the only tables of the connection (None: every table), for statements that name no other.
    ``settable`` (with ``own_queries`` only): the configuration is left unlocked, so that a session of
    traceq's own queries may change DuckDB's threads and memory limit (file access is limited as with
    ``own_queries`` alone; no other text runs on it).
    """
    return _connect(store, runs, locked, own_queries, memory_limit, read, settable)[0]


def _connect(
    store: Store | str | Path | None,
    runs: list[str] | None,
    locked: bool = True,
    own_queries: bool = False,
    memory_limit: int | None = None,
    read: Collection[str] | None = None,
    settable: bool = False,
) -> tuple[duckdb.DuckDBPyConnection, dict[str, Any]]:
    """:func:`connect`, and the Arrow datasets registered on it by name (a cursor of the connection sees
    none of them until they are registered on it too).

    For users' SQL each table with files is an Arrow dataset over them (read by pyarrow, outside DuckDB),
    registered under the table's name; then DuckDB's file access is switched off with no directory or
    path allowed, Python objects are no longer looked up by name, and the configuration is locked: no
    statement, whatever wraps it, can write, read another file, attach or load anything. An allowed
    directory or path would not do: DuckDB writes wherever it may read (``COPY ... TO`` an allowed file).
    Reports read the files with DuckDB's own reader instead (``own_queries``): it knows their row counts
    and plans the metric queries' joins on them, which Arrow scans leave it to guess (~1 row each), and
    the metrics of a report take twice as long over them."""
    if settable and not own_queries:
        raise ValueError("only a connection for traceq's own queries may be left settable")
    store = Store.of(store)
    tables = [t for t in TABLES.values() if read is None or t.name in read]
    if runs is None and tables:  # every run that is not damaged, found once for all the tables
        runs = [row["run_id"] for row in store.catalog_rows()]
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    if read is None or not NAMES.isdisjoint(read):  # the model's facts the query files name (a step's name, ...)
        for macro in MACROS:
            con.execute(macro)
    # Where a query beyond memory spills: a folder of its own under the system's temporary folder (not
    # DuckDB's default, ``.tmp`` in the working directory), readable by this user only; DuckDB empties it at
    # close, :func:`close` removes it, and a dead process's is removed by the next connection.
    spill = private_dir("traceq-duckdb")
    _SPILLS[id(con)] = spill
    con.execute(f"SET temp_directory = {sql_string(str(spill))}")
    if memory_limit is not None:
        con.execute(f"SET memory_limit = '{int(memory_limit)}B'")
    sources: dict[str, Any] = {}
    for table in tables:  # (a table no statement names is no view: 0.5 ms each)
        files = [str(f) for f in store.table_files(table.name, runs)]
        if files and locked and not own_queries:
            with reading(store, runs):
                sources[table.name] = _arrow_dataset(files, store.runs_dir, ranked=table is not RUNS)
            con.register(table.name, sources[table.name])
        elif files:
            with reading(store, runs):
                con.execute(f"CREATE VIEW {table.name} AS {_hive_select(_file_list(files), ranked=table is not RUNS)}")
        else:
            cols = ", ".join(f"NULL::{_duck_type(c.type)} AS {c.name}" for c in table.columns)
            keys = "NULL::VARCHAR AS run_id" + ("" if table is RUNS else ", NULL::BIGINT AS rank")
            con.execute(f"CREATE VIEW {table.name} AS SELECT {keys}, {cols} WHERE false")
    # DuckDB turns an ASOF join whose left side it expects to be small (it expects one row from an Arrow
    # scan, and few from a join it misjudges over Parquet) into a nested loop join, minutes instead of seconds
    # on large runs: never, on every connection (DuckDB before 1.3 has neither the setting nor the loop).
    # Measured: benchmarks/README.md, "Constants in the code".
    with suppress(duckdb.CatalogException):
        con.execute("SET asof_loop_join_threshold = 0")
    if locked:
        if own_queries:  # the runs' files, the metrics stored with them included, and nothing else
            run_dirs = [d for d in store.run_dirs() if runs is None or d.name[len("run_id=") :] in runs]
            files = sorted(str(f) for d in run_dirs for f in d.rglob("*.parquet"))
            allowed = dict.fromkeys([*files, *map(_glob_escaped, files)])  # as opened, and as read_parquet is given
            con.execute(f"SET allowed_paths = [{', '.join(sql_string(f) for f in allowed)}]")
        con.execute("SET python_enable_replacements = false")
        con.execute("SET enable_external_access = false")
        if not settable:
            con.execute("SET lock_configuration = true")
    return con, sources


@contextmanager
def reading(store: Store | None, runs: Collection[str] | None) -> Iterator[None]:
    """Reading the files of ``runs`` (None: every run) of ``store``: a file that cannot be read (its
    size as written, but its bytes not) is looked for by checking those runs in full (:func:`check_store`,
    only then), and the error names the damaged run; other errors pass unchanged."""
    try:
        yield
    except TraceqError:
        raise
    except (OSError, ValueError, duckdb.Error, pl.exceptions.PolarsError) as e:  # Polars: stored results
        # pyarrow's ArrowInvalid is a ValueError; DuckDB reports a corrupt file as invalid input or a bare Error
        sql_error = (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException, duckdb.InterruptException,
                     duckdb.OutOfMemoryException, duckdb.ConversionException)  # fmt: skip
        if isinstance(e, sql_error):
            raise
        problems = check_store(store, runs) if store is not None else None
        if problems is None or problems.is_empty():
            raise
        raise StoreError(Damage.first_of(problems).message(store)) from None  # type: ignore[arg-type]


def _arrow_dataset(files: list[str], runs_dir: Path, ranked: bool = True) -> Any:
    """A pyarrow dataset over Parquet ``files`` of the store under ``runs_dir``: ``run_id`` (and ``rank``)
    from the ``run_id=``/``rank=`` folder names first, then the files' columns by name (files written by
    other traceq versions may order or lack columns differently)."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    keys = pa.schema([("run_id", pa.string()), ("rank", pa.int64())][: 2 if ranked else 1])
    schema = pa.unify_schemas([keys, *(pq.read_schema(f) for f in files)], promote_options="permissive")
    partitioning = ds.partitioning(keys, flavor="hive")
    return ds.dataset(files, schema=schema, format="parquet", partitioning=partitioning,
                      partition_base_dir=str(runs_dir))  # fmt: skip


def _glob_escaped(path: str) -> str:
    """``path`` as DuckDB's file functions match it literally: they read every path as a glob pattern
    (``st[1]`` would read ``st1``, ``st*x`` also ``stAx``); each of ``[``, ``*``, ``?`` becomes a one-character
    class."""
    return re.sub(r"[\[*?]", lambda m: f"[{m.group()}]", path)


def _file_list(files: list[str]) -> str:
    """A DuckDB list literal of ``files``, each matched literally (:func:`_glob_escaped`)."""
    return "[" + ", ".join(sql_string(_glob_escaped(f)) for f in files) + "]"


def _hive_select(files: str, ranked: bool = True) -> str:
    """``SELECT run_id[, rank], <file columns>`` over Parquet ``files`` (a DuckDB list literal), with
    the keys taken from the store's ``run_id=``/``rank=`` folder names."""
    keys = "run_id, rank" if ranked else "run_id"
    types = "'run_id': VARCHAR, 'rank': BIGINT" if ranked else "'run_id': VARCHAR"
    return (
        f"SELECT {keys}, * EXCLUDE ({keys}) FROM read_parquet({files}, hive_partitioning = true, "
        f"union_by_name = true, hive_types = {{{types}}})"
    )


#: At most this much memory for a users' query by default (:func:`default_memory_limit`), bytes.
MAX_DEFAULT_MEMORY = 4 * 10**9


def default_memory_limit() -> int:
    """DuckDB's memory bound for users' SQL, bytes: half of the memory available now, at most 4 GB.

    DuckDB's own default, 80 % of the machine's memory, let one cross join of events with itself grow
    without bound. Beyond the bound DuckDB spills sorts, joins and aggregates under the temporary folder
    and fails only what cannot spill. Half of what is available leaves the rest to the result (the polars
    frame is made outside DuckDB's bound) and to the machine's other work; 4 GB is well above what the
    metric queries take on whole stores (benchmarks/README.md, "Constants in the code")."""
    return max(min(MAX_DEFAULT_MEMORY, available_memory() // 2), 64 * 10**6)


def available_memory() -> int:
    """The memory available now (``MemAvailable``; without ``/proc``, the machine's memory; failing
    both, :data:`MAX_DEFAULT_MEMORY` twice), bytes."""
    with suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with suppress(AttributeError, OSError, ValueError):  # no /proc: the machine's memory (no sysconf: Windows)
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return 2 * MAX_DEFAULT_MEMORY


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15}
_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


#: The largest memory bound a query may be given (``--memory-limit``), bytes (DuckDB's own bound is near 8 EB).
MAX_MEMORY_LIMIT = 10**15


def memory_bytes(size: int | str) -> int:
    """``size`` in bytes: a number of bytes, or a size such as ``4GB``, ``500MB`` or ``2GiB``, within
    1 byte to :data:`MAX_MEMORY_LIMIT`."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([a-zA-Z]*)\s*", str(size))
    if m is None or m.group(2).lower() not in _UNITS or float(m.group(1)) * _UNITS[m.group(2).lower()] < 1:
        raise QueryError(f"{size}: not a memory size (e.g. 4GB, 500MB)")
    n = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if n > MAX_MEMORY_LIMIT:
        raise QueryError(f"{size}: out of range for a memory limit (from 1 byte to {_size(MAX_MEMORY_LIMIT)})")
    return int(n)


def _size(n: int) -> str:
    """``n`` bytes for people: ``4 GB``, ``50 MB``."""
    for unit, scale in (("PB", 10**15), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def sql(
    query: str,
    store: Store | str | Path | None = None,
    runs: list[str] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    memory_limit: int | str | None = None,
) -> pl.DataFrame:
    """Run one read-only SQL query over the store and return the result as a polars frame.

    Tables: those of :mod:`traceq.schema`, and every metric and building block of ``queries/`` by its
    name: those the query names (or its ``-- Requires:`` lines) are bound as views first, and only those
    are computed. Each table's and bound view's columns carry their documentation as DuckDB comments
    (``information_schema.columns.column_comment``, ``duckdb_columns().comment``); a column name that
    two joined tables share is named after its table (:func:`_qualified`). ``runs``: only those run ids.
    ``timeout``: seconds after which the query is stopped (None or 0: never). ``memory_limit``: DuckDB's
    memory bound, bytes or a size such as ``"2GB"`` (default :func:`default_memory_limit`); a query that
    cannot keep to it fails. Both raise
    :class:`QueryError` saying which bound stopped the query.

    Examples
    --------
    >>> sql("select kind, count(*) n from events group by kind order by n desc")  # doctest: +SKIP
    """
    with _users_query(query, store, runs, timeout, memory_limit) as (con, result):
        return _frame(con, query, result)


def sql_shown(
    query: str,
    shown_rows: int,
    store: Store | str | Path | None = None,
    runs: list[str] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    memory_limit: int | str | None = None,
) -> Shown | pl.DataFrame:
    """:func:`sql`'s result for a terminal table of at most ``shown_rows`` rows: where every column is
    text, a boolean or a number DuckDB gives as Python shows it (:data:`~traceq.querying.shown.PLAIN`) and
    no column name repeats, the rows the table shows, fetched without a frame (:func:`shown`); else the
    frame."""
    with _users_query(query, store, runs, timeout, memory_limit) as (con, result):
        types = [str(t) for t in result.dtypes]
        if len(set(result.columns)) < len(result.columns) or not set(types) <= PLAIN:
            return _frame(con, query, result)
        return shown(con, query, [(c, numeric(t)) for c, t in zip(result.columns, types, strict=True)], shown_rows)


def _frame(con: duckdb.DuckDBPyConnection, query: str, result: duckdb.DuckDBPyRelation) -> pl.DataFrame:
    """The result of ``query`` (``result``) as a frame: plain types (:func:`_plain_types`), a repeated
    column name qualified by its table (:func:`_qualified`)."""
    frame = _plain_types(result.pl())
    return frame.rename(dict(_qualified(con, query, result.columns, frame.columns)))


#: Words of a statement that read the catalog (its tables' columns and comments) or a table by a name in
#: a string: every table is read, and documented, for it.
_CATALOG_WORDS = frozenset({"information_schema", "describe", "show", "summarize", "query", "query_table"})


def _catalog_read(words: set[str]) -> bool:
    """Whether a statement of ``words`` (lower case) may read the catalog (:data:`_CATALOG_WORDS`, DuckDB's
    ``duckdb_*`` and ``pragma_*`` functions, the ``pg_catalog`` and ``sqlite_master`` tables)."""
    return any(w in _CATALOG_WORDS or w.startswith(("duckdb_", "pragma", "pg_", "sqlite_")) for w in words)


@contextmanager
def _users_query(
    query: str,
    store: Store | str | Path | None,
    runs: list[str] | None,
    timeout: float | None,
    memory_limit: int | str | None,
) -> Iterator[tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyRelation]]:
    """A connection for users' SQL (:func:`connect`) and ``query`` on it, within the bounds of :func:`sql`
    (its result fetched inside: DuckDB's errors become :class:`QueryError`). Only the tables the statement
    and the metrics it binds name are read, and documented only where it may read the catalog."""
    limit = default_memory_limit() if memory_limit is None else memory_bytes(memory_limit)
    store = Store.of(store)
    bound = dependency_order(query)
    words = {w.lower() for text in (query, *(t for _, t in bound)) for w in re.findall(r"[A-Za-z_]\w*", text)}
    documented = _catalog_read(words)
    con = connect(store, runs, memory_limit=limit, read=None if documented else words)

    timed_out = threading.Event()

    def stop(by_timeout: bool) -> None:  # (from the timer's or the signal watcher's thread)
        if by_timeout:
            timed_out.set()
        _STOPPED.add(id(con))
        with suppress(Exception):  # the query may have just ended
            con.interrupt()

    timer = threading.Timer(timeout, stop, args=(True,)) if timeout else None
    try:
        check_read_only(query, con)
        if documented:
            _comment_tables(con)
        for name, text in bound:
            con.execute(f"CREATE TEMP VIEW {name} AS {_strip_terminator(text)}")
            if documented:
                _comment_view(con, name, text)
        if timer is not None:
            timer.start()
        # Ctrl-C and SIGTERM interrupt the query at once (its fetch by the caller included): DuckDB looks at
        # Python's signals only between its tasks, which a sort that spills to disk puts tens of seconds apart
        with reading(store, runs), calling_on_signal(lambda: stop(False)):
            yield con, con.sql(query)
    except KeyboardInterrupt:  # (the signal's handler raised it, maybe before the watching thread saw it)
        _STOPPED.add(id(con))
        raise
    except Exception as e:
        # Ctrl-C or SIGTERM, whatever DuckDB made of it (DuckDB 2: an InterruptException for the interrupt)
        if _by_signal(e) or (_interrupted(e) and not timed_out.is_set()):
            _STOPPED.add(id(con))
            raise KeyboardInterrupt from None
        if _interrupted(e):
            raise QueryError(f"query stopped after {timeout:g} s (--timeout)") from None
        if isinstance(e, duckdb.OutOfMemoryException):
            raise QueryError(f"query needs more than {_size(limit)} of memory (--memory-limit)") from None
        if isinstance(e, duckdb.CatalogException):
            raise QueryError(_no_such_table(str(e)) or _one_line(str(e))) from None
        if isinstance(e, duckdb.Error):
            raise QueryError(_one_line(str(e))) from None
        raise
    finally:
        if timer is not None:
            timer.cancel()
            if timer.is_alive():
                timer.join()
        if id(con) in _STOPPED:  # its tasks may still run: not waited for
            _close_later(con)
        else:
            close(con)


def _qualified(
    con: duckdb.DuckDBPyConnection, query: str, names: list[str], frame_names: list[str]
) -> list[tuple[str, str]]:
    """New names for a result's repeated column names ``names`` (DuckDB's frame, whose columns are
    ``frame_names``, makes the second ``name`` of a join ``name_1``): each repeat named after its table,
    ``s.name`` and ``runs.name``, where the statement's parse tree tells (a SELECT of columns and ``*``
    over tables and joins); as pairs (frame column, new name). Nothing when no name repeats, or the tree
    does not tell."""
    if len(set(names)) == len(names):
        return []
    with suppress(duckdb.Error, KeyError, IndexError, TypeError, ValueError):
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])  # type: ignore[index]
        node = tree["statements"][0]["node"]
        tables = _from_columns(con, node["from_table"])
        labels: list[str] = []
        for item in node["select_list"]:
            if item["type"] == "STAR" and not item.get("exclude_list") and not item.get("replace_list"):
                relation = item.get("relation_name") or ""
                labels += [f"{t}.{c}" for t, c in tables if relation in ("", t)]
            elif item["type"] == "COLUMN_REF" and not item.get("alias"):
                labels.append(".".join(item["column_names"]) if len(item["column_names"]) == 2 else "")
            else:
                labels.append("")
        if not len(labels) == len(names) == len(frame_names):
            return []
        repeated = {n for n in names if names.count(n) > 1}
        renamed = [(f, lab) for f, n, lab in zip(frame_names, names, labels, strict=True) if n in repeated and lab]
        if len({lab for _, lab in renamed}) == len(renamed) and not {lab for _, lab in renamed} & set(frame_names):
            return renamed
    return []


def _from_columns(con: duckdb.DuckDBPyConnection, ref: dict[str, Any]) -> list[tuple[str, str]]:
    """(table or alias, column) of what ``*`` gives over a FROM clause's tables and joins, in order (the
    columns a USING join shares, once); ValueError for anything else (a subquery, a function)."""
    if ref["type"] == "BASE_TABLE":
        label = ref.get("alias") or ref["table_name"]
        described = con.execute(f"SELECT column_name FROM (DESCRIBE {_ident(ref['table_name'])})").fetchall()
        return [(label, c) for (c,) in described]
    joined = ref["type"] == "JOIN" and ref.get("ref_type", "REGULAR") in ("REGULAR", "CROSS")
    if joined and ref.get("join_type") not in ("SEMI", "ANTI"):
        left, right = _from_columns(con, ref["left"]), _from_columns(con, ref["right"])
        shared = set(ref.get("using_columns") or [])
        return left + [(t, c) for t, c in right if c not in shared]
    raise ValueError(ref["type"])


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _no_such_table(message: str) -> str | None:
    """DuckDB's "Table with name X does not exist! Did you mean ...?" said with the names there are
    (DuckDB suggests its own catalog's tables, such as ``pg_am``); None for other catalog errors."""
    m = re.search(r"Table with name (\S+) does not exist", message)
    if m is None:
        return None
    metrics = sorted(n for n in query_names() if not n.startswith("_"))
    return (
        f"{m.group(1)}: no such table or metric; tables: {', '.join(TABLES)}; metrics: {', '.join(metrics)} "
        "(`traceq schema` and `traceq queries` describe them)"
    )


def _comment_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Each canonical table's and column's documentation as DuckDB comments (``information_schema``)."""
    for table in TABLES.values():
        con.execute(f"COMMENT ON VIEW {table.name} IS {sql_string(table.doc)}")
        for column, meaning in {**keys_of(table), **{c.name: c.doc for c in table.columns}}.items():
            con.execute(f"COMMENT ON COLUMN {table.name}.{column} IS {sql_string(meaning)}")


def _comment_view(con: duckdb.DuckDBPyConnection, name: str, text: str) -> None:
    """A bound metric's summary and documented columns (its file's header) as DuckDB comments."""
    header = doc(text)
    con.execute(f"COMMENT ON VIEW {name} IS {sql_string(str(header['summary']))}")
    columns = {c for (c,) in con.execute(f"SELECT column_name FROM (DESCRIBE {name})").fetchall()}
    for column, (_, meaning) in header["columns"].items():  # type: ignore[attr-defined]
        if column in columns:
            con.execute(f"COMMENT ON COLUMN {name}.{column} IS {sql_string(meaning)}")


def stored_metrics(runs_dir: Path, run_id: str) -> frozenset[str]:
    """The metrics of :data:`~traceq.querying.stored.CACHED` stored (and current) for every rank of run
    ``run_id`` (under a store's ``runs_dir``)."""
    return frozenset(n for n in CACHED if stored_files(runs_dir, [run_id], n, metric_fingerprint(n)) is not None)


class Session:
    """One read-only connection over some runs in which each query of ``queries/`` runs at most once.

    A query and the building blocks it requires become tables the first time they are needed, so the
    metrics of a report (which share ``_windows``, ``_gpu_work``, ``_gpu_islands``, ``gpu_gaps``) scan
    the store once instead of once per metric, and a comparison computes both runs in one pass. Results
    stored at ingest become views over their files instead (read where used). The tables live in the
    connection's in-memory database only (where its cursors see them, for :meth:`make`); the store is
    never written.

    A session is opened for users by default: its connection can open no file (:func:`connect`), so
    :meth:`sql` may be given anyone's SQL. ``own_queries=True`` (reports and comparisons, which run only
    traceq's query files) lets DuckDB read the runs' Parquet files itself, and no other file; with a
    ``memory_limit`` too (a size such as ``"300MB"``), DuckDB keeps to it while tables are made, as in
    :meth:`over_ranks` (its configuration is then left unlocked for that: :func:`connect`'s ``settable``).
    """

    def __init__(
        self,
        store: Store | str | Path | None = None,
        runs: list[str] | None = None,
        con: duckdb.DuckDBPyConnection | None = None,
        use_stored: bool = True,
        own_queries: bool = False,
        memory_limit: str | None = None,
    ) -> None:
        self.store = None if con is not None else Store.of(store)
        self.runs = runs
        #: read metrics stored at ingest where every run has them (False: always compute from events)
        self.use_stored = use_stored and self.store is not None
        #: the Arrow datasets of the connection by name, registered again on each of its cursors
        self._sources: dict[str, Any] = {}
        self._con = con
        self._own_queries = own_queries
        if con is not None:
            ((access, allowed),) = con.execute(
                "SELECT current_setting('enable_external_access'), current_setting('allowed_paths')"
            ).fetchall()
        #: whether DuckDB may read Parquet files itself (else stored metrics are Arrow datasets too): as
        #: :func:`_connect` opens it, where the session's own queries run
        self._reads_files = own_queries if con is None else bool(access or allowed)
        self._made: set[str] = set()
        self._frames: dict[str, pl.DataFrame] = {}
        self._scratch: Path | None = None
        #: DuckDB's memory bound while tables are made (see :meth:`over_ranks`); a session over a store is
        #: given one with ``own_queries`` only
        self._memory_limit: str | None = None
        #: DuckDB's default limit (read when the limit is set) and whether it is in force now
        self._default_memory = ""
        self._lifted = False
        if memory_limit is not None:
            if not own_queries or con is not None:
                raise ValueError("a memory limit is for a session of traceq's own queries over a store")
            self._memory_limit = memory_limit

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The session's connection (:func:`connect`), opened when first needed: a report whose results
        were all stored at ingest reads them without DuckDB (:meth:`query`)."""
        if self._con is None:
            limit = self._memory_limit
            self._con, sources = _connect(self.store, self.runs, own_queries=self._own_queries, settable=bool(limit))
            self._sources.update(sources)
            if limit is not None:
                self._limit_memory(limit)
        return self._con

    def _limit_memory(self, limit: str) -> None:
        """Keep DuckDB to ``limit`` while tables are made (:meth:`memory_limit_lifted` restores its default,
        read here: under a full limit even reading a setting may not find the memory)."""
        ((self._default_memory,),) = self.con.execute("SELECT current_setting('memory_limit')").fetchall()
        self.con.execute(f"SET memory_limit = {sql_string(limit)}")
        self._memory_limit = limit

    def run_row(self, run_id: str) -> dict[str, Any]:
        """The ``runs`` row of ``run_id``, one of the session's runs: from the store's catalog, without a
        query (a session over ranks being written has no catalog: there, from its ``runs`` view)."""
        if self.store is not None:
            row = self.store.catalog_row(run_id)
        else:
            row = next(iter(self.sql("select * from runs").filter(pl.col("run_id") == run_id).rows(named=True)), None)
        if row is None:
            raise QueryError(f"{run_id}: no such run in this session")
        return row

    @classmethod
    def over_ranks(cls, folders: dict[int, Path], run_id: str = "run", memory_limit: str | None = None) -> Session:
        """A session over rank folders of a run being written (``folders`` by rank), for traceq's own
        queries. The files are linked into a scratch store layout so that the views are exactly the
        store's (hive keys as partition constants, which DuckDB plans joins on far better than literals).
        With ``memory_limit``, DuckDB keeps to it, spilling (as every connection does) under the system's
        temporary folder; a query it cannot run within the limit runs again on fewer DuckDB threads, and
        then without it (:meth:`_create_within_limit`)."""
        scratch = private_dir("traceq-ranks")
        for rank, folder in folders.items():
            rank_dir = scratch / "runs" / f"run_id={run_id}" / f"rank={rank}"
            rank_dir.mkdir(parents=True)
            for path in folder.glob("*.parquet"):
                (rank_dir / path.name).symlink_to(path.resolve())
        (scratch / MARKER).write_text(MARKER_TEXT)  # the ranks being written are of this format
        session = cls(runs=[run_id], con=connect(Store(scratch), [run_id], locked=False))
        session._scratch = scratch
        if memory_limit is not None:
            session._limit_memory(memory_limit)
        return session

    def query(self, name: str) -> pl.DataFrame:
        """The result of ``queries/NAME.sql`` over this session's runs (computed once; results stored at
        ingest are read from their files, as their view would read them, without DuckDB)."""
        if name not in self._frames:
            stored = self._stored_files(name) if name not in self._made else None
            if stored is not None:
                with reading(self.store, self.runs):
                    self._frames[name] = _stored_frame(stored)
            else:
                self.make([name])
                self._frames[name] = self._run(f"SELECT * FROM {name}")
        return self._frames[name]

    def stream(self, name: str, batch_rows: int = 1 << 16) -> pl.LazyFrame:
        """The result of ``queries/NAME.sql`` as a LazyFrame that fetches it in batches (not kept: for
        results too large to hold, written as they come)."""
        self.make([name])
        schema = _plain_types(self._run(f"SELECT * FROM {name} LIMIT 0")).schema

        def batches(columns: list[str] | None) -> Iterator[pl.DataFrame]:
            # The limit is for making the table (sorts, joins, windows): a scan of it holds a batch, but
            # under a small limit DuckDB may fail to pin even the blocks it reads.
            with self.memory_limit_lifted():
                try:
                    reader = self.con.sql(f"SELECT * FROM {name}").to_arrow_reader(batch_rows)
                    for batch in reader:
                        frame = pl.from_arrow(batch)
                        assert isinstance(frame, pl.DataFrame)
                        yield _plain_types(frame).cast(schema)  # strict: one column type for every batch
                except duckdb.Error as e:
                    raise QueryError(f"{name}: {_one_line(str(e))}") from None

        return lazy_source(batches, schema)

    def fetch(self, name: str, run_id: str, rank: int | None = None, batch_rows: int = 1 << 16) -> pl.DataFrame:
        """The rows of ``run_id`` (of rank ``rank``; None: all its ranks) in the result of ``queries/NAME.sql``,
        for a reader that reads them once: the blocks it requires are made, but not its table, and the rows
        come in Arrow batches of ``batch_rows``, each converted as it comes (a table, then a frame of it,
        would hold the result three times over, and DuckDB keeps a dropped table's memory). Nothing is
        kept; a result made, fetched or stored already is read from there (:meth:`query`)."""
        if name in self._made or name in self._frames or self._stored_files(name) is not None:
            frame = self.query(name).filter(pl.col("run_id") == run_id)
            return frame if rank is None else frame.filter(pl.col("rank") == rank)
        text = query_text(name)
        self.make(requires(text))
        where = f"run_id = {sql_string(run_id)}" + ("" if rank is None else f" AND rank = {int(rank)}")
        try:
            with reading(self.store, self.runs):
                query = f"SELECT * FROM ({_strip_terminator(text)}\n) WHERE {where}"  # after a last -- comment
                reader = self.con.sql(query).to_arrow_reader(batch_rows)
                frames = [pl.from_arrow(batch) for batch in reader]
        except duckdb.Error as e:
            raise QueryError(f"{name}: {_one_line(str(e))}") from None
        if not frames:
            frames = [pl.from_arrow(reader.schema.empty_table())]
        return _plain_types(pl.concat(frames, rechunk=False))  # type: ignore[arg-type]

    def sql(self, query: str) -> pl.DataFrame:
        """An ad-hoc read-only query; the metrics and blocks it names (:func:`used_queries`) are made first,
        but those the connection holds already (its ``-- Requires:`` lines are always made)."""
        check_read_only(query, self.con)
        held = {n for (n,) in self.con.execute("SELECT table_name FROM duckdb_tables() UNION ALL "
                                               "SELECT view_name FROM duckdb_views()").fetchall()}  # fmt: skip
        named = requires(query)
        self.make([n for n in used_queries(query) if n in named or n not in held])
        return self._run(query)

    def make(self, names: Iterable[str], workers: int = 1, made: Callable[[str], None] | None = None) -> None:
        """Make the tables of the queries ``names`` and of the blocks they require, each once, on up to
        ``workers`` connections at once (cursors of this one), each as soon as the blocks it requires
        are made: a chain of queries that each need the one before leaves cores idle, which independent
        ones then use. ``made`` hears each of ``names`` once its table is made. A session with a memory
        limit makes one at a time (the limit is the database's: lifting it for one query lifts it for
        all)."""
        names = list(dict.fromkeys(names))
        plan = self._plan(names)

        def done(name: str) -> None:
            self._made.add(name)
            if made is not None and name in names:
                made(name)

        if workers <= 1 or self._memory_limit is not None:
            for name, (statement, _) in plan.items():
                self._create(name, statement, self.con)
                done(name)
            return
        with self._threads_shared(workers):
            self._make_at_once(plan, workers, done)

    def drop(self, names: Iterable[str]) -> None:
        """Free the tables (or views) of ``names`` made in this session; a query needing one makes it again."""
        names = [name for name in names if name in self._made]
        if not names:
            return
        with self.memory_limit_lifted():  # a full limit leaves DuckDB 1 no memory to look a table up in
            for name in names:
                ((kind,),) = self.con.execute(
                    "SELECT count(*) FROM duckdb_views() WHERE view_name = ? AND NOT internal", [name]
                ).fetchall()
                self.con.execute(f"DROP {'VIEW' if kind else 'TABLE'} {name}")
                self._made.discard(name)
                self._frames.pop(name, None)

    def keep_only(self, names: Iterable[str]) -> None:
        """Free every table (or view) made in this session but those of ``names``."""
        self.drop(self._made - set(names))

    def _make_at_once(self, plan: dict[str, tuple[str, list[str]]], workers: int, done: Callable[[str], None]) -> None:
        """Make the tables of ``plan`` on ``workers`` cursors, each once the blocks it requires are made;
        the first failure ends the plan (queries in flight finish)."""
        import queue
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait  # (2 ms: not at `sql`'s start)

        cursors: queue.SimpleQueue[duckdb.DuckDBPyConnection] = queue.SimpleQueue()
        for _ in range(workers):
            cursor = self.con.cursor()
            for source, dataset in self._sources.items():
                cursor.register(source, dataset)
            cursors.put(cursor)

        def create(name: str) -> str:
            cursor = cursors.get()
            try:
                self._create(name, plan[name][0], cursor)
            finally:
                cursors.put(cursor)
            return name

        waiting, running = dict(plan), set()
        try:
            with ThreadPoolExecutor(workers, thread_name_prefix="traceq-sql") as pool:
                while waiting or running:
                    for name in [n for n, (_, deps) in waiting.items() if self._made.issuperset(deps)]:
                        del waiting[name]
                        running.add(pool.submit(create, name))
                    finished, running = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        done(future.result())
        finally:
            while not cursors.empty():
                cursors.get().close()

    @contextmanager
    def _threads_shared(self, workers: int) -> Iterator[None]:
        """DuckDB's threads shared out among ``workers`` queries in flight inside (faster than each on all
        threads: benchmarks/README.md, "Constants in the code"); unchanged where the configuration is
        locked (users' connections)."""
        # fetched whole: a result left open keeps the connection's transaction, which would then not see
        # the tables its cursors make
        ((threads, locked),) = self.con.execute(
            "SELECT current_setting('threads'), current_setting('lock_configuration')"
        ).fetchall()
        if not locked:
            self.con.execute(f"SET threads = {max(1, int(threads) // workers)}")
        try:
            yield
        finally:
            if not locked:
                self.con.execute(f"SET threads = {threads}")

    def _plan(self, names: list[str]) -> dict[str, tuple[str, list[str]]]:
        """Each query ``names`` need that is not made yet, with the statement that makes its table and
        the blocks it requires, every one after those blocks. A query whose results were stored at ingest
        (for every run of the session) becomes a view over their files, requiring nothing; the others are
        made from their SQL."""
        plan: dict[str, tuple[str, list[str]]] = {}

        def visit(name: str, stack: tuple[str, ...]) -> None:
            if name in self._made or name in plan:
                return
            if name in stack:
                raise QueryError(f"circular Requires: {' -> '.join((*stack, name))}")
            stored = self._stored_files(name)
            # a view: stored results are read where used (one of them, gpu_gaps, has a row per gap)
            if stored is not None and not self._reads_files:
                source = f"_stored_{name}"
                self._sources[source] = _arrow_dataset([str(p) for p in stored], self.store.runs_dir)
                self.con.register(source, self._sources[source])
                plan[name] = (f"CREATE VIEW {name} AS SELECT * FROM {source}", [])
                return
            if stored is not None:
                plan[name] = (f"CREATE VIEW {name} AS {_hive_select(_file_list([str(p) for p in stored]))}", [])
                return
            text = query_text(name)
            deps = requires(text)
            for dep in deps:
                visit(dep, (*stack, name))
            plan[name] = (f"CREATE TABLE {name} AS {_strip_terminator(text)}", deps)

        for name in names:
            visit(name, ())
        return plan

    def _stored_files(self, name: str) -> list[Path] | None:
        """The files of ``name``'s results stored at ingest for every run of the session, or None (not
        all stored, or not to be used)."""
        if not self.use_stored or self.store is None:
            return None
        return stored_files(self.store.runs_dir, self.runs, name, metric_fingerprint(name))

    def _create(self, name: str, statement: str, con: duckdb.DuckDBPyConnection) -> None:
        """Run ``statement`` (which makes ``name``) on ``con``; out of memory under this session's limit,
        see :meth:`_create_within_limit`."""
        try:
            with reading(self.store, self.runs):
                try:
                    con.execute(statement)
                except duckdb.OutOfMemoryException:
                    if self._memory_limit is None:
                        raise
                    self._create_within_limit(statement, con)
        except duckdb.Error as e:
            raise QueryError(f"{name}: {_one_line(str(e))}") from None

    def _create_within_limit(self, statement: str, con: duckdb.DuckDBPyConnection) -> None:
        """Run ``statement``, which ran out of memory under this session's limit, again on half as many
        DuckDB threads, then half of those, down to one (each thread holds buffers of its own, so fewer
        threads fit where many did not: benchmarks/README.md, tenth round), and only then without the
        limit, on all of them (not every operator spills)."""
        ((threads,),) = con.execute("SELECT current_setting('threads')").fetchall()
        fewer = int(threads) // 2
        try:
            while fewer >= 1:
                con.execute(f"SET threads = {fewer}")
                try:
                    con.execute(statement)
                    return
                except duckdb.OutOfMemoryException:
                    fewer //= 2
            con.execute(f"SET threads = {threads}")
            with self.memory_limit_lifted():
                con.execute(statement)
        finally:
            con.execute(f"SET threads = {threads}")

    @contextmanager
    def memory_limit_lifted(self) -> Iterator[None]:
        """DuckDB's default memory limit inside, this session's outside (inside another, nothing changes)."""
        if self._memory_limit is None or self._lifted:
            yield
            return
        # set, not RESET: DuckDB 1 then reports its default but keeps to the limit set before
        self.con.execute(f"SET memory_limit = {sql_string(self._default_memory)}")
        self._lifted = True
        try:
            yield
        finally:
            self._lifted = False
            # DuckDB 1 refuses a limit below what its tables hold in memory: the session then goes on
            # with the default (its tables are made; the next ones may take more than the limit)
            with suppress(duckdb.OutOfMemoryException):
                self.con.execute(f"SET memory_limit = {sql_string(self._memory_limit)}")

    def _run(self, query: str) -> pl.DataFrame:
        try:
            with reading(self.store, self.runs):
                return _plain_types(self.con.sql(query).pl())
        except duckdb.Error as e:
            raise QueryError(_one_line(str(e))) from None

    def close(self) -> None:
        if self._con is not None:
            close(self._con)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stored_frame(files: list[Path]) -> pl.DataFrame:
    """Stored results (files of :func:`~traceq.querying.stored.stored_files`) as their view reads them
    (:func:`_hive_select`): ``run_id`` and ``rank`` from the folder names first, then the files' columns
    by name, in the files' order."""
    frames = []
    for path in files:
        rank_dir = path.parent.parent  # run_id=<id>/rank=<r>/metrics/<query>.parquet
        with path.open("rb") as f:  # a file, not a path: the store's path is no pattern
            frame = pl.read_parquet(f)
        run_id = pl.lit(rank_dir.parent.name.removeprefix("run_id="), pl.String).alias("run_id")
        rank = pl.lit(int(rank_dir.name.removeprefix("rank=")), pl.Int64).alias("rank")
        frames.append(frame.select(run_id, rank, pl.all()))
    return _plain_types(pl.concat(frames, how="diagonal_relaxed"))


def _plain_types(frame: pl.DataFrame) -> pl.DataFrame:
    """DuckDB's HUGEINT sums and DECIMAL averages as Int64/Float64, so JSON and CSV carry plain numbers."""
    casts = []
    for name, dtype in frame.schema.items():
        whole = dtype in (pl.Int128, pl.UInt64) or (isinstance(dtype, pl.Decimal) and dtype.scale == 0)
        if whole:
            col = frame.get_column(name)
            fits = col.is_null().all() or (int(col.min()) >= -(2**63) and int(col.max()) < 2**63)
            casts.append(pl.col(name).cast(pl.Int64 if fits else pl.Float64))
        elif isinstance(dtype, pl.Decimal):
            casts.append(pl.col(name).cast(pl.Float64))
    return frame.with_columns(casts) if casts else frame


def check_read_only(query: str, con: duckdb.DuckDBPyConnection) -> None:
    """Raise :class:`QueryError` unless ``query`` is exactly one SELECT or EXPLAIN statement (parsed on
    ``con``, the query's own: DuckDB's default connection would make a database of its own, ~15 ms)."""
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as e:
        raise QueryError(_one_line(str(e))) from None
    if len(statements) != 1:
        raise QueryError(f"expected one SQL statement, got {len(statements)}")
    if statements[0].type not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
        kind = statements[0].type.name
        raise QueryError(f"only SELECT queries are allowed (got {kind}); the store is read-only to sql")


def query(
    name: str,
    store: Store | str | Path | None = None,
    run: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    memory_limit: int | str | None = None,
) -> pl.DataFrame:
    """Run the metric query ``queries/NAME.sql`` over the store (optionally one run: id or name), within
    the bounds of :func:`sql`."""
    store = Store.of(store)
    runs = [store.resolve(run)] if run is not None else None
    return sql(query_text(name), store, runs, timeout=timeout, memory_limit=memory_limit)


def _strip_terminator(text: str) -> str:
    return text.strip().rstrip(";")


def _duck_type(spec: tuple[str | tuple[str, ...], ...]) -> str:
    """DuckDB's type of a column of :mod:`traceq.schema` (its :attr:`~traceq.schema.Column.type`)."""
    name, *args = spec
    if name == "List":
        return _duck_type(args[0]) + "[]"  # type: ignore[arg-type]
    if name == "Datetime":
        return "TIMESTAMPTZ" if args[1:] and args[1] else "TIMESTAMP"
    return _DUCK_TYPES[str(name)]


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[:3])
