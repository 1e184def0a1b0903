"""Render: every result in the output formats of the commands, through one function, :func:`render`.

A polars frame (what ``ingest``, ``runs``, ``sql`` and ``queries`` return) as a table, CSV, JSON, Markdown
or Parquet (:mod:`traceq.render.frames`); a run's report and a comparison as a table, JSON, Markdown
or a self-contained HTML page (:mod:`traceq.render.reports`, :mod:`traceq.render.html`). The writers are
imported when a result is rendered (the formats, :mod:`traceq.render.formats`, need nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any, TextIO

from traceq.errors import TraceqError
from traceq.render.formats import FRAME_FORMATS, REPORT_FORMATS, TOP_OPS, Format, FrameFormat, ReportFormat

if TYPE_CHECKING:
    import polars as pl

    from traceq.analysis.results import Comparison, RunReport

    #: What the library returns for the commands to print.
    Result = pl.DataFrame | RunReport | Comparison


__all__ = ["Format", "FrameFormat", "ReportFormat", "check_format", "render"]


def _report_writers() -> dict[type, dict[Format, Callable[[Any, TextIO | None], None]]]:
    """How a run's report and a comparison are written, per format (:data:`REPORT_FORMATS`):
    ``writer(result, out)``."""
    from traceq.analysis.results import Comparison, RunReport
    from traceq.render import html, reports

    return {
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


def check_format(kind: type, fmt: Format) -> None:
    """Raise :class:`TraceqError` (one line) unless results of ``kind`` are written in ``fmt``."""
    names = _report_names() if kind.__module__ == _RESULTS else {}
    formats = REPORT_FORMATS if kind in names else FRAME_FORMATS
    if fmt not in formats:
        listed = ", ".join(f.value for f in formats[:-1]) + f" or {formats[-1].value}"
        raise TraceqError(f"{names.get(kind, 'this command')} supports --format {listed}, not {fmt.value}")


#: The module of the analysis' results (a frame's rendering never imports it).
_RESULTS = "traceq.analysis.results"


def _report_names() -> dict[type, str]:
    """The command of each kind of report."""
    from traceq.analysis.results import Comparison, RunReport

    return {RunReport: "report", Comparison: "report --compare"}


def render(
    result: Result, fmt: Format | str, out: TextIO | None = None, title: str | None = None, top: int | None = TOP_OPS
) -> None:
    """Write ``result`` to ``out`` (stdout) in ``fmt``; a frame's table gets ``title``, a report (each run's
    of a comparison) lists its first ``top`` ops (None: every op)."""
    from traceq.render import frames

    fmt = Format(fmt.value if isinstance(fmt, Enum) else fmt)
    check_format(type(result), fmt)
    writers = _report_writers().get(type(result)) if type(result).__module__ == _RESULTS else None
    if writers is not None:
        from traceq.render.op_list import listed

        writers[fmt](listed(result, top), out)
    else:
        frames.render(result, fmt, out, title)
