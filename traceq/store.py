"""The store: a directory of Parquet files, one folder per run, readable by any Parquet engine.

Layout (a public contract; hive-partitioned so DuckDB, polars, pyarrow.dataset or Spark read it as is)::

    STORE/traceq-store.json                       store format marker
    STORE/runs/run_id=<id>/runs.parquet           the run's catalog row
    STORE/runs/run_id=<id>/rank=<r>/events.parquet
    STORE/runs/run_id=<id>/rank=<r>/steps.parquet
    STORE/runs/run_id=<id>/rank=<r>/threads.parquet
    STORE/tmp/                                    runs being written (never read)

A run is written completely under ``tmp/`` and then renamed into ``runs/`` in one step, so readers
see it whole or not at all; an interrupted ingest leaves at most a folder in ``tmp/``, removed by the
next write. The catalog is the union of the ``runs.parquet`` files: there is no second index to get
out of step, and two processes can add runs concurrently.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Collection, Mapping
from pathlib import Path

import polars as pl

from traceq.errors import StoreError
from traceq.schema import RANK_TABLES, RUNS, SOURCES, RunTables

DEFAULT_STORE = ".traceq"
STORE_ENV = "TRACEQ_STORE"
FORMAT_VERSION = 1
_MARKER = "traceq-store.json"


def default_store_path() -> Path:
    """``$TRACEQ_STORE`` if set, else ``./.traceq``."""
    return Path(os.environ.get(STORE_ENV) or DEFAULT_STORE)


class Store:
    """A traceq store directory."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_store_path()
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"{self.root}: the store path exists and is not a directory")
        marker = self.root / _MARKER
        # a store being created holds only its marker being written until the marker is in place
        busy = self.root.is_dir() and any(not p.name.startswith(f".{_MARKER}.") for p in self.root.iterdir())
        if busy and not marker.exists():
            raise StoreError(f"{self.root}: not a traceq store (no {_MARKER}); choose an empty or new directory")

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def exists(self) -> bool:
        return (self.root / _MARKER).exists()

    # -- reading -------------------------------------------------------------------------------------
    def run_dirs(self) -> list[Path]:
        if not self.runs_dir.is_dir():
            return []
        return sorted(p for p in self.runs_dir.iterdir() if p.name.startswith("run_id=") and p.is_dir())

    def catalog(self) -> pl.DataFrame:
        """The ``runs`` table: one row per stored run, oldest first, with ``run_id``."""
        frames = []
        for d in self.run_dirs():
            # conformed: runs written by other traceq versions may order or lack columns differently
            row = RUNS.conform(pl.read_parquet(d / "runs.parquet", glob=False))  # the store path is no pattern
            frames.append(row.with_columns(run_id=pl.lit(d.name[7:])))
        if not frames:
            return RUNS.empty().with_columns(run_id=pl.lit(None, pl.String)).select("run_id", *RUNS.schema)
        return pl.concat(frames).select("run_id", *RUNS.schema).sort("ingested_at")

    def resolve(self, ref: str) -> str:
        """A run id from a run id, a unique run id prefix, or a run name."""
        cat = self.catalog()
        for candidates in (
            cat.filter(pl.col("run_id") == ref),
            cat.filter(pl.col("name") == ref),
            cat.filter(pl.col("run_id").str.starts_with(ref)) if len(ref) >= 4 else cat.clear(),
        ):
            ids = candidates["run_id"].unique().to_list()
            if len(ids) == 1:
                return ids[0]
            if len(ids) > 1:
                raise StoreError(f"{ref}: matches {len(ids)} runs ({', '.join(sorted(ids))}); use a run id")
        raise StoreError(f"{ref}: no such run in {self.root} (see `traceq runs`)")

    def latest(self, n: int = 1) -> list[str]:
        """The run ids of the ``n`` runs ingested last (by ``ingested_at``), oldest first; fewer if the
        store holds fewer."""
        return self.catalog()["run_id"].tail(n).to_list() if n > 0 else []

    def before(self, run_id: str) -> str | None:
        """The run ingested just before ``run_id`` (by ``ingested_at``), or None for the first run."""
        ids = self.catalog()["run_id"].to_list()
        at = ids.index(run_id)
        return ids[at - 1] if at > 0 else None

    def table_files(self, table: str, runs: Collection[str] | None = None) -> list[Path]:
        """The Parquet files of ``table`` across runs (only those of ``runs``, if given) and ranks, found
        by listing the store's folders: the store's path is never read as a glob pattern (a store at
        ``st[1]`` or ``st*x`` would match other folders)."""
        files = []
        for run_dir in self.run_dirs():
            if runs is not None and run_dir.name[len("run_id=") :] not in runs:
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
                tmp.write_text(json.dumps({"format": FORMAT_VERSION}) + "\n")
                os.replace(tmp, marker)
            self.runs_dir.mkdir(exist_ok=True)
            (self.root / "tmp").mkdir(exist_ok=True)
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
        here, those untouched for :data:`FOREIGN_STALE_S`."""
        here = _host()
        for d in (self.root / "tmp").iterdir():
            host, pid = _writer(d.name)
            if host not in (None, here):
                try:
                    stale = time.time() - d.stat().st_mtime > FOREIGN_STALE_S
                except OSError:
                    continue
                if stale:
                    shutil.rmtree(d, ignore_errors=True)
                continue
            if pid == os.getpid() or (pid is not None and _alive(pid)):
                continue
            shutil.rmtree(d, ignore_errors=True)


class RunWriter:
    """A run being written: rank partitions are staged in one folder under ``tmp/`` (by this or other
    processes, see :func:`write_partition`), then :meth:`commit` names them ``rank=<r>`` and moves the
    folder into ``runs/`` with one rename. Leaving the ``with`` block without committing removes it."""

    def __init__(self, store: Store) -> None:
        store._init()
        store._clean_tmp()
        self.store = store
        self.dir = store.root / "tmp" / f"run.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:12]}"
        self.dir.mkdir(parents=True)

    def commit(
        self,
        run_id: str,
        run_row: pl.DataFrame,
        parts: Mapping[str, int],
        sources: pl.DataFrame | None = None,
    ) -> bool:
        """Publish the staged parts as ranks of ``run_id``, each with its row of ``sources`` (matched on a
        ``rank`` column). Returns False (nothing written) if the run is already stored."""
        final = self.store.runs_dir / f"run_id={run_id}"
        if final.exists():
            return False
        if len(set(parts.values())) != len(parts):
            raise StoreError(f"run {run_id}: two parts claim the same rank")
        for part, rank in parts.items():
            if not (self.dir / part).is_dir():
                raise StoreError(f"run {run_id}: rank {rank} was not written")
            os.rename(self.dir / part, self.dir / f"rank={rank}")
            source = sources.filter(pl.col("rank") == rank) if sources is not None else SOURCES.empty()
            write_parquet(SOURCES.conform(source), self.dir / f"rank={rank}" / f"{SOURCES.name}.parquet")
        write_parquet(RUNS.conform(run_row), self.dir / "runs.parquet")
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


def spill_folder(run_dir: Path) -> Path:
    """A folder for a reader's intermediate files while it reads into ``run_dir`` (beside it under
    ``tmp/``, named like a run being written, so an interrupted writer's is removed like its run)."""
    return run_dir.parent / f"spill.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:12]}"


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
    if isinstance(frame, pl.LazyFrame):
        frame.sink_parquet(path, row_group_size=ROW_GROUP_ROWS, **options)
    else:
        frame.write_parquet(path, **options)
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: A staging folder of another host is removed only after this long without change (seconds).
FOREIGN_STALE_S = 24 * 3600


def _host() -> str:
    """This host's name as it appears in staging folder names (no dots)."""
    return socket.gethostname().replace(".", "-") or "localhost"


def _writer(name: str) -> tuple[str | None, int | None]:
    """(host, pid) of the process that made a staging folder ``run.<host>.<pid>.<id>``; older names
    ``<prefix>.<pid>.<id>`` carry no host."""
    parts = name.split(".")
    if len(parts) == 4 and parts[2].isdigit():
        return parts[1], int(parts[2])
    if len(parts) == 3 and parts[1].isdigit():
        return None, int(parts[1])
    return None, None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
