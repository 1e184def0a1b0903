"""A self-contained HTML comparison report (inline SVG charts, no scripts, no network)."""

from __future__ import annotations

import html
import sys
from pathlib import Path
from typing import TextIO

import polars as pl

from traceq.analysis.results import Comparison
from traceq.render.replay import WHAT_IF_TITLE, saving_text, unprofiled_lines, what_if_table

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1b1b;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}.verdict{font-size:16px;background:#f3f6fa;padding:12px;
border-left:4px solid #3b6ea5}table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;
border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child{text-align:left}
.note{color:#555;font-style:italic}svg text{font-size:11px;fill:#333}
"""


def _bar_chart(
    rows: list[tuple[str, float]], title: str, unit: str = "ms", width: int = 1000, neutral: bool = False
) -> str:
    """Horizontal bars around a zero line (positive right, red: slower; negative left, green: faster)."""
    if not rows:
        return ""
    label_w, h = 470, 22
    span = max(abs(v) for _, v in rows) or 1.0
    half = (width - label_w - 80) / 2
    zero = label_w + half
    out = [f'<svg width="{width}" height="{h * len(rows) + 30}" role="img" aria-label="{html.escape(title)}">']
    out.append(f'<line x1="{zero}" y1="0" x2="{zero}" y2="{h * len(rows)}" stroke="#999"/>')
    for i, (label, v) in enumerate(rows):
        y, w = i * h, abs(v) / span * half
        x = zero if v >= 0 else zero - w
        color = "#3b6ea5" if neutral else ("#c0504d" if v > 0 else "#4f8f4f")
        short = label if len(label) <= 68 else label[:66] + "..."
        out.append(f'<text x="0" y="{y + 15}"><title>{html.escape(label)}</title>{html.escape(short)}</text>')
        out.append(f'<rect x="{x:.1f}" y="{y + 4}" width="{max(w, 1):.1f}" height="{h - 8}" fill="{color}"/>')
        text_x = x + w + 4 if v >= 0 else zero + 4
        out.append(f'<text x="{text_x:.1f}" y="{y + 15}">{v:+.2f} {unit}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _timeline(steps: pl.DataFrame, width: int = 1000) -> str:
    """Per-step stacked bars of GPU busy and idle time for both runs."""
    if steps.is_empty():
        return ""
    ranked = "rank" in steps.columns and steps["rank"].n_unique() > 1
    rows = steps.sort("run", "step", *(["rank"] if ranked else [])).to_dicts()
    top = max(r["window_ns"] for r in rows) or 1
    h, label_w = 18, 160
    scale = (width - label_w - 20) / top
    out = [f'<svg width="{width}" height="{h * len(rows) + 40}" role="img" aria-label="GPU busy and idle per step">']
    for i, r in enumerate(rows):
        y = i * h
        busy, idle = r["busy_ns"] * scale, r["idle_ns"] * scale
        label = f"{r['run']} step {r['step']}" + (f" rank {r['rank']}" if ranked else "")
        out.append(f'<text x="0" y="{y + 13}">{html.escape(label)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 3}" width="{busy:.1f}" height="{h - 6}" fill="#3b6ea5"/>')
        out.append(f'<rect x="{label_w + busy:.1f}" y="{y + 3}" width="{idle:.1f}" height="{h - 6}" fill="#d9d9d9"/>')
    y = h * len(rows) + 20
    out.append(f'<rect x="{label_w}" y="{y - 10}" width="12" height="12" fill="#3b6ea5"/>')
    out.append(f'<text x="{label_w + 16}" y="{y}">GPU busy</text>')
    out.append(f'<rect x="{label_w + 90}" y="{y - 10}" width="12" height="12" fill="#d9d9d9"/>')
    out.append(f'<text x="{label_w + 106}" y="{y}">GPU idle</text></svg>')
    return "\n".join(out)


def _table(frame: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    body = []
    for row in frame.iter_rows():
        cells = "".join(f"<td>{html.escape(f'{v:,.3f}' if isinstance(v, float) else str(v))}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def render_html(result: Comparison) -> str:
    """The comparison as one HTML document."""
    b, n = result.base, result.new
    parts: list[str] = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>traceq: {html.escape(n.run['name'])} vs "
        f"{html.escape(b.run['name'])}</title><style>{_CSS}</style></head><body>",
        f"<h1>traceq: {html.escape(n.run['name'])} (NEW) vs {html.escape(b.run['name'])} (BASE)</h1>",
        f"<p class='verdict'>{html.escape(result.verdict)}</p>",
    ]
    if result.step_time_delta_ms is not None and result.waterfall is not None:
        longer = max(b.summary.get("mean_step_time_ms") or 0.0, n.summary.get("mean_step_time_ms") or 0.0)
        shown, other = result.waterfall.shown(0.005 * longer)
        rows: list[tuple[str, float]] = [(p.label, p.delta_ms) for p in shown]
        rows.append(("other parts", other))
        rows.append(("step time difference (NEW - BASE)", result.step_time_delta_ms))
        parts += [
            "<h2>Waterfall: where the step-time difference comes from (ms per step)</h2>",
            _bar_chart(rows, "waterfall"),
        ]
        parts += ["<h2>GPU busy and idle per step</h2>", _timeline(result.steps)]
    if result.unprofiled is not None:
        parts.append("<h2>Without the profiler (replay)</h2>")
        for side in ("base", "new"):
            lines = unprofiled_lines(result.unprofiled[side])
            parts.append(f"<p><b>{side.upper()}</b>: " + "<br>".join(html.escape(line) for line in lines) + "</p>")
    parts.append("<h2>Findings</h2><ol>")
    for f in result.findings:
        impact = f" ({f.impact_ms:+.2f} ms/step)" if f.impact_ms is not None else ""
        fixed = f.what_if_ms is not None and saving_text(f.what_if_ms)
        what_if = f"<br>What if fixed in NEW (replay): {html.escape(fixed)}" if fixed else ""
        parts.append(f"<li><b>{html.escape(f.title)}</b>{impact}{what_if}<br>Next: {html.escape(f.next_step)}</li>")
    parts.append("</ol>")
    if not result.new.what_if.is_empty():
        parts += [f"<h2>NEW: {html.escape(WHAT_IF_TITLE)}</h2>", _table(what_if_table(result.new.what_if))]
    if not result.op_deltas.is_empty():
        top = result.op_deltas.head(15)
        parts += ["<h2>Per-op CPU time change (ms per step)</h2>",
                  _bar_chart(list(zip(top["name"], top["cpu_delta_ms"], strict=True)), "cpu deltas")]  # fmt: skip
        parts += ["<h2>Per-op GPU time change (ms per step)</h2>",
                  _bar_chart(list(zip(top["name"], top["gpu_delta_ms"], strict=True)), "gpu deltas")]  # fmt: skip
    cov = [
        ("FP16/BF16 coverage, BASE", (b.summary.get("fp16_coverage") or 0.0) * 100),
        ("FP16/BF16 coverage, NEW", (n.summary.get("fp16_coverage") or 0.0) * 100),
        ("tensor-core coverage, BASE", (b.summary.get("tensor_core_coverage") or 0.0) * 100),
        ("tensor-core coverage, NEW", (n.summary.get("tensor_core_coverage") or 0.0) * 100),
    ]
    parts += ["<h2>Coverage of GEMM/conv/attention time (%)</h2>", _bar_chart(cov, "coverage", unit="%", neutral=True)]
    if not result.ranks.is_empty():
        deltas = [(f"rank {r}", d or 0.0) for r, d in result.ranks.select("rank", "step_delta").iter_rows()]
        parts += ["<h2>Step time change per rank (ms per step)</h2>", _bar_chart(deltas, "rank deltas")]
        parts += ["<h2>Rank-aligned changes (NEW - BASE, ms per step)</h2>", _table(result.ranks)]
    if not result.op_deltas.is_empty():
        parts += ["<h2>Largest per-op changes</h2>", _table(result.op_deltas.head(20))]
    parts += [f"<p class='note'>{html.escape(note)}</p>" for note in result.notes]
    parts.append("</body></html>")
    return "\n".join(parts)


def to_html(result: Comparison, out: TextIO | None = None) -> None:
    """The comparison as one HTML document on ``out`` (stdout)."""
    (out or sys.stdout).write(render_html(result) + "\n")


def write_html(result: Comparison, path: Path) -> None:
    """Write the report atomically (temp file, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_html(result), encoding="utf-8")
    tmp.replace(path)
