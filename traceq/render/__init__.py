"""Render: every result in the output formats of the commands, through one function, :func:`render`.

A polars frame (what ``ingest``, ``runs``, ``sql`` and ``queries`` return) as a table, CSV, JSON, Markdown
or Parquet (:mod:`traceq.render.frames`); a run's report and a comparison as a table, JSON, Markdown
or a self-contained HTML page (:mod:`traceq.render.reports`, :mod:`traceq.render.html`).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, TextIO

import polars as pl

from traceq.analysis.results import Comparison, RunReport
from traceq.errors import TraceqError
from traceq.render import frames, html, reports
from traceq.render.frames import Format

__all__ = ["Format", "FrameFormat", "ReportFormat", "Result", "check_format", "render"]

#: What the library returns for the commands to print.
Result = pl.DataFrame | RunReport | Comparison

#: How each kind of result is written, per format: ``writer(result, out)``.
_WRITERS: dict[type, dict[Format, Callable[[Any, TextIO | None], None]]] = {
    RunReport: {
        Format.table: reports.to_terminal,
        Format.json: reports.to_json,
        Format.markdown: reports.to_markdown,
        Format.html: html.to_html,
    },
    Comparison: {
        Format.table: reports.compare_terminal,
        Format.json: reports.compare_json,
        Format.markdown: reports.compare_markdown,
        Format.html: html.to_html,
    },
}
#: The formats of frames (rows of a table): every format but HTML.
_FRAME_FORMATS = tuple(f for f in Format if f is not Format.html)
#: The formats a command that prints rows offers (its ``--help`` lists these alone).
FrameFormat = Enum("FrameFormat", {f.name: f.value for f in _FRAME_FORMATS}, type=str)  # type: ignore[misc]
#: The formats ``report`` offers: a run's report in all but HTML, a comparison in all of them.
ReportFormat = Enum("ReportFormat", {f.name: f.value for f in _WRITERS[Comparison]}, type=str)  # type: ignore[misc]
#: What each kind of result is called in the message for a format it is not written in.
_NAMES = {pl.DataFrame: "this command", RunReport: "report", Comparison: "report --compare"}


def check_format(kind: type, fmt: Format) -> None:
    """Raise :class:`TraceqError` (one line) unless results of ``kind`` are written in ``fmt``."""
    formats = _FRAME_FORMATS if kind is pl.DataFrame else tuple(_WRITERS[kind])
    if fmt not in formats:
        listed = ", ".join(f.value for f in formats[:-1]) + f" or {formats[-1].value}"
        raise TraceqError(f"{_NAMES[kind]} supports --format {listed}, not {fmt.value}")


def render(result: Result, fmt: Format | str, out: TextIO | None = None, title: str | None = None) -> None:
    """Write ``result`` to ``out`` (stdout) in ``fmt``; a frame's table gets ``title``."""
    fmt = Format(fmt.value if isinstance(fmt, Enum) else fmt)
    kind = pl.DataFrame if isinstance(result, pl.DataFrame) else type(result)
    check_format(kind, fmt)
    if isinstance(result, pl.DataFrame):
        frames.render(result, fmt, out, title)
    else:
        _WRITERS[kind][fmt](result, out)
