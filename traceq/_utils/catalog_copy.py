"""The JSON copy of a run's catalog row (``runs.json`` beside its ``runs.parquet``): what lists and resolves
runs without Polars, whose import is several times Python's own start-up.

The copy holds the row and the CRC-32 of the ``runs.parquet`` it copies. The Parquet row stays the
catalog: a copy is used only while it copies the ``runs.parquet`` there now (a run renamed, or its
catalog row replaced by another traceq, is read from the Parquet file until its copy follows), and a run
without one (written by an earlier traceq) is read from the Parquet file.
"""

from __future__ import annotations

import json
import os
import uuid
import zlib
from collections.abc import Collection, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

#: The copy's file name in a run's folder.
COPY = "runs.json"


def crc32(path: Path) -> str:
    """The file's CRC-32 as 8 hex digits, as the store records its files' (cheap: about 1.3 GB/s; the files
    are in the page cache at commit)."""
    crc = 0
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def write_copy(run_dir: Path, row: dict[str, Any]) -> None:
    """Write the copy of ``row``, the catalog row in ``run_dir/runs.parquet`` (written first), in one
    rename: a reader sees the old copy or the new one, never part of one. Times are written as ISO 8601
    text."""
    values = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
    text = json.dumps({"runs.parquet": crc32(run_dir / "runs.parquet"), "row": values}, ensure_ascii=False)
    staged = run_dir / f".{COPY}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        with staged.open("w", encoding="utf-8") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(staged, run_dir / COPY)
    finally:
        staged.unlink(missing_ok=True)


def read_copy(run_dir: Path, columns: Sequence[str], times: Collection[str]) -> dict[str, Any] | None:
    """The catalog row of ``run_dir`` from its copy, its ``times`` columns as times, or None where there is
    no copy of the ``runs.parquet`` there with exactly ``columns`` (none, unreadable, of another file or
    another traceq's columns: read the Parquet file then)."""
    try:
        held = json.loads((run_dir / COPY).read_text(encoding="utf-8"))
        if held["runs.parquet"] != crc32(run_dir / "runs.parquet"):
            return None
        row = held["row"]
        if list(row) != list(columns):
            return None
        return {k: datetime.fromisoformat(v) if k in times and v is not None else v for k, v in row.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None
