"""The store: a directory of Parquet files, one folder per run, readable by any Parquet engine.

Layout (a public contract; hive-partitioned so DuckDB, polars, pyarrow.dataset or Spark read it as is)::

    STORE/traceq-store.json                       store format marker
    STORE/runs/run_id=<id>/runs.parquet           the run's catalog row
    STORE/runs/run_id=<id>/runs.json              a copy of it, read without Polars
    STORE/runs/run_id=<id>/rank=<r>/events.parquet
    STORE/runs/run_id=<id>/rank=<r>/steps.parquet
    STORE/runs/run_id=<id>/rank=<r>/threads.parquet
    STORE/tmp/                                    runs being written (never read)

A run is written completely under ``tmp/`` and then renamed into ``runs/`` in one step, so readers
see it whole or not at all; an interrupted ingest leaves at most a folder in ``tmp/``, removed by the
next write. The catalog is the union of the ``runs.parquet`` files: there is no second index to get
out of step, and two processes can add runs concurrently.

Each catalog row records the run's files with their sizes and CRC-32s (``files``). Whenever the store
is read, every run's files are checked against their sizes (a few ``stat`` calls per run); a run whose
catalog row cannot be read or whose files are missing or of another size is *damaged*: it is left out
of every table (with a warning naming it, :meth:`Store.damaged`), a command naming it fails naming the
problem, ingesting its trace again replaces it, and :func:`remove_run` removes it. :func:`check_store`
also compares the checksums and reads every Parquet footer.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceq._utils.catalog_copy import COPY, crc32, read_copy, write_copy
from traceq._utils.leftovers import remove_stale, tag
from traceq._utils.on_first_use import OnFirstUse
from traceq.errors import StoreError, as_text, not_utf8
from traceq.locations import MARKER as _MARKER
from traceq.locations import STORE_ENV, default_store_path
from traceq.schema import RANK_TABLES, RUNS, SOURCES, RunTables

if TYPE_CHECKING:
    import polars as pl
else:  # listing and resolving runs reads the catalog's JSON copies (:mod:`traceq._utils.catalog_copy`)
    pl = OnFirstUse("polars")

#: The store format written in its marker file, and the only one read: a change to what the readers store
#: (kinds, columns' meaning) is a new format. 2: the host's waits on a full launch queue are kind
#: ``queue_full`` (1 stored them as ``other``). 3: an Nsight Systems capture's NVTX ranges that PyTorch's
#: ``emit_nvtx`` did not make (a user's, a library's) are kind ``annotation`` (2 stored them as ``op``).
FORMAT_VERSION = 3
#: The marker file's text: the format of the runs written with it.
MARKER_TEXT = json.dumps({"format": FORMAT_VERSION}) + "\n"


def _check_format(root: Path, marker: Path) -> None:
    """Refuse a store of another format than :data:`FORMAT_VERSION` in one line: its runs would be read
    with the wrong meaning. Only ingest writes a store, so it is never upgraded in place."""
    try:
        written = json.loads(marker.read_text(encoding="utf-8")).get("format")
    except (OSError, ValueError, AttributeError):
        written = None
    if written == FORMAT_VERSION:
        return
    if isinstance(written, int) and written > FORMAT_VERSION:
        raise StoreError(f"{root}: written by a newer traceq (store format {written}; this one reads "
                         f"{FORMAT_VERSION}): upgrade traceq")  # fmt: skip
    raise StoreError(f"{root}: written by an older traceq (store format {written or 'unknown'}; this one reads "
                     f"{FORMAT_VERSION}): ingest its traces again into a new store (--store DIR), "
                     "or remove this one")  # fmt: skip


class Store:
    """A traceq store directory."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_store_path()
        if (byte := not_utf8(str(self.root))) is not None:  # DuckDB and Polars take paths as UTF-8 text
            raise StoreError(f"{as_text(self.root)}: a store's path must be UTF-8 (it holds byte 0x{byte:02x})")
        #: each run folder's catalog row as read, by the identity of its ``runs.parquet`` when read
        self._rows: dict[Path, tuple[tuple[int, int, int], tuple[Row | None, str | None]]] = {}
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"{self.root}: the store path exists and is not a directory")
        marker = self.root / _MARKER
        # a store being created holds only its marker being written until the marker is in place
        busy = self.root.is_dir() and any(not p.name.startswith(f".{_MARKER}.") for p in self.root.iterdir())
        if busy and not marker.exists():
            raise StoreError(f"{self.root}: not a traceq store (no {_MARKER}); choose an empty or new directory")
        if marker.is_file():
            _check_format(self.root, marker)

    @classmethod
    def of(cls, store: Store | str | Path | None) -> Store:
        """``store`` itself if it is a :class:`Store`, else the store at that path (None: the default one)."""
        return store if isinstance(store, Store) else cls(store)

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def exists(self) -> bool:
        return (self.root / _MARKER).exists()

    @classmethod
    def open(cls, root: str | Path) -> Store:
        """An existing store at ``root``: a path that holds none (a typo) is an error naming it, not an
        empty store."""
        store = cls(root)
        if not store.exists():
            raise StoreError(f"{store.root}: no such store (nothing was ingested there; check --store or ${STORE_ENV})")
        return store

    # -- reading -------------------------------------------------------------------------------------
    def run_dirs(self) -> list[Path]:
        if not self.runs_dir.is_dir():
            return []
        return sorted(p for p in self.runs_dir.iterdir() if p.name.startswith("run_id=") and p.is_dir())

    def catalog(self) -> pl.DataFrame:
        """The ``runs`` table: one row per stored run that is whole, oldest first, with ``run_id`` (damaged
        runs are left out: :meth:`damaged`)."""
        return pl.DataFrame(self.catalog_rows(), schema={"run_id": pl.String, **RUNS.schema})

    def catalog_rows(self) -> list[Row]:
        """:meth:`catalog` as rows (column -> value), read without Polars where every run has its catalog
        row's JSON copy (:mod:`traceq._utils.catalog_copy`)."""
        return self._scan()[0]

    def catalog_row(self, run_id: str) -> Row | None:
        """The catalog row of ``run_id`` as :meth:`catalog_rows` gives it, reading that run's alone; None
        where the run is missing or damaged."""
        run_dir = self.runs_dir / f"run_id={run_id}"
        if not run_dir.is_dir():
            return None
        row, problem = self._catalog_row(run_dir)
        return {"run_id": run_id, **row} if problem is None and row is not None else None

    def damaged(self) -> dict[str, Damage]:
        """The damaged runs by run id: those whose catalog row cannot be read or whose files are missing
        or of another size than written (cheap: no file is read but the catalog rows)."""
        return self._scan()[1]

    def _scan(self) -> tuple[list[Row], dict[str, Damage]]:
        rows, damaged = [], {}
        for d in self.run_dirs():
            run_id = d.name[len("run_id=") :]
            row, problem = self._catalog_row(d)
            if problem is None and row is not None:
                rows.append({"run_id": run_id, **row})
            else:
                damaged[run_id] = Damage(run_id, row["name"] if row is not None else None, problem or "unreadable")
        rows.sort(key=_ingested)  # stable: runs of one time in folder order
        return rows, damaged

    def _catalog_row(self, run_dir: Path) -> tuple[Row | None, str | None]:
        """:func:`_read_run` of a run folder, its ``runs.parquet`` read only the first time this store reads
        it and again once it is another file (written anew: another inode, size or time); its files are
        checked every time."""
        try:
            st = (run_dir / "runs.parquet").stat()
        except OSError:
            return _read_run(run_dir)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        held = self._rows.get(run_dir)
        if held is None or held[0] != key:
            held = self._rows[run_dir] = (key, _read_row(run_dir))
        row, problem = held[1]
        if row is None or problem is not None:
            return row, problem
        return row, _files_problem(run_dir, row)

    def resolve(self, ref: str, damaged_ok: bool = False) -> str:
        """A run id from a run id, a unique run id prefix, or a run name. A damaged run is refused naming
        its problem (unless ``damaged_ok``: to remove it)."""
        if not_utf8(ref) is not None:  # no run is named so (names are text): a file's name, perhaps
            raise StoreError(f"{as_text(ref)}: no such run in {self.root} (see `traceq runs`)")
        rows, damaged = self._scan()
        known = [(r["run_id"], r["name"]) for r in rows] + [(d.run_id, d.name) for d in damaged.values()]
        for candidates in (
            [k for k in known if k[0] == ref],
            [k for k in known if k[1] == ref],
            [k for k in known if k[0].startswith(ref)] if len(ref) >= MIN_PREFIX else [],
        ):
            ids = list(dict.fromkeys(run_id for run_id, _ in candidates))
            if len(ids) == 1:
                if ids[0] in damaged and not damaged_ok:
                    raise StoreError(damaged[ids[0]].message(self))
                return ids[0]
            if len(ids) > 1:
                raise StoreError(f"{ref}: matches {len(ids)} runs ({_listed(candidates)}); use a run id")
        starting = [k for k in known if k[0].startswith(ref)] if ref else []
        if len(starting) > 1:
            raise StoreError(f"{ref}: an ambiguous run id prefix, the start of {len(starting)} runs "
                             f"({_listed(starting)}); give more of the id")  # fmt: skip
        if len(starting) == 1:
            raise StoreError(f"{ref}: too short a run id prefix (the start of {_listed(starting)}); "
                             f"give at least {MIN_PREFIX} characters")  # fmt: skip
        raise StoreError(f"{ref}: no such run in {self.root} (see `traceq runs`)")

    def latest(self, n: int = 1) -> list[str]:
        """The run ids of the ``n`` runs ingested last (by ``ingested_at``), oldest first; fewer if the
        store holds fewer."""
        return [r["run_id"] for r in self.catalog_rows()][-n:] if n > 0 else []

    def before(self, run_id: str) -> str | None:
        """The run ingested just before ``run_id`` (by ``ingested_at``), or None for the first run."""
        ids = [r["run_id"] for r in self.catalog_rows()]
        at = ids.index(run_id)
        return ids[at - 1] if at > 0 else None

    def table_files(self, table: str, runs: Collection[str] | None = None) -> list[Path]:
        """The Parquet files of ``table`` across runs (only those of ``runs``, if given) and ranks, found
        by listing the store's folders: the store's path is never read as a glob pattern (a store at
        ``st[1]`` or ``st*x`` would match other folders)."""
        files = []
        whole = {r["run_id"] for r in self.catalog_rows()} if runs is None else None  # every run that is not damaged
        for run_dir in self.run_dirs():
            run_id = run_dir.name[len("run_id=") :]
            if run_id not in (runs if runs is not None else whole):  # type: ignore[operator]
                continue
            if table == RUNS.name:
                files += [run_dir / "runs.parquet"] if (run_dir / "runs.parquet").is_file() else []
                continue
            for rank_dir in sorted(p for p in run_dir.iterdir() if p.name.startswith("rank=") and p.is_dir()):
                files += [rank_dir / f"{table}.parquet"] if (rank_dir / f"{table}.parquet").is_file() else []
        return files

    # -- writing -------------------------------------------------------------------------------------
    def _init(self) -> None:
        """Make the store: its marker first (so another process never sees a store without one), then
        its folders."""
        marker = self.root / _MARKER
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if not marker.exists():
                tmp = self.root / f".{_MARKER}.{uuid.uuid4().hex}"
                tmp.write_text(MARKER_TEXT)
                os.replace(tmp, marker)
            self.runs_dir.mkdir(exist_ok=True)
            self.tmp_dir().mkdir(exist_ok=True)
        except OSError as e:
            raise StoreError(f"{self.root}: cannot write the store: {e.strerror or e}") from None

    def write_run(
        self, run_id: str, run_row: pl.DataFrame, ranks: Mapping[int, RunTables], sources: pl.DataFrame | None = None
    ) -> bool:
        """Write a run held in memory atomically. Returns False (writing nothing) if already stored."""
        with RunWriter(self) as writer:
            for rank, tables in ranks.items():
                write_partition(writer.dir, f"part-{rank}", tables)
            return writer.commit(run_id, run_row, {f"part-{rank}": rank for rank in ranks}, sources)

    def begin_run(self) -> RunWriter:
        """Start writing a run whose rank partitions are written by :func:`write_partition` (any process)."""
        return RunWriter(self)

    def _clean_tmp(self) -> None:
        """Remove leftovers of interrupted writes: on this host, those whose writer process is gone; from
        other hosts sharing the store (Ray workers, other nodes), whose process cannot be checked from
        here, those untouched for :data:`FOREIGN_STALE_S`. Only what traceq made is removed (its names,
        owned by this user, never through a symbolic link: :func:`~traceq._utils.leftovers.remove_stale`)."""
        remove_stale(self.tmp_dir(), _STAGED, FOREIGN_STALE_S)

    def tmp_dir(self) -> Path:
        """``tmp/``, refused where it is a symbolic link: traceq deletes its leftovers there, and nothing
        outside the store is ever deleted."""
        tmp = self.root / "tmp"
        if tmp.is_symlink():
            raise StoreError(
                f"{tmp}: a symbolic link; traceq writes and deletes its temporary files there, so it must be a "
                "folder inside the store (replace the link by a folder)"
            )
        return tmp


class RunWriter:
    """A run being written: rank partitions are staged in one folder under ``tmp/`` (by this or other
    processes, see :func:`write_partition`), then :meth:`commit` names them ``rank=<r>`` and moves the
    folder into ``runs/`` with one rename. Leaving the ``with`` block without committing removes it."""

    def __init__(self, store: Store) -> None:
        store._init()
        store._clean_tmp()
        self.store = store
        self.name: str | None = None
        self.dir = store.tmp_dir() / f"run.{tag()}"
        try:
            self.dir.mkdir(parents=True)
        except OSError as e:  # a read-only store, a full disk
            raise StoreError(f"{store.root}: cannot write the store: {e.strerror or e}") from None

    def commit(
        self,
        run_id: str,
        run_row: pl.DataFrame,
        parts: Mapping[str, int],
        sources: pl.DataFrame | None = None,
        name_given: bool = True,
    ) -> bool:
        """Publish the staged parts as ranks of ``run_id``, each with its row of ``sources`` (matched on a
        ``rank`` column). Returns False (nothing written) if the run is already stored. The row's name must
        be free (:func:`name_problem`; else :class:`NameTaken`) if ``name_given``; a name traceq chose is
        made free (:func:`free_name`). ``self.name`` is the name stored."""
        with store_lock(self.store):  # the name is checked and the run published under the lock
            return self._commit(run_id, run_row, parts, sources, name_given)

    def _commit(
        self, run_id: str, run_row: pl.DataFrame, parts: Mapping[str, int], sources: pl.DataFrame | None,
        name_given: bool,
    ) -> bool:  # fmt: skip
        final = self.store.runs_dir / f"run_id={run_id}"
        if final.exists() and not _set_aside_if_damaged(self.store, run_id):
            return False
        name = run_row["name"][0]
        if name_given and (problem := name_problem(self.store, name, run_id)) is not None:
            raise NameTaken(problem)
        if not name_given:
            run_row = run_row.with_columns(name=pl.lit(free_name(self.store, name, run_id), pl.String))
        self.name = run_row["name"][0]
        if len(set(parts.values())) != len(parts):
            raise StoreError(f"run {run_id}: two parts claim the same rank")
        for part, rank in parts.items():
            if not (self.dir / part).is_dir():
                raise StoreError(f"run {run_id}: rank {rank} was not written")
            os.rename(self.dir / part, self.dir / f"rank={rank}")
            source = sources.filter(pl.col("rank") == rank) if sources is not None else SOURCES.empty()
            write_parquet(SOURCES.conform(source), self.dir / f"rank={rank}" / f"{SOURCES.name}.parquet")
        files = json.dumps(_file_record(self.dir))
        row = RUNS.conform(run_row.with_columns(files=pl.lit(files)))
        write_parquet(row, self.dir / "runs.parquet")
        write_copy(self.dir, row.row(0, named=True))
        _fsync_dir(self.dir)
        try:
            os.rename(self.dir, final)
        except OSError:
            if final.exists():  # another process stored the same content first
                return False
            raise
        _fsync_dir(self.store.runs_dir)
        return True

    def discard(self) -> None:
        """Remove what is staged (nothing once committed)."""
        if self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


class NameTaken(StoreError):
    """A run name given for a run is refused (taken, or written like a run id)."""


@dataclass(frozen=True)
class Damage:
    """What is wrong with a stored run (``name`` is None when its catalog row cannot be read)."""

    @classmethod
    def first_of(cls, problems: pl.DataFrame) -> Damage:
        """The first problem of :func:`check_store`'s result."""
        row = problems.row(0, named=True)
        return cls(row["run_id"], row["name"], f"{row['file']}: {row['problem']}" if row["file"] else row["problem"])

    run_id: str
    name: str | None
    problem: str

    @property
    def unreadable(self) -> bool:
        """Whether the run is whole, as far as can be told, but a file of it cannot be read by this user."""
        return _UNREADABLE in self.problem

    def message(self, store: Store) -> str:
        """One line naming the run, the store and the problem, and the ways out."""
        label = f"{self.name} ({self.run_id})" if self.name is not None else self.run_id
        if self.unreadable:
            return f"run {label} in {store.root} cannot be read: {self.problem}"
        return (
            f"run {label} in {store.root} is damaged: {self.problem}; "
            f"remove it with `traceq runs rm {self.run_id}` and ingest its trace again"
        )


def remove_run(store: Store, run_id: str) -> None:
    """Remove the run ``run_id`` (whole or damaged) from ``store``: its folder leaves ``runs/`` in one
    rename (the catalog, the union of the runs' rows, loses it at once, and a reader sees the run whole
    or not at all), then its files are deleted (by the next writer if this process dies first)."""
    final = store.runs_dir / f"run_id={run_id}"
    if "/" in run_id or not final.is_dir():
        raise StoreError(f"{run_id}: no such run in {store.root} (see `traceq runs`)")
    if final.is_symlink():
        raise StoreError(f"{final}: a symbolic link, not a run folder; traceq deletes nothing through links")
    trash = store.tmp_dir() / f"rm.{tag()}"
    try:
        trash.parent.mkdir(exist_ok=True)
        os.rename(final, trash)
        _fsync_dir(store.runs_dir)
    except FileNotFoundError:
        raise StoreError(f"{run_id}: no such run in {store.root} (removed meanwhile)") from None
    except OSError as e:
        raise StoreError(f"{store.root}: cannot remove run {run_id}: {e.strerror or e}") from None
    shutil.rmtree(trash, ignore_errors=True)


#: The columns of :func:`check_store`'s result (all text).
CHECK_COLUMNS = ("run_id", "name", "file", "problem")


def check_store(store: Store, runs: Collection[str] | None = None) -> pl.DataFrame:
    """Every problem of every stored run (of ``runs``, if given): ``run_id``, ``name``, ``file``,
    ``problem``; no rows: whole. What reading the store checks (each run's catalog row, its files present
    with the sizes written), and besides each file's CRC-32 against the one written and each Parquet
    file's footer."""
    rows = []
    for run_dir in store.run_dirs():
        run_id = run_dir.name[len("run_id=") :]
        if runs is not None and run_id not in runs:
            continue
        row, problem = _read_run(run_dir)
        name = row["name"] if row is not None else None
        if problem is not None:
            rows.append({"run_id": run_id, "name": name, "file": None, "problem": problem})
            continue
        assert row is not None
        record = json.loads(row["files"]) if row["files"] is not None else {}
        for path in sorted(p for p in run_dir.rglob("*") if p.is_file() and p.name not in _CATALOG_FILES):
            rel = path.relative_to(run_dir).as_posix()
            if rel in record and crc32(path) != record[rel][1]:
                problem = "its content differs from what was written (CRC-32)"
            elif path.suffix == ".parquet" and not _parquet_footer_ok(path):
                problem = "not a readable Parquet file"
            else:
                continue
            rows.append({"run_id": run_id, "name": name, "file": rel, "problem": problem})
    return pl.DataFrame(rows, schema=dict.fromkeys(CHECK_COLUMNS, pl.String))


#: A run's catalog row and its copy: written after the record of the run's files, not in it.
_CATALOG_FILES = ("runs.parquet", COPY)
#: The catalog's columns as a run's folder holds them, and those of them that hold times.
_CATALOG_COLUMNS = [c.name for c in RUNS.columns]
_CATALOG_TIMES = frozenset(c.name for c in RUNS.columns if c.type[0] == "Datetime")
#: A catalog row: column -> value (``run_id`` too, in :meth:`Store.catalog_rows`).
Row = dict[str, Any]


def _ingested(row: Row) -> tuple[bool, datetime | None]:
    """The catalog's order: by ``ingested_at``, a run without one first."""
    return row["ingested_at"] is not None, row["ingested_at"]


def _read_run(run_dir: Path) -> tuple[Row | None, str | None]:
    """A run folder's catalog row (conformed: runs of other traceq versions may order or lack columns
    differently) and its problem (None: whole), checked cheaply: no file is read but ``runs.parquet``."""
    row, problem = _read_row(run_dir)
    if row is None or problem is not None:
        return row, problem
    return row, _files_problem(run_dir, row)


def _read_row(run_dir: Path) -> tuple[Row | None, str | None]:
    """A run folder's catalog row as :func:`_read_run` reads it, and the problem of reading it (its files
    are not checked): from its JSON copy where that copies its ``runs.parquet``, else from the Parquet file."""
    copied = read_copy(run_dir, _CATALOG_COLUMNS, _CATALOG_TIMES)
    if copied is not None:
        return copied, None
    path = run_dir / "runs.parquet"
    try:
        with path.open("rb") as f:  # a file, not a path: the store's path is no pattern
            row = RUNS.conform(pl.read_parquet(f))
    except (FileNotFoundError, IsADirectoryError):
        return None, "runs.parquet is missing"
    except PermissionError as e:
        return None, _unreadable(run_dir, "runs.parquet", e)
    except (OSError, pl.exceptions.PolarsError, pl.exceptions.PanicException):
        return None, "runs.parquet is not a readable Parquet file (truncated or overwritten)"
    if row.height != 1:
        return None, f"runs.parquet holds {row.height} rows, not 1"
    return row.row(0, named=True), None


def _files_problem(run_dir: Path, row: Row) -> str | None:
    """Whether the run's files are there with the sizes written; for runs written before the files
    were recorded, whether each of its ranks has its tables."""
    record = row["files"]
    if record is None:
        ranks = [p for p in run_dir.iterdir() if p.name.startswith("rank=")]
        if len(ranks) != row["n_ranks"]:
            return f"{len(ranks)} rank folders, not the {row['n_ranks']} written"
        files = {f"{r.name}/{t.name}.parquet": None for r in ranks for t in RANK_TABLES[:3]}
    else:
        try:
            files = {rel: size for rel, (size, _) in json.loads(record).items()}
        except (ValueError, TypeError):
            return "its catalog row's list of files is not readable"
    for rel, size in files.items():
        try:
            actual = (run_dir / rel).stat().st_size
            if not os.access(run_dir / rel, os.R_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        except PermissionError as e:
            return _unreadable(run_dir, rel, e)
        except OSError:
            folder = rel.split("/")[0]
            return f"{folder}/ is missing" if not (run_dir / folder).exists() else f"{rel} is missing"
        if size is not None and actual != size:
            return f"{rel} has {actual} bytes, not the {size} written (truncated or overwritten)"
    return None


#: The words of a problem that is a file this user may not read (:attr:`Damage.unreadable`).
_UNREADABLE = "may not be read by this user"


def _unreadable(run_dir: Path, rel: str, e: OSError) -> str:
    """``rel`` of a run cannot be read (``e``): said with the file's owner and mode where they can be seen."""
    try:
        st = (run_dir / rel).stat()
        whose = f", owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}"
    except OSError:
        whose = ""
    return f"{rel} {_UNREADABLE} ({e.strerror or e}{whose})"


def _file_record(run_dir: Path) -> dict[str, list[int | str]]:
    """Every file of a run being committed (but its catalog row) by path under ``run_dir``: [bytes, CRC-32]."""
    files = sorted(p for p in run_dir.rglob("*") if p.is_file() and p.name not in _CATALOG_FILES)
    return {p.relative_to(run_dir).as_posix(): [p.stat().st_size, crc32(p)] for p in files}


def _parquet_footer_ok(path: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        with path.open("rb") as f:
            pq.read_metadata(f)
    except (OSError, ValueError):
        return False
    return True


def _set_aside_if_damaged(store: Store, run_id: str) -> bool:
    """Remove the stored run ``run_id`` if it is damaged (its trace is being stored again, to replace
    it); False if it is whole."""
    final = store.runs_dir / f"run_id={run_id}"
    if _read_run(final)[1] is None:
        return False
    with suppress(StoreError):  # another process replacing it too removed it first
        remove_run(store, run_id)
    return True


def rename_run(store: Store, run_id: str, new_name: str) -> None:
    """Give the stored run ``run_id`` the name ``new_name``: its catalog row is written beside the old one
    and replaces it in one rename, so readers see the old name or the new one. A name that
    :func:`name_problem` refuses is refused; the check and the rename hold the store's lock, so two
    renames to one name cannot both succeed."""
    folder = _run_folder(store, run_id)
    with store_lock(store):
        problem = name_problem(store, new_name, run_id)
        if problem is not None:
            raise StoreError(problem)
        row = pl.read_parquet(folder / "runs.parquet", glob=False).with_columns(name=pl.lit(new_name, pl.String))
        staged = folder / f".runs.{os.getpid()}.{uuid.uuid4().hex[:8]}.parquet"
        try:
            write_parquet(row, staged)
            os.replace(staged, folder / "runs.parquet")
            write_copy(folder, RUNS.conform(row).row(0, named=True))  # until it is written, the Parquet row is read
        except OSError as e:
            raise StoreError(f"{store.root}: cannot rename run {run_id}: {e.strerror or e}") from None
        finally:
            staged.unlink(missing_ok=True)
        _fsync_dir(folder)


#: The fewest characters of a run id that select a run (``r`` and three hex digits).
MIN_PREFIX = 4
#: What a run id looks like (``r`` and 12 hex digits), and every prefix of one a reference may use: no run
#: name may look so, or ``runs rm NAME`` could mean another run.
ID_LIKE = re.compile(rf"r[0-9a-f]{{{MIN_PREFIX - 1},12}}")


def name_problem(store: Store, name: str, run_id: str | None = None) -> str | None:
    """Why ``name`` cannot be the name of run ``run_id`` (None: it can): empty or with spaces at either
    end, written like a run id or its prefix, or the name of another run (names select runs, so they are
    unique). Call it holding :func:`store_lock` where the name is then written."""
    if not name.strip() or name.strip() != name:
        return f"{name!r}: not a run name (empty, or spaces at either end)"
    if ID_LIKE.fullmatch(name):
        return f"{name}: looks like a run id (r and hex digits); a run name must not (choose another)"
    taken = [r["run_id"] for r in store.catalog_rows() if r["name"] == name and r["run_id"] != (run_id or "")]
    if taken:
        return f"{name}: already the name of run {taken[0]} in {store.root} (choose another)"
    return None


def free_name(store: Store, name: str, run_id: str) -> str:
    """``name`` if run ``run_id`` may have it, else the first of ``name-2``, ``name-3``, ... that it may
    (for names traceq chose: a file's name; one written like a run id gets ``-run``)."""
    base = f"{name}-run" if ID_LIKE.fullmatch(name) or not name.strip() else name
    candidate, n = base, 1
    while name_problem(store, candidate, run_id) is not None:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


@contextmanager
def store_lock(store: Store) -> Iterator[None]:
    """The store's lock (an exclusive ``flock`` of its marker file, which every store has and nothing
    rewrites), held while a run's name is checked and written: by ingest's commit and by renames. Where
    ``flock`` is missing (Windows) no lock is taken."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        fd = os.open(store.root / _MARKER, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise StoreError(f"{store.root}: cannot lock the store: {e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _listed(runs: list[tuple[str, str | None]]) -> str:
    """``id (name), ...`` of some runs (run id, name), by id."""
    named = sorted(dict(runs).items())
    return ", ".join(f"{run_id} ({name})" if name is not None else run_id for run_id, name in named)


def _run_folder(store: Store, run_id: str) -> Path:
    """The folder of the stored run ``run_id`` (an id, not a name or prefix: see :meth:`Store.resolve`)."""
    folder = store.runs_dir / f"run_id={run_id}"
    if not run_id or any(c in run_id for c in "/\\") or run_id in (".", "..") or not folder.is_dir():
        raise StoreError(f"{run_id}: no such run in {store.root} (see `traceq runs`)")
    return folder


def spill_folder(run_dir: Path) -> Path:
    """A folder for a reader's intermediate files while it reads into ``run_dir`` (beside it under
    ``tmp/``, named like a run being written, so an interrupted writer's is removed like its run)."""
    return run_dir.parent / f"spill.{tag()}"


def write_partition(run_dir: Path, part: str, tables: RunTables) -> None:
    """Write one rank's tables as ``run_dir/part``, all or nothing (its ``sources`` row comes at commit)."""
    publish_partition(stage_partition(run_dir, part, tables), run_dir, part)


def stage_partition(run_dir: Path, part: str, tables: RunTables) -> Path:
    """Write one rank's tables into a staging folder inside ``run_dir`` (invisible to commits); more can
    be added to it (the metrics stored at ingest) before :func:`publish_partition`."""
    staging = run_dir / f".{part}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        for table in RANK_TABLES:
            if table is not SOURCES:
                write_parquet(getattr(tables, table.name), staging / f"{table.name}.parquet")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def publish_partition(staging: Path, run_dir: Path, part: str) -> None:
    """Make a staged rank folder the part ``part`` of the run being written, in one rename."""
    try:
        _fsync_dir(staging)
        os.rename(staging, run_dir / part)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


#: Rows of a row group of a streamed Parquet file (a LazyFrame's): with the source's small slices
#: (:data:`traceq._utils.lazy_frames.SLICE_ROWS`) the sink would otherwise write row groups of whatever it holds.
ROW_GROUP_ROWS = 1 << 16


def write_parquet(frame: pl.DataFrame | pl.LazyFrame, path: Path) -> None:
    """How the store writes every Parquet file: zstd level 1 (as small as the default level here, 20 %
    faster to write), column statistics for filter pushdown, synced to disk. A LazyFrame is streamed, in
    row groups of :data:`ROW_GROUP_ROWS` rows."""
    options = {"compression": "zstd", "compression_level": 1, "statistics": True}
    try:
        if isinstance(frame, pl.LazyFrame):
            frame.sink_parquet(path, row_group_size=ROW_GROUP_ROWS, **options)
        else:
            frame.write_parquet(path, **options)
        with open(path, "rb") as f:
            os.fsync(f.fileno())
    except OSError as e:
        raise StoreError(f"{path.parent}: cannot write the store: {e.strerror or e}") from None
    except pl.exceptions.ComputeError as e:  # Polars' writer wraps the system's error (a full disk)
        reason = _io_reason(str(e))
        if reason is None:
            raise
        raise StoreError(f"{path.parent}: cannot write the store: {reason}") from None


def _io_reason(message: str) -> str | None:
    """The system's error inside a Polars error (``... underlying IO error: No space left on device (os
    error 28)``), or None if it holds none."""
    m = re.search(r"(?:IO error|io error|Detail): *(.*?\(os error \d+\)|\[errno \d+\][^\n]*)", message)
    return m.group(1).strip() if m else None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: A staging folder of another host is removed only after this long without change (seconds).
FOREIGN_STALE_S = 24 * 3600


#: The names of what a writer stages under ``tmp/``: ``run.`` (a run being written), ``spill.`` (a reader's
#: intermediate files), ``rm.`` (a run being removed), ``doc.`` (a run's report document being written), then
#: host, pid and 12 hex digits (older names: no host; the oldest, the run id, the pid and 8 hex digits).
_STAGED = re.compile(
    r"(?:run|spill|rm|doc|r[0-9a-f]{12})\.(?:(?P<host>[^./]+)\.)?(?P<pid>\d+)\.(?:[0-9a-f]{12}|[0-9a-f]{8})"
)
