"""The output formats of the commands, which results are written in which, and how many ops a report lists
(no third-party imports: the CLI's options are declared with them before any result is made)."""

from __future__ import annotations

from enum import Enum


class Format(str, Enum):
    """Output formats shared by all commands."""

    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"
    parquet = "parquet"
    html = "html"


#: The formats of frames (rows of a table): every format but HTML.
FRAME_FORMATS = tuple(f for f in Format if f is not Format.html)
#: The formats of a run's report and of a comparison.
REPORT_FORMATS = (Format.table, Format.json, Format.markdown, Format.html)
#: The formats a command that prints rows offers (its ``--help`` lists these alone).
FrameFormat = Enum("FrameFormat", {f.name: f.value for f in FRAME_FORMATS}, type=str)  # type: ignore[misc]
#: The formats ``report`` offers.
ReportFormat = Enum("ReportFormat", {f.name: f.value for f in REPORT_FORMATS}, type=str)  # type: ignore[misc]
#: Ops a report lists in every format (its op table is ordered by CPU time, the most first); ``--all``: every op.
TOP_OPS = 30
