"""Run reports and comparisons as terminal tables, JSON or Markdown.

The terminal and Markdown forms are built from the same lines (:func:`report_blocks`,
:func:`compare_blocks`): a block is a heading with either text lines or a table, so the two forms say the
same things in the same order.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

import polars as pl

from traceq._utils.words import count, fixed, rounded
from traceq.analysis.findings import WATERFALL_MIN_SHARE, Finding, Waterfall
from traceq.analysis.replay.estimates import NOT_ESTIMATED
from traceq.analysis.results import REST, REST_LABEL, Comparison, RunReport
from traceq.analysis.run_summary import OutlierStep
from traceq.render import json_form, rounding
from traceq.render.cells import cell
from traceq.render.frames import columns, markdown
from traceq.render.replay import WHAT_IF_TITLE, saving_text, unprofiled_lines, unprofiled_text, what_if_table
from traceq.render.report_document import Block as TerminalBlock
from traceq.render.report_document import document, write_terminal
from traceq.render.report_document import head as report_head
from traceq.render.text import literal, visible

#: Sites listed under "Where the idle time went".
TOP_SITES = 10
#: Per-op changes listed in a comparison.
TOP_OP_DELTAS = 12


@dataclass
class Block:
    """One part of a printed report: a heading and text lines, or a table."""

    title: str
    lines: list[str] = field(default_factory=list)
    frame: pl.DataFrame | None = None


@contextmanager
def _visible(out: TextIO | None) -> Iterator[TextIO]:
    """A buffer whose text is written to ``out`` (stdout) :func:`~traceq.render.text.visible` at the end."""
    buffer = io.StringIO()
    yield buffer
    (out or sys.stdout).write(visible(buffer.getvalue()))


def number(v: Any) -> str:
    """A number for people: no exponent, no ``None`` (``n/a``), digits as many as mean something."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != v:  # NaN
            return "n/a"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 1:
            return fixed(v)  # as the titles print it
        return f"{rounded(v):.3f}" if v else "0"
    return str(v)


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "n/a"
    if unit == "%":
        return f"{v:.1%}"
    return f"{v:,.2f}{unit}"


def evidence_text(v: Any, paired: bool = False) -> str:
    """An evidence value in words: a comparison's pairs (``paired``) as ``BASE -> NEW``, mappings as
    ``key: value``, sites as the call and where it was made; never a Python repr."""
    if paired and isinstance(v, list) and len(v) == 2 and not any(isinstance(x, dict) and "site" in x for x in v):
        if all(not isinstance(x, (dict, list)) for x in v):
            return _pair(v[0], v[1])
        return f"BASE {evidence_text(v[0])}; NEW {evidence_text(v[1])}"
    if isinstance(v, list):
        return "; ".join(evidence_text(x) for x in v[:3]) if v else "none"
    if isinstance(v, dict):
        if "ms_per_call" in v or "idle_ms_per_step" in v or "site" in v:
            return _site(v)
        return ", ".join(f"{k}: {evidence_text(x)}" for k, x in list(v.items())[:6]) if v else "none"
    return number(v)


def _pair(b: Any, n: Any) -> str:
    """``BASE -> NEW`` with both numbers at the precision of the larger."""
    if (isinstance(b, float) and isinstance(n, float)) or (isinstance(b, float) and isinstance(n, int)):
        scale = max(abs(b), abs(float(n)))
        digits = 0 if scale >= 100 else 2 if scale >= 1 else 3
        return f"{rounded(b):,.{digits}f} -> {rounded(float(n)):,.{digits}f}"
    return f"{number(b)} -> {number(n)}"


def _site(v: dict[str, Any]) -> str:
    """One site or op of an evidence list: the call, the op around it, the top-level op, the user's frame."""
    if "op" in v and "ms_per_call" in v:  # an op that searched for algorithms
        shapes = "; ".join(map(str, v.get("example_shapes") or []))
        return (
            f"{v['op']}: {number(v['calls_per_step'])} calls per step, {number(v['ms_per_call'])} ms each "
            f"(typically {number(v['typical_ms_per_call'])} ms), {number(v['kernels_per_call'])} kernels each "
            f"(typically {number(v['typical_kernels_per_call'])})" + (f", shapes {shapes}" if shapes else "")
        )
    where = [x for x in (v.get("site"), v.get("op"), v.get("top_op")) if x]
    chain = " < ".join(dict.fromkeys(where)) or "outside any op"  # (a list by top-level op: in none)
    frame = f" at {v['frame']}" if v.get("frame") else ""
    size = f"{number(v.get('idle_ms_per_step'))} ms per step"
    calls = f", {number(v['calls_per_step'])} calls per step" if v.get("calls_per_step") else ""
    if v.get("ranges_per_step"):  # a range the time lay in, not a call made
        calls = f", {number(v['ranges_per_step'])} ranges per step"
    return f"{chain}{frame} ({size}{calls})"


def finding_lines(i: int, f: Finding, signed: bool) -> list[str]:
    """A finding as printed: its title with its size, each piece of evidence, the next step."""
    if f.impact_ms is None:
        impact = ""
    else:
        impact = f"  {fixed(f.impact_ms, sign=True)} ms/step" if signed else f"  ~{fixed(f.impact_ms)} ms/step"
    lines = [f"{i}. {f.title}{impact}"]
    for k, v in rounding.evidence(f).items():
        if _empty(v) or (isinstance(v, list) and len(v) == 2 and all(map(_empty, v))):
            continue
        lines.append(f"   {k.replace('_', ' ')}: {evidence_text(v, paired=signed)}")
    if f.what_if_ms is not None:
        where = " in NEW" if signed else ""
        lines.append(f"   what if fixed{where} (replay): {saving_text(rounding.ms(f.what_if_ms) or 0.0)}")
    if f.unprofiled_ms is not None:
        lines.append(f"   {unprofiled_text(rounding.ms(f.unprofiled_ms) or 0.0, signed)}")
    lines.append(f"   next: {f.next_step}")
    return lines


def _empty(v: Any) -> bool:
    return v is None or v == {} or v == []


def headline(report: RunReport) -> list[tuple[str, str]]:
    s = report.summary
    cast = s.cast_overhead
    steps = str(s.steps) if s.steps else "(whole GPU span)" if s.steps == 0 else "n/a"
    if s.step_rule:
        steps += f" ({s.step_rule})"
    calls = count(cast.calls, "call")
    # summary text has no steps: its totals are the whole profile's
    casts_label = "casts / step" if report.has_timeline else "casts (whole profile)"
    return [
        *(_rank_headline(s.rank_spread) if s.rank_spread is not None else []),
        ("steps", steps),
        (  # the page's one step time: the mean window, which the split and the timeline's step refer to
            "step time (mean)",
            _fmt(s.mean_step_time_ms, " ms") if s.mean_step_time_ms is not None else "n/a (no timeline)",
        ),
        ("GPU busy / step", _fmt(s.gpu_busy_ms, " ms")),
        ("GPU idle / step", f"{_fmt(s.gpu_idle_ms, ' ms')}  ({_fmt(s.gpu_idle_ratio, '%')})"),
        ("launch-bound ratio", _fmt(s.launch_bound_ratio, "%")),
        ("FP16/BF16 coverage", _fmt(s.fp16_coverage, "%")),
        ("tensor-core coverage", _fmt(s.tensor_core_coverage, "%")),
        (casts_label, f"{calls}, CPU {fixed(cast.cpu_ms or 0.0)} ms, GPU {fixed(cast.gpu_ms or 0.0)} ms"),
    ]


def _rank_headline(spread: dict[str, Any]) -> list[tuple[str, str]]:
    def span(key: str, unit: str) -> str:
        v = spread.get(key)
        if not v:
            return "n/a"
        return f"{_fmt(v['min'], unit)} (rank {v['min_rank']}) .. {_fmt(v['max'], unit)} (rank {v['max_rank']})"

    return [
        ("ranks", str(spread["ranks"])),
        ("step time across ranks", span("step_ms", " ms")),
        ("idle across ranks", span("idle_ratio", "%")),
        ("launch-bound across ranks", span("launch_bound_ratio", "%")),
    ]


def split_table(report: RunReport, estimated: bool = False) -> pl.DataFrame:
    """Where the step goes: each GPU busy part and idle cause, ms per step and share of the step (of the
    traced step, or with ``estimated`` of the step estimated without the profiler, where it was split)."""
    parts = report.unprofiled_split if estimated else report.split
    if parts is None:
        return pl.DataFrame()
    idle = [("GPU idle", REST_LABEL if c == REST else c, ms) for c, ms in parts.idle.items()]
    rows = [("GPU busy", c, ms) for c, ms in parts.busy.items()] + idle
    step = parts.window_ms or 1.0
    return pl.DataFrame(
        [(side, cause, round(ms, 3), round(ms / step, 3)) for side, cause, ms in rows if abs(ms) >= 0.0005],
        schema={"side": pl.String, "cause": pl.String, "ms/step": pl.Float64, "share": pl.Float64},
        orient="row",
    ).sort("ms/step", descending=True)


#: The sites table's call where no call is charged: the thread was between calls (a launch is charged to the
#: runtime call it lies in where no op or range encloses it: ``_idle_charges``).
BETWEEN = "(between calls)"


def sites_table(report: RunReport) -> pl.DataFrame:
    """Where each cause's idle time went: the call, the op it was made in, the user's frame."""
    if report.sites.is_empty():
        return pl.DataFrame()
    return (
        report.sites.filter(pl.col("ms_per_step") >= 0.0005)
        .head(TOP_SITES)
        .select(
            "cause",
            pl.col("site").fill_null(BETWEEN).alias("call"),
            pl.when(pl.col("top_op") != pl.col("site")).then(pl.col("top_op")).alias("in op"),
            "frame",
            pl.col("calls_per_step").round(2).alias("calls/step"),
            pl.col("ms_per_step").round(3).alias("ms/step"),
        )
    )


def rank_table(report: RunReport) -> pl.DataFrame:
    """The per-rank table as printed (ms rounded, ratios as fractions)."""
    return report.ranks.with_columns(pl.col(pl.Float64).round(3))


def straggler_table(report: RunReport) -> pl.DataFrame:
    return report.stragglers.with_columns(pl.col(pl.Float64).round(3))


def _top_ops(report: RunReport, n: int = 15) -> pl.DataFrame:
    ops = report.ops
    per_step = "cpu_incl_ns_per_step" in ops.columns
    # one definition of an op's GPU time in every format: the work launched by it or beneath it (incl.)
    cpu, gpu = ("cpu_incl_ns_per_step", "gpu_incl_ns_per_step") if per_step else ("cpu_incl_ns", "gpu_ns")
    unit = "/step" if per_step else ""
    cols = [
        pl.col("name"),
        pl.col("calls_per_step" if per_step else "calls").round(1).alias("calls" + unit),
        (pl.col(cpu) / 1e6).round(3).alias(f"cpu ms{unit} (incl.)"),
        (pl.col(gpu) / 1e6).round(3).alias(f"gpu ms{unit} (incl.)"),
    ]
    if "fp16_coverage" in ops.columns:
        cols += [
            pl.col("kernels_per_call").round(2).alias("kernels/call (incl.)"),
            pl.col("fp16_coverage").round(2).alias("fp16 coverage (incl.)"),
            pl.col("tensor_core_coverage").round(2).alias("tensor-core coverage (incl.)"),
        ]
    return ops.head(n).select(cols)


def report_blocks(report: RunReport) -> list[Block]:
    """What a run's report says, in order."""
    blocks = []
    if report.unprofiled is not None:  # the question is about the run without the profiler: its estimate leads
        lines = unprofiled_lines(rounding.estimate(report.unprofiled))
        blocks.append(Block("Step time without the profiler (replay)", lines))
    leading = [n for n in report.notes if n.startswith(NOT_ESTIMATED)]  # or why there is none
    blocks += [Block("Step time without the profiler (replay)", [n]) for n in leading]
    estimated = split_table(report, estimated=True)
    if not estimated.is_empty():
        blocks.append(Block("Where the step goes without the profiler (estimated ms per step)", frame=estimated))
    blocks.append(Block("", [f"{k}: {v}" for k, v in headline(report)]))
    split = split_table(report)
    if not split.is_empty():
        blocks.append(Block("Where the step goes in the trace (ms per step)", frame=split))
    lines = [line for i, f in enumerate(report.findings, 1) for line in finding_lines(i, f, signed=False)]
    blocks.append(Block("Findings (largest first)", lines or ["No finding cleared its threshold."]))
    if not report.what_if.is_empty():
        blocks.append(Block(WHAT_IF_TITLE, frame=what_if_table(report.what_if)))
    sites = sites_table(report)
    if not sites.is_empty():
        blocks.append(Block("Where the GPU's idle time went (top calls)", frame=sites))
    outliers = report.summary.outlier_steps
    if outliers:
        blocks.append(Block("Outlier steps", [_outlier(o, report.run["n_ranks"] > 1) for o in outliers]))
    blocks += [Block("Note", [note]) for note in report.notes if note not in leading]
    if not report.ranks.is_empty():
        blocks.append(
            Block("Ranks (means per step; wait = time waiting for the step's straggler)", frame=rank_table(report))
        )
        blocks.append(Block("Straggler per step", frame=straggler_table(report)))
    if not report.gap_histogram.is_empty():
        hist = report.gap_histogram.select(
            "kind", "bucket", pl.col("gaps"), (pl.col("ns_per_step") / 1e6).round(3).alias("ms/step")
        )
        blocks.append(Block("GPU idle gaps by kind and length", frame=hist))
    if not report.ops.is_empty():
        total = report.summary.ops_total
        more = f" (of {total:,}; --all lists every op)" if total and total > report.ops.height else ""
        blocks.append(Block(f"Top ops by CPU time{more}", frame=_top_ops(report)))
    return blocks


def _outlier(o: OutlierStep, ranked: bool) -> str:
    rank = f" (rank {o.rank})" if ranked else ""
    return (
        f"step {o.step}{rank}: {fixed(o.step_ms)} ms against a median of {fixed(o.median_step_ms)} ms; "
        f"{o.cause} {fixed(o.cause_ms_over_median, sign=True)} ms over its median"
    )


def to_json(report: RunReport, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(json_form.report(report), default=str) + "\n")


def to_markdown(report: RunReport, out: TextIO | None = None) -> None:
    with _visible(out) as buffer:
        buffer.write(f"## traceq report: {report.run['name']} ({report.run['run_id']})\n")
        _write_markdown(report_blocks(report), buffer)


def to_terminal(report: RunReport, out: TextIO | None = None) -> None:
    """The report for a terminal: names (runs, ops, files) shown as written, never read as rich markup,
    and :func:`~traceq.render.text.visible`."""
    write_terminal(report_head(report.run), terminal_blocks(report_blocks(report)), out or sys.stdout)


def report_document(report: RunReport, row: Mapping[str, Any]) -> str | None:
    """The document of a stored run's report (:mod:`traceq.render.report_document`): what
    :func:`to_terminal` and :func:`to_json` write of ``report`` (cut to the ops it lists), for the run's
    catalog ``row``; None where it cannot be stored as JSON."""
    buffer = io.StringIO()
    to_json(report, buffer)
    return document(terminal_blocks(report_blocks(report)), buffer.getvalue(), row)


def terminal_blocks(blocks: list[Block]) -> list[TerminalBlock]:
    """``blocks`` as the terminal writes them: a table as its columns (name, numeric) and rows."""
    return [
        (b.title, b.lines, *((columns(b.frame), b.frame.rows()) if b.frame is not None else (None, None)))
        for b in blocks
    ]


# -- comparisons -------------------------------------------------------------------------------------
def waterfall_table(result: Comparison, min_share: float = WATERFALL_MIN_SHARE) -> pl.DataFrame:
    """The waterfall of the traced steps as printed: each part that changed by at least ``min_share`` of the
    longer step, BASE, NEW and the change; the rest as "other"; the step difference, then (where the
    estimate without the profiler leads) the rows that carry it to the estimated one."""
    if result.waterfall is None or result.step_time_delta_ms is None:
        return pl.DataFrame()
    b = result.base.summary.mean_step_time_ms
    n = result.new.summary.mean_step_time_ms
    rows = _waterfall_rows(result.waterfall, b, n, "= step time (mean), NEW - BASE", min_share)
    return _waterfall_frame(rows + _closed_on_the_estimate(result, b, n))


def estimated_waterfall_table(result: Comparison, min_share: float = WATERFALL_MIN_SHARE) -> pl.DataFrame:
    """The difference estimated without the profiler split by cause, as printed (like
    :func:`waterfall_table`), closing on the estimated steps; empty where it was not split."""
    if result.unprofiled_waterfall is None or result.unprofiled is None:
        return pl.DataFrame()
    b, n = estimated_steps(result)
    label = "= step time without the profiler (estimated), NEW - BASE"
    return _waterfall_frame(_waterfall_rows(result.unprofiled_waterfall, b, n, label, min_share, n - b))


def estimated_steps(result: Comparison) -> tuple[float, float]:
    """BASE's and NEW's steps estimated without the profiler, ms, as stated (a comparison with the estimate)."""
    assert result.unprofiled is not None
    b, n = rounding.ms(result.unprofiled.base.step_ms), rounding.ms(result.unprofiled.new.step_ms)
    assert b is not None and n is not None
    return b, n


def _waterfall_rows(
    waterfall: Waterfall,
    base_ms: float | None,
    new_ms: float | None,
    label: str,
    min_share: float,
    delta_ms: float | None = None,
) -> list[tuple]:
    """The parts that changed by at least ``min_share`` of the longer step, "other", then the step's row
    (``delta_ms``, by default the waterfall's)."""
    parts, other = waterfall.shown(min_share * max(base_ms or 0.0, new_ms or 0.0))
    shown = [*parts, other] if max(abs(other.base_ms), abs(other.new_ms), abs(other.delta_ms)) >= 0.0005 else parts
    rows: list[tuple] = [(p.label, p.base_ms, p.new_ms, p.delta_ms) for p in shown]
    rows.append((label, base_ms, new_ms, waterfall.delta_ms if delta_ms is None else delta_ms))
    return rows


def _waterfall_frame(rows: list[tuple]) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema={"part": pl.String, "BASE ms": pl.Float64, "NEW ms": pl.Float64,
                                       "NEW - BASE": pl.Float64}, orient="row")  # fmt: skip
    return frame.with_columns(pl.col(pl.Float64).round(3))


def _closed_on_the_estimate(result: Comparison, base_ms: float | None, new_ms: float | None) -> list[tuple]:
    """Two rows that carry the traced difference over to the one estimated without the profiler (where the
    replay ran): what the estimate takes out of each traced step, then the estimated steps."""
    if result.unprofiled is None or base_ms is None or new_ms is None:
        return []
    b, n = estimated_steps(result)
    what = "the profiler's cost and host speed" if result.unprofiled.scaled else "the profiler's own cost"
    return [
        (f"{what}, taken out (estimated)", b - base_ms, n - new_ms, (n - new_ms) - (b - base_ms)),
        ("= step time without the profiler (estimated)", b, n, n - b),
    ]


def compare_blocks(result: Comparison) -> list[Block]:
    """What a comparison says, in order."""
    blocks = [Block("", [result.verdict])]
    leading = [n for n in result.notes if n.startswith(NOT_ESTIMATED)]  # why there is no estimate
    blocks += [Block("Step time without the profiler (replay)", [n]) for n in leading]
    if result.unprofiled is not None:
        for side, estimate in (("base", result.unprofiled.base), ("new", result.unprofiled.new)):
            title = f"{side.upper()} without the profiler (replay)"
            blocks.append(Block(title, unprofiled_lines(rounding.estimate(estimate))))
    estimated = estimated_waterfall_table(result)
    if not estimated.is_empty():
        blocks.append(Block("Waterfall without the profiler (estimated ms per step)", frame=estimated))
    water = waterfall_table(result)
    if not water.is_empty():
        title = "Waterfall of the traced steps (ms per step)"
        if result.unprofiled is not None:
            title = "Waterfall of the traced steps, carried to the estimate without the profiler (ms per step)"
        blocks.append(Block(title, frame=water))
    lines = [line for i, f in enumerate(result.findings, 1) for line in finding_lines(i, f, signed=True)]
    blocks.append(Block("Findings (largest change first)", lines or ["No part changed enough to matter."]))
    if not result.new.what_if.is_empty():
        blocks.append(Block(f"NEW: {WHAT_IF_TITLE}", frame=what_if_table(result.new.what_if)))
    blocks += [Block("Note", [note]) for note in result.notes if note not in leading]
    if not result.ranks.is_empty():
        blocks.append(
            Block(
                "Rank-aligned (NEW - BASE, ms per step)", frame=result.ranks.with_columns(pl.col(pl.Float64).round(3))
            )
        )
    if not result.op_deltas.is_empty():
        blocks.append(op_deltas_block(result.op_deltas))
    return blocks


def op_deltas_block(op_deltas: pl.DataFrame) -> Block:
    """The largest per-op changes: per step for traces; for summary text over the whole profile, with ops
    one table lacks shown as ``absent``."""
    deltas = op_deltas.head(TOP_OP_DELTAS).with_columns(pl.col(pl.Float64).round(3))
    if "present" not in deltas.columns:
        return Block("Largest per-op changes (ms per step)", frame=deltas)
    shown = deltas.drop("present", "is_cast").with_columns(  # numbers as every table writes them, or absent
        pl.col(c).map_elements(cell, return_dtype=pl.String, skip_nulls=True).fill_null("absent")
        for c in deltas.columns
        if c not in ("name", "present", "is_cast")
    )
    return Block("Largest per-op changes (ms over the profile)", frame=shown)


def compare_json(result: Comparison, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(json_form.comparison(result), default=str) + "\n")


def compare_markdown(result: Comparison, out: TextIO | None = None) -> None:
    with _visible(out) as buffer:
        b, n = result.base.run, result.new.run
        buffer.write(f"## traceq: {n['name']} vs {b['name']}\n")
        _write_markdown(compare_blocks(result), buffer)


def compare_terminal(result: Comparison, out: TextIO | None = None) -> None:
    """The comparison for a terminal, names shown as written (see :func:`to_terminal`)."""
    out = out or sys.stdout
    b, n = result.base.run, result.new.run
    head = (f"[bold]traceq compare[/bold]  BASE {literal(b['name'])} ({literal(b['run_id'])})  "
            f"NEW {literal(n['name'])} ({literal(n['run_id'])})")  # fmt: skip
    write_terminal(head, terminal_blocks(compare_blocks(result)), out)


def _write_markdown(blocks: list[Block], out: TextIO) -> None:
    for block in blocks:
        if block.title:
            out.write(f"\n### {block.title}\n\n")
        else:
            out.write("\n")
        if block.frame is not None:
            out.write(markdown(block.frame))
        for line in block.lines:  # a finding's evidence lines: items of a list under it, not one paragraph
            out.write(f"   - {line.strip()}\n" if line.startswith("   ") else line + "\n")
