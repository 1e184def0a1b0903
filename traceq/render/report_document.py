"""A run's report stored as a document at ingest, and shown from it without Polars or the analysis.

The runs that store everything a report reads (one rank with its metrics, diagnosis and step estimated
without the profiler: :data:`~traceq.ingestion.metrics.DIAGNOSIS_MIN_EVENTS` events or more) still cost
a report Polars, the analysis and its work on the stored frames: about 0.35 s over a bare interpreter,
where the issue's target is 0.15 s. Once such a run is committed, its ingest makes the report that
``traceq report RUN`` prints (the first :data:`~traceq.render.formats.TOP_OPS` ops, no steps' lanes) and
stores what its terminal and JSON forms write: the terminal's blocks as titles, lines and table rows (a
table is laid out at the width of the terminal that shows it), the JSON as its text. ``traceq report RUN``
with no other option, as a table or JSON, shows the document instead of computing the report, where it
was made by these very source files (:func:`made_by`) for the run as stored now (its name and files, from
its catalog row); anything else computes the report (a renamed run, another version of traceq, a
document that cannot be read). Layout::

    STORE/runs/run_id=<id>/report.json

It is written once the run is committed (:mod:`traceq.render.documents`), staged under the store's
``tmp/`` and renamed into place, and read by nothing else: a run without it, or with a stale one, is
reported as before.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from traceq._version import __version__
from traceq.render.cells import console, table
from traceq.render.text import literal

if TYPE_CHECKING:
    from traceq.store import Store

#: The document's file in a run's folder.
DOCUMENT = "report.json"
#: The catalog row's values a document was made for (another name or other files: not shown).
ROW_KEYS = ("name", "files")
#: Width of the terminal forms when not shown on a terminal (a pipe, a file).
WIDTH = 160

#: A block as the terminal shows it: title, text lines, and a table's columns (name, numeric) and rows.
Block = tuple[str, Sequence[str], Sequence[tuple[str, bool]] | None, Sequence[Sequence[Any]] | None]


def head(run: Mapping[str, Any]) -> str:
    """The first line of a run's report on a terminal (rich markup; the run's names shown as written)."""
    return (f"[bold]traceq report[/bold]  {literal(run['name'])}  ({literal(run['run_id'])}, "
            f"{literal(run['profiler_version'])})")  # fmt: skip


def write_terminal(first: str, blocks: Sequence[Block], out: TextIO) -> None:
    """A report's (or a comparison's) blocks on a terminal, below the line ``first`` (rich markup)."""
    shown = console(out, WIDTH)
    shown.print(first)
    for title, lines, columns, rows in blocks:
        if title:
            shown.print(f"\n[bold]{literal(title)}[/bold]")
        if columns is not None and rows is not None:
            table(columns, rows, out)
        for line in lines:
            shown.print(literal(line), highlight=False)


@cache
def made_by() -> str:
    """What identifies the code that makes a report: traceq's version, and the path, size, change time
    and inode of each of its modules and query files, checksummed (an edit changes them; reading the
    files would cost every report 15 ms). A document made by other code is not shown."""
    queries = find_spec("traceq.queries")  # the query files' folder, without importlib.resources (6 ms)
    listed: list[str] = [__version__]
    _list_files(Path(__file__).resolve().parents[1], "", ".py", listed)
    if queries is not None and queries.submodule_search_locations:
        _list_files(queries.submodule_search_locations[0], "queries/", ".sql", listed)
    text = "\n".join(listed).encode()
    return f"{len(listed)}:{zlib.crc32(text):08x}:{zlib.adler32(text):08x}"


def _list_files(folder: Path | str, prefix: str, suffix: str, out: list[str]) -> None:
    """Append ``path size mtime_ns inode`` of each file ending in ``suffix`` under ``folder`` (by name)."""
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    _list_files(entry.path, f"{prefix}{entry.name}/", suffix, out)
            elif entry.name.endswith(suffix):
                st = entry.stat()
                out.append(f"{prefix}{entry.name} {st.st_size} {st.st_mtime_ns} {st.st_ino}")


def document(blocks: Sequence[Block], json_text: str, row: Mapping[str, Any]) -> str | None:
    """The text of a run's document: its terminal ``blocks``, its JSON form's text and the catalog ``row``
    it was made for; None where a table holds a value JSON has no type for (shown as Python shows it, it
    would not read back the same)."""
    doc = {"made_by": made_by(), "row": {k: row[k] for k in ROW_KEYS}, "blocks": blocks, "json": json_text}
    try:
        return json.dumps(doc, ensure_ascii=False, allow_nan=True)
    except TypeError:
        return None


def stored(store: Store, run_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The document of stored run ``run_id`` and its catalog row, where it was made by this traceq for the
    run as it is stored now; None otherwise (the report is computed then)."""
    run_dir = store.runs_dir / f"run_id={run_id}"
    try:
        doc = json.loads((run_dir / DOCUMENT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    row = store.catalog_row(run_id)
    if (
        not isinstance(doc, dict)
        or row is None
        or doc.get("made_by") != made_by()
        or doc.get("row") != {k: row.get(k) for k in ROW_KEYS}
        or not _well_formed(doc)
    ):
        return None
    return doc, row


def _well_formed(doc: Mapping[str, Any]) -> bool:
    """Whether ``doc`` has the shape :func:`document` writes (a changed file is not shown)."""
    blocks = doc.get("blocks")
    return (
        isinstance(doc.get("json"), str)
        and isinstance(blocks, list)
        and all(
            isinstance(b, list)
            and len(b) == 4
            and isinstance(b[0], str)
            and isinstance(b[1], list)
            and all(isinstance(line, str) for line in b[1])
            and (
                (b[2] is None and b[3] is None)
                or (
                    _columns(b[2])
                    and isinstance(b[3], list)
                    and all(isinstance(r, list) and len(r) == len(b[2]) for r in b[3])
                )
            )
            for b in blocks
        )
    )


def _columns(columns: object) -> bool:
    return isinstance(columns, list) and all(
        isinstance(c, list) and len(c) == 2 and isinstance(c[0], str) and isinstance(c[1], bool) for c in columns
    )


def show(doc: Mapping[str, Any], row: Mapping[str, Any], as_json: bool, out: TextIO) -> None:
    """Write a stored document as ``traceq report RUN`` writes the report: its JSON text, or its terminal
    blocks below the run's first line."""
    if as_json:
        out.write(doc["json"])
    else:
        write_terminal(head(row), doc["blocks"], out)
