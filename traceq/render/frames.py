"""A polars frame rendered as a table, CSV, JSON, Markdown or Parquet."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator
from typing import BinaryIO, TextIO

import polars as pl

from traceq.render import cells
from traceq.render.cells import SHOWN_ROWS, cell
from traceq.render.formats import Format
from traceq.render.text import visible
from traceq.schema import JSON_COLUMNS


def render(frame: pl.DataFrame, fmt: Format | str, out: TextIO | None = None, title: str | None = None) -> None:
    """Write ``frame`` to ``out`` (stdout) in ``fmt``; Parquet goes to the binary stream underneath. A table
    of more than :data:`SHOWN_ROWS` rows shows its first and last rows and says how many it left out."""
    fmt = Format(fmt)
    out = out or sys.stdout
    if fmt is Format.parquet:
        buf = io.BytesIO()
        frame.write_parquet(buf)
        binary: BinaryIO = getattr(out, "buffer", None) or out  # type: ignore[assignment]
        binary.write(buf.getvalue())
        binary.flush()
        return
    if fmt is Format.csv:
        out.write(_flatten(frame).write_csv())
    elif fmt is Format.json:
        out.write(to_json(frame) + "\n")
    elif fmt is Format.markdown:
        out.write(markdown(frame))
    else:
        table(frame, out, title, shown_rows=SHOWN_ROWS)


def to_json(frame: pl.DataFrame) -> str:
    """``frame`` as one JSON array of row objects; the model's columns that hold JSON text
    (:data:`~traceq.schema.JSON_COLUMNS`: ``warnings``, ``devices``, ``args``, ...) as the lists and objects
    they hold, not as strings (a value that is not JSON stays a string)."""
    text = frame.write_json()
    held = [c for c, t in frame.schema.items() if c in JSON_COLUMNS and t == pl.String]
    if not held:
        return text
    rows = json.loads(text)
    for row in rows:
        for c in held:
            if row[c] is not None:
                with contextlib.suppress(ValueError):
                    row[c] = json.loads(row[c])
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"))


def _flatten(frame: pl.DataFrame) -> pl.DataFrame:
    """Nested columns (lists, structs) as JSON text, for flat formats."""
    nested = [c for c, t in frame.schema.items() if t.is_nested()]
    if not nested:
        return frame
    return frame.with_columns(pl.col(c).map_elements(_to_json, return_dtype=pl.String) for c in nested)


def _to_json(v: object) -> str:
    return json.dumps(v.to_list() if isinstance(v, pl.Series) else v)


def markdown(frame: pl.DataFrame) -> str:
    head = "| " + " | ".join(visible(c) for c in frame.columns) + " |"
    sep = "|" + "|".join("---:" if t.is_numeric() else "---" for t in frame.dtypes) + "|"
    rows = ["| " + " | ".join(visible(cell(v)).replace("|", "\\|") for v in r) + " |" for r in frame.iter_rows()]
    return "\n".join([head, sep, *rows]) + "\n"


def table(frame: pl.DataFrame, out: TextIO, title: str | None = None, shown_rows: int | None = None) -> None:
    """``frame`` as a terminal table (:func:`~traceq.render.cells.table`, ``shown_rows`` as there)."""
    cells.table(columns(frame), _Rows(frame), out, title, shown_rows)


def columns(frame: pl.DataFrame) -> list[tuple[str, bool]]:
    """A frame's columns as a terminal table lays them out: name, and whether numeric (right-aligned)."""
    return [(name, dtype.is_numeric()) for name, dtype in frame.schema.items()]


class _Rows:
    """A frame's rows as a sequence: its length, and the rows of a slice (converted only when sliced)."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame

    def __len__(self) -> int:
        return self.frame.height

    def __getitem__(self, part: slice) -> Iterator[tuple[object, ...]]:
        return self.frame[part].iter_rows()
