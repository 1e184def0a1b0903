"""A run's report or a comparison as one self-contained HTML page: inline SVG charts, no scripts, no network.

The page shows time: a timeline strip of each run's representative step (:mod:`traceq.analysis.step_lanes`:
GPU lanes with kernels by class, idle gaps by cause, the launching threads' top-level ops; BASE above NEW
on one ms scale), a cumulative waterfall on an ms axis (a comparison: BASE's step, each part's change,
NEW's step; a run: its step built up from its parts), the findings with their evidence, and per-op charts
of the GPU time each op caused (launched by it or beneath it) and its CPU time. Every number drawn comes
from the result; this module only draws.
"""

from __future__ import annotations

import html
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import polars as pl

from traceq._utils.outputs import atomic_output, check_output, starts_with
from traceq._utils.words import fixed
from traceq.analysis.causes import CAUSES, COLOURS
from traceq.analysis.findings import WATERFALL_MIN_SHARE, Finding, Waterfall
from traceq.analysis.replay.estimates import Estimate
from traceq.analysis.results import Comparison, RunReport, StepLanes
from traceq.render import rounding
from traceq.render.formats import TOP_OPS
from traceq.render.op_list import listed
from traceq.render.replay import WHAT_IF_TITLE, saving_text, unprofiled_lines, unprofiled_text, what_if_table
from traceq.render.reports import estimated_steps, evidence_text, headline

if TYPE_CHECKING:
    from traceq.store import Store

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1b1b;max-width:1180px}
h1{font-size:22px}h2{font-size:17px;margin-top:30px}.verdict{font-size:16px;background:#f3f6fa;padding:12px;
border-left:4px solid #3b6ea5}table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;
border-bottom:1px solid #ddd;text-align:right;vertical-align:top}td:first-child,th:first-child{text-align:left}
.note{color:#555;font-style:italic}svg text{font-size:11px;fill:#333}svg .lane{font-size:10px;fill:#555}
.finding{margin-bottom:14px}.finding table{margin:4px 0 4px 18px}.finding td{text-align:left}
.next{margin-left:18px;color:#333}.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
"""
WIDTH = 1160
_LABEL_W = 190
_ROW = 17

#: Colours of GPU work by kernel class (memcpy and memset by kind).
CLASS_COLOURS = {
    "gemm": "#1f5fa8",
    "conv": "#3b83c4",
    "attention": "#6aa9dd",
    "elementwise": "#7fbf7b",
    "reduction": "#4d9a4a",
    "cast": "#e08214",
    "layout": "#8e63b5",
    "optimizer": "#a6611a",
    "comm": "#c51b7d",
    "other": "#9e9e9e",
    "memcpy": "#d6b656",
    "memset": "#b8a36a",
}
#: Colours of GPU idle time by cause (the ids of ``idle_causes``; each cause's ``colour``): each far from
#: every other and from every kernel class (CIE76 colour difference of at least 25), but the cast idle time
#: near the cast kernels' orange and the unexplained idle time near the other kernels' grey, on purpose.
CAUSE_COLOURS = COLOURS
#: Colours of the host lanes' top-level ops: the ops with the most time there, one colour each (the same
#: op the same colour in BASE and NEW), named in the legend; every other op :data:`HOST_REST`.
HOST_COLOURS = ("#4e79a7", "#e15759", "#59a14f", "#b07aa1", "#9c755f", "#f28e2b", "#76b7b2", "#edc948")
HOST_REST = "#c7c7c7"
_OTHER = "#9e9e9e"
_UP, _DOWN, _TOTAL = "#c0504d", "#4f8f4f", "#3b6ea5"


def render_html(result: Comparison | RunReport) -> str:
    """The report or comparison as one HTML document."""
    if isinstance(result, Comparison):
        return _page(_compare_title(result), _comparison(result))
    return _page(f"traceq: {result.run['name']}", _run(result))


def to_html(result: Comparison | RunReport, out: TextIO | None = None) -> None:
    """The page on ``out`` (stdout)."""
    (out or sys.stdout).write(render_html(result) + "\n")


def write_html(
    result: Comparison | RunReport,
    path: Path,
    store: Store | None = None,
    force: bool = False,
    top: int | None = TOP_OPS,
) -> str | None:
    """Write the page atomically (temp file, then rename), to a path :func:`html_output` allows, listing
    each run's first ``top`` ops (None: every op); returns what an existing file there was (None: a new file)."""
    path = Path(path)
    replaced = html_output(path, store, force)
    with atomic_output(path) as tmp:
        tmp.write_text(render_html(listed(result, top)), encoding="utf-8")
    return replaced


def html_output(path: Path, store: Store | None = None, force: bool = False) -> str | None:
    """:func:`~traceq._utils.outputs.check_output` for a page: an existing file is replaced if traceq wrote it (or
    with ``force``)."""
    return check_output(path, store, force=force, made_by_traceq=is_html_page)


#: The first bytes of every page, and of pages written before the generator tag.
_HEAD = b"<!doctype html><html><head><meta charset='utf-8'><meta name='generator' content='traceq'>"
_PAGE_HEADS = (_HEAD, b"<!doctype html><html><head><meta charset='utf-8'><title>traceq:")


def is_html_page(path: Path) -> str | None:
    """The words "a traceq HTML page" if the file is one, else None."""
    return "a traceq HTML page" if starts_with(path, _PAGE_HEADS) else None


def _page(title: str, body: list[str]) -> str:
    return "\n".join(
        [
            f"{_HEAD.decode()}<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
            f"<h1>{_e(title)}</h1>",
            *body,
            "</body></html>",
        ]
    )


def _waterfall_section(waterfall: Waterfall, base_ms: float, new_ms: float, title: str) -> list[str]:
    """A waterfall's heading, its sentence and its chart: BASE's step, each part's change, NEW's step."""
    shown, other = waterfall.shown(WATERFALL_MIN_SHARE * max(base_ms, new_ms))
    rows: list[tuple[str, float, float, str]] = [("BASE step", 0.0, base_ms, _TOTAL)]
    level = base_ms
    for label, delta in [*((p.label, p.delta_ms) for p in shown), ("other parts", other.delta_ms)]:
        rows.append((f"{label} ({fixed(delta, sign=True)} ms)", level, level + delta, _UP if delta > 0 else _DOWN))
        level += delta
    rows.append(("NEW step", 0.0, new_ms, _TOTAL))
    return [
        f"<h2>{_e(title)}</h2>",
        f"<p>BASE {base_ms:.2f} ms {'+' if new_ms >= base_ms else '-'} {abs(new_ms - base_ms):.2f} ms = "
        f"NEW {new_ms:.2f} ms; red parts made NEW slower, green ones faster.</p>",
        _waterfall(rows),
    ]


def _compare_title(result: Comparison) -> str:
    return f"traceq: {result.new.run['name']} (NEW) vs {result.base.run['name']} (BASE)"


# -- pages ------------------------------------------------------------------------------------------------


def _comparison(result: Comparison) -> list[str]:
    b, n = result.base, result.new
    parts = [f"<p class='verdict'>{_e(result.verdict)}</p>"]
    parts += [f"<p class='note'>{_e(w)}</p>" for w in result.warnings]
    timelines = [(f"BASE {b.run['name']}", b.timeline, b), (f"NEW {n.run['name']}", n.timeline, n)]
    parts += _timeline_section([(label, t, _mean_ms(r)) for label, t, r in timelines if t is not None])
    if result.unprofiled_waterfall is not None and result.unprofiled is not None:
        est_b, est_n = estimated_steps(result)
        title = "Waterfall without the profiler: from BASE's estimated step to NEW's (ms per step)"
        parts += _waterfall_section(result.unprofiled_waterfall, est_b, est_n, title)
    if result.waterfall is not None and b.split is not None and n.split is not None:
        title = "Waterfall of the traced steps: from BASE's step to NEW's (mean ms per step)"
        parts += _waterfall_section(result.waterfall, b.split.window_ms, n.split.window_ms, title)
    if result.unprofiled is not None:
        parts += _unprofiled({"base": result.unprofiled.base, "new": result.unprofiled.new})
    parts += _findings(result.findings, signed=True)
    if not result.new.what_if.is_empty():
        parts += [f"<h2>NEW: {_e(WHAT_IF_TITLE)}</h2>", _table(what_if_table(result.new.what_if))]
    deltas = result.op_deltas
    if not deltas.is_empty():
        larger = pl.max_horizontal("base_gpu_ms", "new_gpu_ms")
        by_gpu = deltas.filter(larger > 0).sort(larger, descending=True).head(15)
        if by_gpu.height:
            parts += [
                "<h2>GPU time each op caused (launched by it or beneath it), ms per step</h2>",
                _paired_bars(by_gpu["name"].to_list(), by_gpu["base_gpu_ms"].to_list(), by_gpu["new_gpu_ms"].to_list()),
            ]
        by_cpu = deltas.sort(pl.max_horizontal("base_cpu_ms", "new_cpu_ms"), descending=True).head(15)
        parts += [
            "<h2>CPU time of each op (inclusive), ms per step</h2>",
            _paired_bars(by_cpu["name"].to_list(), by_cpu["base_cpu_ms"].to_list(), by_cpu["new_cpu_ms"].to_list()),
        ]
    cov = [
        ("FP16/BF16 coverage, BASE", (b.summary.fp16_coverage or 0.0) * 100),
        ("FP16/BF16 coverage, NEW", (n.summary.fp16_coverage or 0.0) * 100),
        ("tensor-core coverage, BASE", (b.summary.tensor_core_coverage or 0.0) * 100),
        ("tensor-core coverage, NEW", (n.summary.tensor_core_coverage or 0.0) * 100),
    ]
    parts += ["<h2>Coverage of GEMM/conv/attention time (%)</h2>", _bars(cov, unit="%")]
    if not result.steps.is_empty():
        parts += ["<h2>GPU busy and idle per step</h2>", _steps_chart(result.steps)]
    if not result.ranks.is_empty():
        parts += ["<h2>Rank-aligned changes (NEW - BASE, ms per step)</h2>", _table(result.ranks)]
    parts += [f"<p class='note'>{_e(note)}</p>" for note in result.notes]
    return parts


def _run(report: RunReport) -> list[str]:
    rows = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in headline(report))
    parts = [f"<table>{rows}</table>"]
    if report.timeline is not None:
        parts += _timeline_section([(report.run["name"], report.timeline, _mean_ms(report))])
    if report.split is not None and report.split.window_ms > 0:
        s = report.split
        pieces = [(f"GPU busy: {CAUSES[c].label}", v) for c, v in s.busy.items()]
        pieces += [(f"GPU idle: {CAUSES[c].label}", v) for c, v in s.idle.items()]
        small = WATERFALL_MIN_SHARE * s.window_ms
        kept = sorted((p for p in pieces if p[1] >= small), key=lambda p: -p[1])
        other = s.window_ms - sum(v for _, v in kept)
        rows: list[tuple[str, float, float, str]] = []
        level = 0.0
        for label, v in [*kept, ("other parts", other)]:
            colour = _TOTAL if label.startswith("GPU busy") else CAUSE_COLOURS.get(_cause_of(label), "#999")
            rows.append((f"{label} ({v:.2f} ms)", level, level + v, colour))
            level += v
        rows.append(("step", 0.0, s.window_ms, "#555"))
        parts += ["<h2>Where the step goes (mean ms per step, cumulative)</h2>", _waterfall(rows)]
    if report.unprofiled is not None:
        parts += _unprofiled({"this run": report.unprofiled})
    parts += _findings(report.findings, signed=False)
    if not report.what_if.is_empty():
        parts += [f"<h2>{_e(WHAT_IF_TITLE)}</h2>", _table(what_if_table(report.what_if))]
    ops = report.ops
    if not ops.is_empty() and "gpu_incl_ns_per_step" in ops.columns:
        top = ops.filter(pl.col("gpu_incl_ns_per_step") > 0).sort("gpu_incl_ns_per_step", descending=True).head(15)
        if top.height:
            parts += [
                "<h2>GPU time each op caused (launched by it or beneath it), ms per step</h2>",
                _bars(list(zip(top["name"], (top["gpu_incl_ns_per_step"] / 1e6).to_list(), strict=True))),
            ]
        top = ops.sort("cpu_incl_ns_per_step", descending=True).head(15)
        parts += [
            "<h2>CPU time of each op (inclusive), ms per step</h2>",
            _bars(list(zip(top["name"], (top["cpu_incl_ns_per_step"] / 1e6).to_list(), strict=True))),
        ]
    if not report.ranks.is_empty():
        parts += ["<h2>Ranks (means per step)</h2>", _table(report.ranks)]
    parts += [f"<p class='note'>{_e(note)}</p>" for note in report.notes]
    return parts


def _cause_of(label: str) -> str:
    name = label.removeprefix("GPU idle: ")
    return next((c for c, cause in CAUSES.items() if cause.label == name), "")


# -- the timeline strip -----------------------------------------------------------------------------------


def _mean_ms(report: RunReport) -> float | None:
    """The page's one step time of a run: its mean window (what the verdict, headline and waterfall state)."""
    return report.summary.mean_step_time_ms


def _timeline_section(shown: list[tuple[str, StepLanes, float | None]]) -> list[str]:
    if not shown:
        return []

    def which(t: StepLanes, mean: float | None) -> str:
        step = f"step {t.step}" if t.step is not None else "the GPU span"
        if t.windows == 1:
            return f"{step}, the only one"
        of_mean = f" ({mean:.2f} ms)" if mean is not None else ""
        return f"{step}, of its {t.windows} steps the one nearest the mean step time{of_mean}"

    explained = "; ".join(f"{_e(label)}: {which(t, mean)}" for label, t, mean in shown)
    runs = [(label, t) for label, t, _ in shown]
    hosts = host_colours(runs)
    return [
        "<h2>Timeline of a representative step (nearest the mean)</h2>",
        f"<p>{explained}. {_lanes_meaning(runs)} One scale for all runs; hover for names.</p>",
        _timeline_svg(runs, hosts),
        _legend(runs, hosts),
    ]


def host_colours(runs: list[tuple[str, StepLanes]]) -> dict[str, str]:
    """The colour of each host op that gets one of its own (:data:`HOST_COLOURS`): the ops with the most
    time in the runs' host lanes, most first."""
    total: dict[str, float] = {}
    for _, t in runs:
        for name, s, e in t.host.select("name", "start_ms", "end_ms").iter_rows():
            total[name] = total.get(name, 0.0) + e - s
    top = sorted(total, key=lambda n: (-total[n], n))[: len(HOST_COLOURS)]
    return dict(zip(top, HOST_COLOURS, strict=False))


def _text_colour(fill: str) -> str:
    """Dark text on a light fill, white on a dark one."""
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "#1b1b1b" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#fff"


def _lanes_meaning(runs: list[tuple[str, StepLanes]]) -> str:
    if all(t.gpu.is_empty() for _, t in runs):
        return "No GPU work in this trace: the lanes are the top-level ops of the busiest host threads."
    return (
        "GPU lanes show kernels by class and idle time by cause; host lanes the top-level ops of the threads "
        "that launched the GPU work."
    )


def _timeline_svg(runs: list[tuple[str, StepLanes]], hosts: dict[str, str]) -> str:
    span = max(t.window_ms for _, t in runs) or 1.0
    scale = (WIDTH - _LABEL_W - 20) / span
    out: list[str] = []
    y = 0
    for label, t in runs:
        out.append(f'<text x="0" y="{y + 13}" font-weight="bold">{_e(label)}</text>')
        y += 18
        lanes = t.gpu.select("device", "stream").unique().sort("device", "stream").iter_rows()
        for device, stream in lanes:
            work = t.gpu.filter((pl.col("device") == device) & (pl.col("stream").eq_missing(stream)))
            out.append(_lane_label(y, f"GPU {device} stream {stream if stream is not None else '?'}"))
            for name, cls, s, e in work.select("name", "kernel_class", "start_ms", "end_ms").iter_rows():
                out.append(_rect(s, e, y, scale, CLASS_COLOURS.get(cls, _OTHER), f"{name} ({cls}, {e - s:.3f} ms)"))
            y += _ROW
        for (device,), idle in t.idle.group_by("device", maintain_order=True):
            out.append(_lane_label(y, f"GPU {device} idle"))
            for cause, s, e in idle.select("cause", "start_ms", "end_ms").iter_rows():
                label_ = CAUSES[cause].label if cause in CAUSES else cause
                out.append(_rect(s, e, y, scale, CAUSE_COLOURS.get(cause, "#999"), f"idle: {label_} ({e - s:.3f} ms)"))
            y += _ROW
        for (pid, tid), ops in t.host.group_by("pid", "tid", maintain_order=True):
            out.append(_lane_label(y, f"host thread {tid}" + (f" (process {pid})" if pid != tid else "")))
            for name, s, e in ops.select("name", "start_ms", "end_ms").iter_rows():
                fill = hosts.get(name, HOST_REST)
                out.append(_rect(s, e, y, scale, fill, f"{name} ({e - s:.3f} ms)"))
                if (e - s) * scale > 60:
                    chars = int((e - s) * scale / 6)
                    text = name if len(name) <= chars else name[: max(chars - 1, 1)] + "…"
                    x, ink = _LABEL_W + s * scale + 2, _text_colour(fill)
                    out.append(f'<text x="{x:.1f}" y="{y + 10}" class="lane" style="fill:{ink}">{_e(text)}</text>')
            y += _ROW
        y += 8
    out.append(_axis(span, scale, y))
    height = y + 30
    return f'<svg width="{WIDTH}" height="{height}" role="img" aria-label="timeline">' + "".join(out) + "</svg>"


def _lane_label(y: int, text: str) -> str:
    return f'<text x="0" y="{y + 11}" class="lane">{_e(text)}</text>'


def _rect(start: float, end: float, y: int, scale: float, colour: str, title: str) -> str:
    x, w = _LABEL_W + start * scale, max((end - start) * scale, 0.6)
    size = f'x="{x:.2f}" y="{y + 1}" width="{w:.2f}" height="{_ROW - 3}"'
    return f'<rect {size} fill="{colour}"><title>{_e(title)}</title></rect>'


def _legend(runs: list[tuple[str, StepLanes]], hosts: dict[str, str]) -> str:
    order = list(CLASS_COLOURS)
    present = {c for _, t in runs for c in t.gpu["kernel_class"].to_list()}
    classes = sorted(present, key=lambda c: (order.index(c) if c in order else len(order), c))
    causes = [c for c in CAUSE_COLOURS if any(c in t.idle["cause"].to_list() for _, t in runs)]
    items = [f"<span><i style='background:{CLASS_COLOURS.get(c, _OTHER)}'></i>{_e(c)}</span>" for c in classes]
    items += [f"<span><i style='background:{CAUSE_COLOURS[c]}'></i>idle: {_e(CAUSES[c].label)}</span>" for c in causes]
    ops = [f"<span><i style='background:{colour}'></i>{_e(name)}</span>" for name, colour in hosts.items()]
    if any(name not in hosts for _, t in runs for name in t.host["name"].to_list()):
        ops.append(f"<span><i style='background:{HOST_REST}'></i>other ops</span>")
    host = f"<p class='legend'><span>host ops:</span>{''.join(ops)}</p>" if ops else ""
    return f"<p class='legend'>{''.join(items)}</p>{host}"


def _axis(span: float, scale: float, y: int) -> str:
    """An ms axis from 0 to ``span`` at height ``y``."""
    step = _nice_step(span)
    out = [f'<line x1="{_LABEL_W}" y1="{y}" x2="{_LABEL_W + span * scale:.1f}" y2="{y}" stroke="#666"/>']
    k = 0
    while k * step <= span + 1e-9:
        x = _LABEL_W + k * step * scale
        out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 5}" stroke="#666"/>')
        out.append(f'<text x="{x:.1f}" y="{y + 17}" text-anchor="middle">{_tick(k * step, step)}</text>')
        k += 1
    out.append(f'<text x="{_LABEL_W - 8}" y="{y + 17}" text-anchor="end">ms</text>')
    return "".join(out)


def _nice_step(span: float, ticks: int = 10) -> float:
    raw = span / ticks if span > 0 else 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def _tick(value: float, step: float) -> str:
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{value:.{digits}f}"


# -- charts -----------------------------------------------------------------------------------------------


def _waterfall(rows: list[tuple[str, float, float, str]]) -> str:
    """Bars from ``start`` to ``end`` ms on one axis from 0, each ``(label, start, end, colour)``, with a
    dashed line carrying each bar's end to the next bar."""
    span = max(max(s, e) for _, s, e, _ in rows) or 1.0
    label_w = 330
    scale = (WIDTH - label_w - 90) / span
    h = 22
    out = []
    for i, (label, s, e, colour) in enumerate(rows):
        y = i * h
        lo, hi = min(s, e), max(s, e)
        x, w = label_w + lo * scale, max((hi - lo) * scale, 1.0)
        out.append(f'<text x="0" y="{y + 15}"><title>{_e(label)}</title>{_e(_short(label, 58))}</text>')
        out.append(f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{h - 8}" fill="{colour}"/>')
        out.append(f'<text x="{x + w + 4:.1f}" y="{y + 15}">{e:.2f} ms</text>')
        if i + 1 < len(rows):
            xe = label_w + e * scale
            out.append(f'<line x1="{xe:.1f}" y1="{y + h - 4}" x2="{xe:.1f}" y2="{y + h + 4}" stroke="#888" '
                       'stroke-dasharray="2,2"/>')  # fmt: skip
    axis = _shift_axis(span, scale, h * len(rows) + 4, label_w)
    return _svg(h * len(rows) + 34, "waterfall", [*out, axis])


def _shift_axis(span: float, scale: float, y: int, left: int) -> str:
    """:func:`_axis` drawn from ``left`` instead of the timeline's label column."""
    return f'<g transform="translate({left - _LABEL_W},0)">{_axis(span, scale, y)}</g>'


def _paired_bars(names: list[str], base: list[float | None], new: list[float | None]) -> str:
    """BASE and NEW bars per name on one ms axis from 0 (None: the op is absent from that run's summary)."""
    span = max([v for v in (*base, *new) if v is not None] + [0.0]) or 1.0
    label_w = 360
    scale = (WIDTH - label_w - 90) / span
    h = 30
    out = []
    for i, (name, b, n) in enumerate(zip(names, base, new, strict=True)):
        y = i * h
        out.append(f'<text x="0" y="{y + 18}"><title>{_e(name)}</title>{_e(_short(name, 62))}</text>')
        for k, (v, colour, who) in enumerate(((b, "#8c9db5", "BASE"), (n, "#e08214", "NEW"))):
            if v is None:
                out.append(f'<text x="{label_w + 4}" y="{y + 12 + k * 12}" class="lane">{who} absent</text>')
                continue
            out.append(f'<rect x="{label_w}" y="{y + 3 + k * 12}" width="{max(v * scale, 0.5):.1f}" height="11" '
                       f'fill="{colour}"><title>{who} {v:.3f} ms</title></rect>')  # fmt: skip
            out.append(f'<text x="{label_w + v * scale + 4:.1f}" y="{y + 12 + k * 12}" class="lane">{who} '
                       f"{v:.2f}</text>")  # fmt: skip
    axis = _shift_axis(span, scale, h * len(names) + 4, label_w)
    return _svg(h * len(names) + 34, "per-op", [*out, axis])


def _bars(rows: list[tuple[str, float]], unit: str = "ms") -> str:
    """One bar per row on one axis from 0."""
    if not rows:
        return ""
    span = max(v for _, v in rows) or 1.0
    label_w = 360
    scale = (WIDTH - label_w - 90) / span
    h = 20
    out = []
    for i, (name, v) in enumerate(rows):
        y = i * h
        out.append(f'<text x="0" y="{y + 14}"><title>{_e(name)}</title>{_e(_short(name, 62))}</text>')
        out.append(
            f'<rect x="{label_w}" y="{y + 4}" width="{max(v * scale, 0.5):.1f}" height="{h - 8}" fill="{_TOTAL}"/>'
        )
        out.append(f'<text x="{label_w + v * scale + 4:.1f}" y="{y + 14}">{v:.2f} {unit}</text>')
    axis = _shift_axis(span, scale, h * len(rows) + 4, label_w).replace(">ms<", f">{unit}<")
    return f'<svg width="{WIDTH}" height="{h * len(rows) + 34}" role="img">{"".join(out)}{axis}</svg>'


def _steps_chart(steps: pl.DataFrame) -> str:
    """Per-step stacked bars of GPU busy and idle time for both runs."""
    ranked = "rank" in steps.columns and steps["rank"].n_unique() > 1
    rows = steps.sort("run", "step", *(["rank"] if ranked else [])).to_dicts()
    span = max(r["window_ns"] for r in rows) / 1e6 or 1.0
    scale = (WIDTH - _LABEL_W - 90) / span
    h = 18
    out = []
    for i, r in enumerate(rows):
        y = i * h
        busy, idle = r["busy_ns"] / 1e6, r["idle_ns"] / 1e6
        label = f"{r['run'].upper()} step {r['step']}" + (f" rank {r['rank']}" if ranked else "")
        out.append(f'<text x="0" y="{y + 13}">{_e(label)}</text>')
        out.append(f'<rect x="{_LABEL_W}" y="{y + 3}" width="{busy * scale:.1f}" height="{h - 6}" fill="{_TOTAL}">'
                   f"<title>GPU busy {busy:.2f} ms</title></rect>")  # fmt: skip
        out.append(f'<rect x="{_LABEL_W + busy * scale:.1f}" y="{y + 3}" width="{idle * scale:.1f}" height="{h - 6}" '
                   f'fill="#d9d9d9"><title>GPU idle {idle:.2f} ms</title></rect>')  # fmt: skip
    axis = _axis(span, scale, h * len(rows) + 4)
    legend = (f'<rect x="{_LABEL_W}" y="{h * len(rows) + 26}" width="12" height="12" fill="{_TOTAL}"/>'
              f'<text x="{_LABEL_W + 16}" y="{h * len(rows) + 36}">GPU busy</text>'
              f'<rect x="{_LABEL_W + 90}" y="{h * len(rows) + 26}" width="12" height="12" fill="#d9d9d9"/>'
              f'<text x="{_LABEL_W + 106}" y="{h * len(rows) + 36}">GPU idle</text>')  # fmt: skip
    return f'<svg width="{WIDTH}" height="{h * len(rows) + 44}" role="img">{"".join(out)}{axis}{legend}</svg>'


def _unprofiled(estimates: dict[str, Estimate]) -> list[str]:
    """The replay's step time without the profiler, per run."""
    out = ["<h2>Without the profiler (replay)</h2>"]
    for side, estimate in estimates.items():
        lines = "<br>".join(_e(line) for line in unprofiled_lines(rounding.estimate(estimate)))
        out.append(f"<p><b>{_e(side.upper() if side in ('base', 'new') else side)}</b>: {lines}</p>")
    return out


def _findings(findings: list[Finding], signed: bool) -> list[str]:
    out = ["<h2>Findings</h2>"]
    if not findings:
        return [*out, "<p>No cause is large enough to name.</p>"]
    out.append("<ol>")
    for f in findings:
        impact = ""
        if f.impact_ms is not None:
            size = fixed(f.impact_ms, sign=True) if signed else f"~{fixed(f.impact_ms)}"
            impact = f" ({size} ms per step)"
        rows = "".join(
            f"<tr><td>{_e(k.replace('_', ' '))}</td><td>{_e(evidence_text(v, paired=signed))}</td></tr>"
            for k, v in rounding.evidence(f).items()
            if v not in (None, {}, [])
            and not (isinstance(v, list) and len(v) == 2 and all(x in (None, {}, []) for x in v))
        )
        if f.what_if_ms is not None:
            where = " in NEW" if signed else ""
            saving = saving_text(rounding.ms(f.what_if_ms) or 0.0)
            rows += f"<tr><td>what if fixed{where} (replay)</td><td>{_e(saving)}</td></tr>"
        if f.unprofiled_ms is not None:
            words, value = unprofiled_text(rounding.ms(f.unprofiled_ms) or 0.0, signed).split(": ", 1)
            rows += f"<tr><td>{_e(words)}</td><td>{_e(value)}</td></tr>"
        out.append(
            f"<li class='finding'><b>{_e(f.title)}</b>{_e(impact)}<table>{rows}</table>"
            f"<div class='next'>Next: {_e(f.next_step)}</div></li>"
        )
    out.append("</ol>")
    return out


def _table(frame: pl.DataFrame) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in frame.columns)
    body = []
    for row in frame.iter_rows():
        cells = "".join(f"<td>{_e(f'{v:,.3f}' if isinstance(v, float) else str(v))}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _svg(height: int, label: str, parts: list[str]) -> str:
    return f'<svg width="{WIDTH}" height="{height}" role="img" aria-label="{label}">' + "".join(parts) + "</svg>"


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _e(text: object) -> str:
    return html.escape(str(text))
