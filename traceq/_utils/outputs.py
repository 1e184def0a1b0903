"""The files commands write outside the store (``export --to``, ``report --html``): one guard every writer
passes, and one way of writing them.

The guard (:func:`check_output`) refuses a path inside the store (a run's files, the catalog, the marker),
anything but a regular file or a new path (a device such as ``/dev/full`` or ``/dev/null``, a FIFO, a
folder), the trace file of a stored run (with or without ``force``), and an existing file traceq did not
make unless ``force``. A file traceq made (a recogniser says what it is) is replaced, and the note says so.
:func:`atomic_output` writes under a temporary name beside the file, renamed over it when complete; the
partial files of a process that died are removed by the next write into that folder."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from traceq._utils.leftovers import TAG, remove_stale, tag
from traceq.errors import TraceqError

Store = Any
"""A :class:`traceq.store.Store` (named so here: the floor imports no stage above it)."""

#: Says what an existing file is if traceq made it (``"a traceq export of 2 runs"``), else None.
Recogniser = Callable[[Path], "str | None"]

_PARTIAL = re.compile(rf"\..+\.traceq-partial\.{TAG}")


def check_output(
    path: str | Path, store: Store | None = None, *, force: bool = False, made_by_traceq: Recogniser | None = None
) -> str | None:
    """Refuse ``path`` as an output (one-line :class:`TraceqError`) unless it is a new path or a regular
    file that may be replaced; returns None for a new path, else a note saying what is replaced."""
    path = Path(path)
    real = Path(os.path.realpath(path))  # a link into the store is the store
    if store is not None:
        root = Path(os.path.realpath(store.root))
        if real == root or root in real.parents:
            raise TraceqError(f"{path}: inside the store {store.root}; write outputs outside it")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        if not real.parent.is_dir():
            raise TraceqError(f"{path}: no such directory {path.parent}") from None
        return None
    except OSError as e:
        raise TraceqError(f"{path}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        what = "a folder" if stat.S_ISDIR(st.st_mode) else "a device, FIFO or socket"
        raise TraceqError(f"{path}: {what}, not a regular file; traceq writes only regular files and new paths")
    if store is not None and (run := _input_of(store, real, st)) is not None:
        raise TraceqError(f"{path}: the trace of the stored run {run}; traceq never overwrites its inputs")
    made = made_by_traceq(real) if made_by_traceq is not None else None
    if made is not None:
        return f"replacing {path}, {made}"
    if force:
        return f"replacing {path} (--force)"
    raise TraceqError(f"{path}: the file exists and traceq did not write it; give --force to replace it")


def _input_of(store: Store, real: Path, st: os.stat_result) -> str | None:
    """``name (run id)`` of the stored run read from the file ``real`` (by path or by inode), or None."""
    import polars as pl

    files = store.table_files("sources")
    frames = []
    for f in files:
        try:
            with f.open("rb") as handle:
                frames.append(pl.read_parquet(handle, columns=["source_path"]).with_columns(run=pl.lit(f.parts[-3])))
        except Exception:  # a damaged run's file: the catalog's path below still counts
            continue
    cat = store.catalog()
    frames.append(cat.select(pl.col("source_path"), run=pl.lit("run_id=") + pl.col("run_id")))
    names = dict(zip(cat["run_id"], cat["name"], strict=True))
    for row in pl.concat(frames, how="vertical_relaxed").drop_nulls("source_path").unique().iter_rows(named=True):
        source = Path(row["source_path"])
        try:
            same = os.path.realpath(source) == str(real) or os.path.samestat(os.stat(source), st)
        except OSError:
            same = False
        if same:
            run_id = row["run"].removeprefix("run_id=")
            return f"{names[run_id]} ({run_id})" if names.get(run_id) is not None else run_id
    return None


@contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (``.NAME.traceq-partial.<host>.<pid>.<hex>``) to write, renamed to
    ``path`` when the block completes, removed if it fails. Partial files of dead processes in that folder
    are removed first."""
    remove_stale(path.parent, _PARTIAL)
    tmp = path.with_name(f".{path.name}.traceq-partial.{tag()}")
    # made here, empty, so that a folder this user may not write is said in the system's words at once
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with suppress(OSError):
            tmp.unlink()


def starts_with(path: Path, prefixes: tuple[bytes, ...], gzipped: bool = False) -> bool:
    """Whether the file's (gunzipped) content starts with one of ``prefixes``: how traceq knows its own
    outputs."""
    import gzip

    want = max(len(p) for p in prefixes)
    try:
        opener = gzip.open if gzipped else open
        with opener(path, "rb") as f:
            head = f.read(want)
    except (OSError, EOFError):
        return False
    return head.startswith(prefixes)
