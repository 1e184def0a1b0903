"""Paddle profiler summary text (``prof.summary()``, what users paste into issues) -> op-level tables.

Every table is read generically: sections start at title lines (``----Operator Summary----``), ``Thread: ...``
sub-titles name the thread, the column header follows the first dashed separator, and rows split into
cells on runs of two or more spaces (column widths vary with the data, and over-long names push a row
right, so fixed spans would not do). Five-value cells (``total / avg / max / min / ratio``) become five
columns. Times are converted to ns from the section's ``Time unit``. Text pasted from a web page (no
trailing spaces, blank lines added, a table cut short) parses the same: incomplete rows are skipped and
counted in a warning. Paddle 2.3 to 3.3 layouts are covered, and the legacy fluid profiler's
``Event Summary``.

Tables: ``summary_cells`` (every cell of every table, long form), and from it ``op_stats`` (Operator
Summary rows: ops, their stages and the kernels under them) and ``kernel_stats`` (Kernel Summary).
"""

from __future__ import annotations

import codecs
import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from traceq._utils.words import count
from traceq.errors import InputError, spill_io
from traceq.readers.source import iter_content
from traceq.schema import (
    EVENTS,
    KERNEL_STATS,
    OP_STATS,
    PADDLE,
    STEPS,
    SUMMARY_CELLS,
    SUMMARY_FORMAT,
    THREADS,
    RunTables,
)

FLAVOUR = PADDLE
FORMAT = SUMMARY_FORMAT
_TITLE = re.compile(r"^-{3,}\s*([^-\s](?:.*?[^-\s])?)\s*-{3,}$")
_SEPARATOR = re.compile(r"^-+(?:\s+-+)*$")
_UNIT = re.compile(r"^Time unit:\s*(\w+)")
_CELL_SPLIT = re.compile(r"\s{2,}")
_FIVE = re.compile(r"^(\S+) / (\S+) / (\S+) / (\S+) / (\S+)$")
_LEGACY_TIME = re.compile(r"^([-\d.]+) \(([-\d.]+)\)$")
_KNOWN_SECTIONS = (
    "Device Summary",
    "Overview Summary",
    "Model Summary",
    "Distribution Summary",
    "Operator Summary",
    "Kernel Summary",
    "Memory Manipulation Summary",
    "UserDefined Summary",
    "Memory Summary",
    "Event Summary",
)
UNIT_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}
#: Paddle's op-name decorations (its own ``_nodename2opname`` plus grad-node and PIR spellings).
OP_NAME_RULES = (
    (r" (?:dygraph|compute|pybind_imperative_func|grad_node|node_creation|infer_meta|kernel launch)$", ""),
    (r"^(?:Global_|Local_)", ""),
    (r"^pd_op\.", ""),
)


@dataclass
class Summary:
    """A parsed summary: its cells (long form; a LazyFrame over spilled batches where a spill folder was
    given), its op and kernel rows, and what the parser could not read."""

    cells: pl.DataFrame | pl.LazyFrame
    sections: list[str]
    warnings: list[str] = field(default_factory=list)
    op_stats: pl.DataFrame = field(default_factory=OP_STATS.empty)
    kernel_stats: pl.DataFrame = field(default_factory=KERNEL_STATS.empty)


class _Cells:
    """A summary's cells as they are parsed, in batches of whole table rows: each batch's op and kernel
    rows are pivoted at once, and the batch is kept, or written to ``spill_dir`` (a summary of a million
    rows has 11 M cells: 2.4 GB held in memory)."""

    def __init__(self, spill_dir: Path | None) -> None:
        self.spill_dir = spill_dir
        self.frames: list[pl.DataFrame] = []
        self.files: list[Path] = []
        self.ops: list[pl.DataFrame] = []
        self.kernels: list[pl.DataFrame] = []
        self.empty = True

    def add(self, rows: list[tuple[object, ...]]) -> None:
        if not rows:
            return
        frame = pl.DataFrame(rows, schema=SUMMARY_CELLS.schema, orient="row")
        self.empty = False
        self.ops.append(_op_wide(frame))
        self.kernels.append(_kernel_wide(frame))
        if self.spill_dir is None:
            self.frames.append(frame)
            return
        path = self.spill_dir / f"cells-{len(self.files):06d}.arrow"
        with spill_io(self.spill_dir, "write"):
            self.spill_dir.mkdir(parents=True, exist_ok=True)
            frame.write_ipc(path)
        self.files.append(path)

    def cells(self) -> pl.DataFrame | pl.LazyFrame:
        if self.files:
            return pl.scan_ipc(self.files)
        return pl.concat(self.frames) if self.frames else SUMMARY_CELLS.empty()

    def op_stats(self) -> pl.DataFrame:
        wide = [w for w in self.ops if not w.is_empty()]
        return _op_finish(pl.concat(wide, how="diagonal_relaxed")) if wide else OP_STATS.empty()

    def kernel_stats(self) -> pl.DataFrame:
        wide = [w for w in self.kernels if not w.is_empty()]
        return _kernel_finish(pl.concat(wide, how="diagonal_relaxed")) if wide else KERNEL_STATS.empty()


def looks_like_summary(head: bytes) -> bool:
    """Whether text starts like a summary: a table title, or Operator Summary rows pasted without one."""
    text = head.decode("utf-8", "replace")
    return bool(_TITLE_ANY.search(text) or _OP_ROW.search(text))


def read_paddle_summary(path: Path, spill_dir: Path | None = None) -> tuple[RunTables, list[str]]:
    """Read a summary file into run tables (no timeline: events and steps stay empty) and warnings. The
    file is read as a stream of lines (a summary of a million rows is 160 MB of text); with ``spill_dir``,
    its cells wait there in batches and ``summary_cells`` is a LazyFrame over them (the folder must
    outlive it)."""
    summary = _summary(lambda: _lines(path), path, spill_dir)
    tables = RunTables(
        events=EVENTS.empty(),
        steps=STEPS.empty(),
        threads=THREADS.empty(),
        op_stats=summary.op_stats,
        kernel_stats=summary.kernel_stats,
        summary_cells=summary.cells,
    )
    return tables, summary.warnings


def _lines(path: Path) -> Iterator[str]:
    """The file's lines, decoded as UTF-8 (invalid bytes replaced), block by block."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    rest = ""
    for block in iter_content(path):
        lines = (rest + decoder.decode(block)).splitlines(keepends=True)
        rest = lines.pop() if lines and not lines[-1].endswith(("\n", "\r")) else ""
        yield from (line.rstrip("\r\n") for line in lines)
    if tail := rest + decoder.decode(b"", final=True):
        yield from tail.splitlines()


_OP_ROW = re.compile(r"^ *\S.*?\s{2,}(?:\d+|-)\s{2,}\S+ / \S+ / \S+ / \S+ / \S+\s{2,}\S+ / \S+ / \S+ / \S+ / \S+", re.M)
_FLOPS_ROW = re.compile(r"^\S.*/ [-\d.]+\s{2,}\d+\s*$", re.M)
_HEADLESS = (
    "----Operator Summary----\nTime unit: ms\n----  ----\n"
    "Name  Calls  CPU Total / Avg / Max / Min / Ratio(%)  GPU Total / Avg / Max / Min / Ratio(%){flops}\n----  ----\n"
)


def parse_summary(text: str, source: Path | str = "<text>") -> Summary:
    """Parse summary text into long-form cells.

    A fragment of an Operator Summary pasted without its title and header is read as one, in ms (the
    default unit), with a warning.
    """
    return _summary(text.splitlines, source)


def _summary(lines: Callable[[], Iterable[str]], source: Path | str, spill_dir: Path | None = None) -> Summary:
    """:func:`parse_summary` of the text whose lines ``lines()`` gives (twice where it has no title)."""
    if any(_TITLE_ANY.match(line) for line in lines()):
        return _parse(lines(), source, _Cells(spill_dir))
    op_rows = flops = False
    for line in lines():
        op_rows = op_rows or bool(_OP_ROW.match(line))
        flops = flops or bool(_FLOPS_ROW.match(line))
    if not op_rows:
        return _parse(lines(), source, _Cells(spill_dir))
    header = _HEADLESS.format(flops="  FLOPs" if flops else "").splitlines()
    summary = _parse(itertools.chain(header, lines()), source, _Cells(spill_dir))
    summary.warnings.append("no table title or header: read as an Operator Summary in ms")
    return summary


_TITLE_ANY = re.compile(r"^-{3,}\s*(?:" + "|".join(re.escape(s) for s in _KNOWN_SECTIONS) + r")", re.M)
#: Cells made into a frame at a time (a summary's cells are many: a list of them would not be bounded).
_CELL_BATCH = 1 << 16


def _parse(lines: Iterable[str], source: Path | str, batches: _Cells) -> Summary:
    rows: list[tuple[object, ...]] = []
    sections: list[str] = []
    section = thread = unit = None
    header: list[str] | None = None
    expect_header = in_note = False
    skipped = 0
    row_index = 0
    for raw in lines:
        if len(rows) >= _CELL_BATCH:  # between two lines: a batch of whole rows
            batches.add(rows)
            rows.clear()
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        title = _TITLE.match(line.strip())
        if title:
            name = title.group(1)
            if name.startswith("Thread:"):
                thread = name.removeprefix("Thread:").strip()
            else:
                section, thread, unit, header, in_note = name, None, None, None, False
                expect_header = True
                sections.append(name)
            continue
        if section is None:
            continue
        if unit is None and section == "Event Summary":
            unit = "ms"  # the legacy fluid profiler prints milliseconds and no unit line
        if in_note:
            continue
        if line.startswith("Note:"):
            in_note = True
            continue
        if _SEPARATOR.match(line.strip()):
            expect_header = header is None
            continue
        unit_match = _UNIT.match(line.strip())
        if unit_match:
            unit = unit_match.group(1)
            continue
        if header is None and section.startswith("Memory Summary") and re.match(r"^[A-Za-z ]+: \S+$", line):
            key, _, value = line.partition(":")  # "Peak Allocated Memory: 9159464"
            rows.append(_cell(section, thread, row_index, key.strip(), 0, "value", value.strip(), None))
            row_index += 1
            continue
        cells = _CELL_SPLIT.split(line.strip())
        if expect_header or (header is not None and _is_header(cells)):
            header, expect_header = _expand_header(cells, line), False
            continue
        if header is None:
            continue
        indent = len(line) - len(line.lstrip(" "))
        values = _expand_cells(cells[1:])
        names = header[1:]
        if len(values) == len(names) - 1 and names[-1] == "FLOPs":  # a pasted row lost its trailing "-"
            values.append("-")
        if len(values) != len(names):
            skipped += 1
            continue
        row_index += 1
        for col, text_value in zip(names, values, strict=True):
            rows.append(_cell(section, thread, row_index, cells[0], indent // 2, col, text_value, unit))
    if not sections:
        raise InputError(source, "not a Paddle profiler summary (no summary table titles found)")
    batches.add(rows)
    if batches.empty:
        raise InputError(source, "a Paddle profiler summary with no table rows")
    warnings = [f"{count(skipped, 'incomplete table row')} skipped (text cut short or reflowed)"] if skipped else []
    return Summary(batches.cells(), sections, warnings, batches.op_stats(), batches.kernel_stats())


def _is_header(cells: list[str]) -> bool:
    """A second header inside a section (Overview's GPU part starts with an empty name cell)."""
    joined = " ".join(cells)
    return "Ratio" in joined and not any(c[:1].isdigit() for c in cells[1:2])


def _expand_header(cells: list[str], line: str) -> list[str]:
    if line.startswith(" "):  # Overview's second header has no name cell
        cells = ["Name", *cells]
    out = [cells[0]]
    for c in cells[1:]:
        m = re.match(r"^(CPU|GPU) Total / Avg / Max / Min / Ratio\(%\)$", c)
        if m:
            out += [f"{m.group(1)} {part}" for part in ("Total", "Avg", "Max", "Min", "Ratio(%)")]
        elif "(Ratio)" in c:  # legacy "CPU Time (Ratio)"
            base = c.replace("(Ratio)", "").strip()
            out += [base, f"{base} Ratio"]
        else:
            out.append(c)
    return out


def _expand_cells(cells: list[str]) -> list[str]:
    out: list[str] = []
    for c in cells:
        five = _FIVE.match(c)
        legacy = _LEGACY_TIME.match(c)
        if five:
            out += list(five.groups())
        elif legacy:
            out += list(legacy.groups())
        else:
            out.append(c)
    return out


def _cell(
    section: str, thread: str | None, row: int, name: str, depth: int, column: str, text: str, unit: str | None
) -> tuple[object, ...]:
    """One cell as a row of ``summary_cells``."""
    value = _number(text)
    time_col = unit is not None and _is_time_column(column)
    if value is not None and time_col:
        value *= UNIT_NS.get(unit, 1e6)
    return (section, thread, row, name, depth, column, text, value, "ns" if time_col else None)


def _is_time_column(column: str) -> bool:
    if any(k in column for k in ("Ratio", "Calls", "FLOPs", "Utilization", "Count", "Size", "Type")):
        return False
    return any(k in column for k in ("Total", "Avg", "Max", "Min", "Time", "Ave."))


def _number(text: str) -> float | None:
    """A cell's number; None for ``-``, text, and what is not finite (``inf``, ``NaN``)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def op_name_expr(col: str) -> pl.Expr:
    """The framework op behind a summary row name (``conv2d dygraph`` -> ``conv2d``)."""
    e = pl.col(col)
    for pattern, repl in OP_NAME_RULES:
        e = e.str.replace(pattern, repl)
    return e


def op_stats(cells: pl.DataFrame) -> pl.DataFrame:
    """Operator Summary (and legacy Event Summary) rows as one typed row each, kernels under their op."""
    wide = _op_wide(cells)
    return OP_STATS.empty() if wide.is_empty() else _op_finish(wide)


def _op_wide(cells: pl.DataFrame) -> pl.DataFrame:
    """The Operator (and Event) Summary rows among ``cells`` (whole rows), one wide row each, as printed."""
    ops = cells.filter(pl.col("section").is_in(["Operator Summary", "Event Summary"]))
    if ops.is_empty():
        return pl.DataFrame()
    # pivoted on the row number alone and joined to each row's first cell (a row's cells are consecutive):
    # a pivot keyed on the row's strings too took twice the memory
    first = ops.filter(pl.col("row") != pl.col("row").shift(1).fill_null(-1))
    values = ops.select("row", "column", "value").pivot(on="column", index="row", values="value")
    wide = first.select("section", "thread", "row", "name", "depth").join(values, on="row", how="left")
    texts = ops.filter(pl.col("column").is_in(["CPU Total", "CPU Time"])).select("row", pl.col("text").alias("_cpu"))
    return wide.join(texts, on="row", how="left").sort("row")


def _op_finish(wide: pl.DataFrame) -> pl.DataFrame:
    """``op_stats`` from the wide op rows of every batch (in text order)."""
    col = _first_present(wide)
    frame = wide.select(
        "thread",
        "row",
        "name",
        "depth",
        col("Calls").cast(pl.Int64, strict=False).alias("calls"),
        col("CPU Total", "CPU Time").alias("cpu_total_ns"),
        col("CPU Avg").alias("cpu_avg_ns"),
        col("CPU Max").alias("cpu_max_ns"),
        col("CPU Min").alias("cpu_min_ns"),
        col("CPU Ratio(%)", "CPU Time Ratio").alias("cpu_ratio"),
        col("GPU Total", "GPU Time").alias("gpu_total_ns"),
        col("GPU Avg").alias("gpu_avg_ns"),
        col("GPU Max").alias("gpu_max_ns"),
        col("GPU Min").alias("gpu_min_ns"),
        col("GPU Ratio(%)", "GPU Time Ratio").alias("gpu_ratio"),
        col("FLOPs").cast(pl.Int64, strict=False).alias("flops"),
        (pl.col("_cpu") == "-").alias("_no_cpu"),
        pl.col("section"),
    )
    # legacy Event Summary ratios are fractions; the newer tables print percent
    legacy = pl.col("section") == "Event Summary"
    frame = frame.with_columns(
        pl.when(legacy).then(pl.col("cpu_ratio") * 100).otherwise(pl.col("cpu_ratio")).alias("cpu_ratio"),
        pl.when(legacy).then(pl.col("gpu_ratio") * 100).otherwise(pl.col("gpu_ratio")).alias("gpu_ratio"),
    )
    parents = _parents(frame)
    frame = frame.join(parents, on="row", how="left").with_columns(
        pl.when((pl.col("depth") == 0) | (pl.col("section") == "Event Summary"))
        .then(pl.lit("op"))
        .when(pl.col("_no_cpu"))
        .then(pl.lit("kernel"))
        .otherwise(pl.lit("stage"))
        .alias("row_type"),
        op_name_expr("op_row").alias("op"),
        pl.col("name").str.ends_with("...").alias("truncated"),
    )
    return OP_STATS.conform(frame)


def _parents(frame: pl.DataFrame) -> pl.DataFrame:
    """For each row, its parent row name and the depth-0 op row it belongs to (rows are in text order)."""
    parents: list[str | None] = []
    op_rows: list[str] = []
    stack: list[str] = []
    for name, depth in zip(frame.get_column("name").to_list(), frame.get_column("depth").to_list(), strict=True):
        del stack[depth:]
        parents.append(stack[depth - 1] if 0 < depth <= len(stack) else None)
        op_rows.append(stack[0] if stack and depth > 0 else name)
        stack.append(name)
    return pl.DataFrame(
        {"row": frame.get_column("row"), "parent": parents, "op_row": op_rows},
        schema={"row": pl.Int64, "parent": pl.String, "op_row": pl.String},
    )


def _first_present(frame: pl.DataFrame):
    def col(*names: str) -> pl.Expr:
        for n in names:
            if n in frame.columns:
                return pl.col(n)
        return pl.lit(None, pl.Float64)

    return col


def kernel_stats(cells: pl.DataFrame) -> pl.DataFrame:
    """Kernel Summary rows."""
    wide = _kernel_wide(cells)
    return KERNEL_STATS.empty() if wide.is_empty() else _kernel_finish(wide)


def _kernel_wide(cells: pl.DataFrame) -> pl.DataFrame:
    """The Kernel Summary rows among ``cells`` (whole rows), one wide row each."""
    k = cells.filter(pl.col("section") == "Kernel Summary")
    if k.is_empty():
        return pl.DataFrame()
    return k.pivot(on="column", index=["row", "name"], values="value").sort("row")


def _kernel_finish(wide: pl.DataFrame) -> pl.DataFrame:
    """``kernel_stats`` from the wide kernel rows of every batch."""
    col = _first_present(wide)
    return wide.select(
        "row",
        "name",
        col("Calls").cast(pl.Int64, strict=False).alias("calls"),
        col("GPU Total").alias("gpu_total_ns"),
        col("GPU Avg").alias("gpu_avg_ns"),
        col("GPU Max").alias("gpu_max_ns"),
        col("GPU Min").alias("gpu_min_ns"),
        col("GPU Ratio(%)").alias("gpu_ratio"),
        pl.col("name").str.ends_with("...").alias("truncated"),
    ).cast(KERNEL_STATS.schema)
