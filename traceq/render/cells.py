"""Terminal tables of rows, and the cells of every table (no Polars: rows listed without it, such as the
catalog's, are shown as a frame's are)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from traceq.render.text import visible

#: rows a terminal table shows of a longer result (its first and last halves), as DuckDB's shell does; the
#: other formats write every row
SHOWN_ROWS = 40


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
    if isinstance(v, list):
        return ", ".join(map(cell, v))
    if type(v).__name__ == "Series":  # a Polars list value
        return ", ".join(map(cell, v.to_list()))  # type: ignore[attr-defined]
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


def table(
    columns: Sequence[tuple[str, bool]],
    rows: Sequence[Iterable[object]],
    out: TextIO,
    title: str | None = None,
    shown_rows: int | None = None,
) -> None:
    """Rows as a terminal table: ``columns`` are (name, numeric), numbers right-aligned; names and values
    shown as written (never read as rich markup) and :func:`visible`; ``title`` is traceq's own markup.
    With ``shown_rows``, more rows show their first and last ``shown_rows // 2`` around a row of dots,
    and a line saying how many there are (``rows`` is sliced for them, not iterated whole)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title, show_lines=False, header_style="bold", title_justify="left")
    for name, numeric in columns:
        t.add_column(Text(visible(name)), justify="right" if numeric else "left", overflow="fold")
    cut = shown_rows is not None and len(rows) > shown_rows
    half = (shown_rows or 0) // 2
    for r in rows[:half] if cut else rows[:]:
        t.add_row(*(Text(visible(cell(v))) for v in r))
    if cut:
        t.add_row(*(Text("\u00b7") for _ in columns))
        for r in rows[len(rows) - half :]:
            t.add_row(*(Text(visible(cell(v))) for v in r))
    shown = console(out, 240)
    shown.print(t)
    if not rows:
        shown.print("(no rows)")
    elif cut:
        shown.print(f"{len(rows):,} rows, {2 * half:,} shown (--format csv, json, markdown or parquet writes all)")
