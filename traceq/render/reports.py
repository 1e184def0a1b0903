"""Run reports and comparisons as terminal tables, JSON or Markdown."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import polars as pl

from traceq.analysis.results import Comparison, RunReport, most_cpu_first
from traceq.render.frames import console as make_console
from traceq.render.frames import literal, markdown, table, visible


@contextmanager
def _visible(out: TextIO | None) -> Iterator[TextIO]:
    """A buffer whose text is written to ``out`` (stdout) :func:`~traceq.render.frames.visible` at the end."""
    buffer = io.StringIO()
    yield buffer
    (out or sys.stdout).write(visible(buffer.getvalue()))


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "n/a (needs a trace)" if unit != "%" else "n/a"
    if unit == "%":
        return f"{v:.1%}"
    return f"{v:,.2f}{unit}"


def headline(report: RunReport) -> list[tuple[str, str]]:
    s = report.summary
    cast = s["cast_overhead"]
    return [
        *(_rank_headline(s["rank_spread"]) if "rank_spread" in s else []),
        ("steps", str(s["steps"]) if s["steps"] else "(whole GPU span)" if s["steps"] == 0 else "n/a"),
        ("step time (median)", _fmt(s["step_time_ms"], " ms")),
        ("GPU busy / step", _fmt(s["gpu_busy_ms"], " ms")),
        ("GPU idle / step", f"{_fmt(s['gpu_idle_ms'], ' ms')}  ({_fmt(s['gpu_idle_ratio'], '%')})"),
        ("launch-bound ratio", _fmt(s["launch_bound_ratio"], "%")),
        ("FP16/BF16 coverage", _fmt(s["fp16_coverage"], "%")),
        ("tensor-core coverage", _fmt(s["tensor_core_coverage"], "%")),
        ("casts / step", f"{cast['calls']:,.0f} calls, CPU {cast['cpu_ms']:.2f} ms, GPU {cast['gpu_ms']:.2f} ms"),
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


def rank_table(report: RunReport) -> pl.DataFrame:
    """The per-rank table as printed (ms rounded, ratios as fractions)."""
    return report.ranks.with_columns(pl.col(pl.Float64).round(3))


def straggler_table(report: RunReport) -> pl.DataFrame:
    return report.stragglers.with_columns(pl.col(pl.Float64).round(3))


def to_json(report: RunReport, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(report.to_dict(), default=str) + "\n")


def to_markdown(report: RunReport, out: TextIO | None = None) -> None:
    with _visible(out) as out:
        _to_markdown(report, out)


def _to_markdown(report: RunReport, out: TextIO) -> None:
    out.write(f"## traceq report: {report.run['name']} ({report.run['run_id']})\n\n")
    out.write("| metric | value |\n|---|---|\n")
    for k, v in headline(report):
        out.write(f"| {k} | {v} |\n")
    out.write("\n### Findings\n\n")
    for i, f in enumerate(report.findings, 1):
        out.write(f"{i}. **{f.title}** (~{f.impact_ms:.2f} ms/step). {f.next_step}\n")
    if not report.findings:
        out.write("No finding cleared its threshold.\n")
    for note in report.notes:
        out.write(f"\n> {note}\n")
    if not report.ranks.is_empty():
        out.write("\n### Ranks (means per step)\n\n" + markdown(rank_table(report)))
        out.write("\n### Straggler per step\n\n" + markdown(straggler_table(report)))
    if not report.ops.is_empty():
        out.write("\n### Top ops\n\n" + markdown(_top_ops(report.ops)))


def _top_ops(ops: pl.DataFrame, n: int = 15) -> pl.DataFrame:
    per_step = "cpu_incl_ns_per_step" in ops.columns
    cpu, gpu = ("cpu_incl_ns_per_step", "gpu_ns_per_step") if per_step else ("cpu_incl_ns", "gpu_ns")
    cols = [
        pl.col("name"),
        pl.col("calls_per_step" if per_step else "calls").round(1).alias("calls" + ("/step" if per_step else "")),
        (pl.col(cpu) / 1e6).round(3).alias("cpu ms" + ("/step" if per_step else "")),
        (pl.col(gpu) / 1e6).round(3).alias("gpu ms" + ("/step" if per_step else "")),
    ]
    if "fp16_coverage" in ops.columns:
        cols += [
            pl.col("kernels_per_call").round(2),
            pl.col("fp16_coverage").round(2),
            pl.col("tensor_core_coverage").round(2),
        ]
    return most_cpu_first(ops).head(n).select(cols)


def to_terminal(report: RunReport, out: TextIO | None = None) -> None:
    """The report for a terminal: names (runs, ops, files) shown as written, never read as rich markup,
    and :func:`~traceq.render.frames.visible`."""
    from rich.table import Table
    from rich.text import Text

    out = out or sys.stdout
    console = make_console(out, 160)
    run = report.run
    console.print(f"[bold]traceq report[/bold]  {literal(run['name'])}  ({literal(run['run_id'])}, "
                  f"{literal(run['profiler_version'])})")  # fmt: skip
    t = Table(show_header=False, box=None, padding=(0, 2))
    for k, v in headline(report):
        t.add_row(Text(visible(k)), Text(visible(v)))
    console.print(t)
    console.print("\n[bold]Findings[/bold] (largest estimated impact first)")
    for i, f in enumerate(report.findings, 1):
        console.print(f" {i}. [bold]{literal(f.title)}[/bold]  ~{f.impact_ms:.2f} ms/step")
        ev = ", ".join(f"{k}={_short(v)}" for k, v in f.evidence.items())
        console.print(f"    evidence: {literal(ev)}")
        console.print(f"    next: {literal(f.next_step)}")
    if not report.findings:
        console.print(" No finding cleared its threshold.")
    for note in report.notes:
        console.print(f"\n[italic]{literal(note)}[/italic]")
    if not report.ranks.is_empty():
        table(rank_table(report), out, "Ranks (means per step; wait = time waiting for the step's straggler)")
        table(straggler_table(report), out, "Straggler per step")
    if not report.gap_activity.is_empty():
        acts = report.gap_activity.head(8).select(pl.col("op"), (pl.col("ns_per_step") / 1e6).round(3).alias("ms/step"))
        table(acts, out, "CPU activity on the launching thread during host-launch gaps")
    if not report.gap_histogram.is_empty():
        hist = report.gap_histogram.select(
            "kind", "bucket", pl.col("gaps"), (pl.col("ns_per_step") / 1e6).round(3).alias("ms/step")
        )
        table(hist, out, "GPU idle gaps by kind and length")
    if not report.ops.is_empty():
        table(_top_ops(report.ops), out, "Top ops by CPU time")


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, list):
        return " -> ".join(_short(x) for x in v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_short(x)}" for k, x in list(v.items())[:5]) + "}"
    return str(v)


# -- comparisons -------------------------------------------------------------------------------------
def compare_json(result: Comparison, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(result.to_dict(), default=str) + "\n")


def _waterfall_rows(result: Comparison) -> pl.DataFrame:
    rows = [(f.title, f.impact_ms) for f in result.findings]
    if result.unexplained_ms is not None:
        rows.append(("unexplained (no finding covers it)", result.unexplained_ms))
    rows.append(("= step time difference, NEW - BASE", result.step_time_delta_ms))
    return pl.DataFrame(rows, schema={"part": pl.String, "ms/step": pl.Float64}, orient="row")


def compare_markdown(result: Comparison, out: TextIO | None = None) -> None:
    with _visible(out) as out:
        _compare_markdown(result, out)


def _compare_markdown(result: Comparison, out: TextIO) -> None:
    b, n = result.base, result.new
    out.write(f"## traceq: {n.run['name']} vs {b.run['name']}\n\n**{result.verdict}**\n\n")
    if result.step_time_delta_ms is not None:
        out.write(markdown(_waterfall_rows(result).with_columns(pl.col("ms/step").round(2))))
    out.write("\n### Findings\n\n")
    for i, f in enumerate(result.findings, 1):
        impact = f" ({f.impact_ms:+.2f} ms/step)" if f.impact_ms is not None else ""
        out.write(f"{i}. **{f.title}**{impact}. Next: {f.next_step}\n")
    for note in result.notes:
        out.write(f"\n> {note}\n")
    if not result.ranks.is_empty():
        out.write("\n### Rank-aligned (NEW - BASE, ms per step)\n\n")
        out.write(markdown(result.ranks.with_columns(pl.col(pl.Float64).round(3))))
    if not result.op_deltas.is_empty():
        out.write("\n### Largest per-op changes (ms per step)\n\n")
        out.write(markdown(result.op_deltas.head(12).with_columns(pl.col(pl.Float64).round(3))))


def compare_terminal(result: Comparison, out: TextIO | None = None) -> None:
    """The comparison for a terminal, names shown as written (see :func:`to_terminal`)."""

    out = out or sys.stdout
    console = make_console(out, 160)
    b, n = result.base.run, result.new.run
    console.print(f"[bold]traceq compare[/bold]  BASE {literal(b['name'])} ({literal(b['run_id'])})  "
                  f"NEW {literal(n['name'])} ({literal(n['run_id'])})")  # fmt: skip
    console.print(f"\n[bold]{literal(result.verdict)}[/bold]\n")
    if result.step_time_delta_ms is not None:
        table(_waterfall_rows(result).with_columns(pl.col("ms/step").round(3)), out, "Waterfall (ms per step)")
    console.print("\n[bold]Findings[/bold] (largest first)")
    for i, f in enumerate(result.findings, 1):
        impact = f"  {f.impact_ms:+.2f} ms/step" if f.impact_ms is not None else ""
        console.print(f" {i}. [bold]{literal(f.title)}[/bold]{impact}")
        ev = ", ".join(f"{k}={_short(v)}" for k, v in f.evidence.items())
        console.print(f"    evidence: {literal(ev)}")
        console.print(f"    next: {literal(f.next_step)}")
    for note in result.notes:
        console.print(f"\n[italic]{literal(note)}[/italic]")
    if not result.ranks.is_empty():
        table(result.ranks.with_columns(pl.col(pl.Float64).round(3)), out, "Rank-aligned (NEW - BASE, ms per step)")
    if not result.op_deltas.is_empty():
        table(result.op_deltas.head(12).with_columns(pl.col(pl.Float64).round(3)), out, "Largest per-op changes")
