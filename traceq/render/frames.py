"""A polars frame rendered as a table, CSV, JSON, Markdown or Parquet (and the cells of every table)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from typing import Any, BinaryIO, TextIO

import polars as pl

from traceq.render.formats import Format
from traceq.render.text import visible
from traceq.schema import JSON_COLUMNS

#: rows a terminal table shows of a longer result (its first and last halves), as DuckDB's shell does; the
#: other formats write every row
SHOWN_ROWS = 40


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


def console(out: TextIO, width: int) -> Any:
    """A rich console on ``out`` (``width`` columns unless a terminal), without emoji codes (``:smile:`` in
    a name stays as written). A reader gone (a closed pipe) raises :class:`BrokenPipeError`, as a plain
    write does: rich's own handling exits with code 1."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console(file=out, width=None if out.isatty() else width, emoji=False)


def cell(v: object) -> str:
    """A value as shown in terminal tables and Markdown."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return readable(v)
    if isinstance(v, pl.Series):
        return ", ".join(map(cell, v.to_list()))
    if isinstance(v, list):
        return ", ".join(map(cell, v))
    return str(v)


def readable(v: float, digits: int = 4) -> str:
    """A float for people: ``digits`` significant digits without an exponent (``1,160``, ``0.2150`` as
    ``0.215``, ``0.00001234``), whole numbers from 10,000 up, ``n/a`` for NaN and ``inf`` as such."""
    if v != v:
        return "n/a"
    if v == 0 or math.isinf(v):
        return "0" if v == 0 else f"{v}"
    magnitude = math.floor(math.log10(abs(v)))
    if magnitude >= digits:
        return f"{v:,.0f}"
    text = f"{v:,.{max(0, digits - 1 - magnitude)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def markdown(frame: pl.DataFrame) -> str:
    head = "| " + " | ".join(visible(c) for c in frame.columns) + " |"
    sep = "|" + "|".join("---:" if t.is_numeric() else "---" for t in frame.dtypes) + "|"
    rows = ["| " + " | ".join(visible(cell(v)).replace("|", "\\|") for v in r) + " |" for r in frame.iter_rows()]
    return "\n".join([head, sep, *rows]) + "\n"


def table(frame: pl.DataFrame, out: TextIO, title: str | None = None, shown_rows: int | None = None) -> None:
    """``frame`` as a terminal table: names and values shown as written (never read as rich markup) and
    :func:`visible`; ``title`` is traceq's own markup. With ``shown_rows``, a longer frame shows its first
    and last ``shown_rows // 2`` rows around a row of dots, and a line saying how many rows it has."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title, show_lines=False, header_style="bold", title_justify="left")
    for name, dtype in frame.schema.items():
        t.add_column(Text(visible(name)), justify="right" if dtype.is_numeric() else "left", overflow="fold")
    cut = shown_rows is not None and frame.height > shown_rows
    half = (shown_rows or 0) // 2
    for r in frame.head(half).iter_rows() if cut else frame.iter_rows():
        t.add_row(*(Text(visible(cell(v))) for v in r))
    if cut:
        t.add_row(*(Text("\u00b7") for _ in frame.columns))
        for r in frame.tail(half).iter_rows():
            t.add_row(*(Text(visible(cell(v))) for v in r))
    shown = console(out, 240)
    shown.print(t)
    if frame.is_empty():
        shown.print("(no rows)")
    elif cut:
        shown.print(f"{frame.height:,} rows, {2 * half:,} shown (--format csv, json, markdown or parquet writes all)")
