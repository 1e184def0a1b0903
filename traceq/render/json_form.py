"""Run reports and comparisons as JSON documents: the results' full values stated as every format states
them (:mod:`traceq.render.rounding`), and the long tables cut to their first rows."""

from __future__ import annotations

from typing import Any

from traceq.analysis.findings import Finding, Waterfall
from traceq.analysis.results import Comparison, RunReport
from traceq.analysis.run_summary import TIMELINE_METRICS, RunSummary
from traceq.render import rounding

#: Rows of where the idle time went that a run's JSON lists (the largest first).
IDLE_SITES = 50
#: Per-op changes a comparison's JSON lists (the largest first).
OP_DELTAS = 30

#: A trace's headline keys, in the order the JSON writes them (``cast_overhead``, ``step_split_ms``,
#: ``rank_spread`` and ``outlier_steps`` are written by :func:`summary`).
_TRACE_KEYS = (
    "steps",
    "step_rule",
    "step_time_ms",
    "mean_step_time_ms",
    "gpu_busy_ms",
    "gpu_kernel_busy_ms",
    "gpu_idle_ms",
    "gpu_idle_ratio",
    "launch_bound_ratio",
    "host_launch_gap_ms",
    "gpu_events_per_step",
    "kernels_per_step",
    "median_kernel_us",
    "median_launch_us",
    "short_kernel_share",
    "median_queue_depth",
    "fp16_coverage",
    "tensor_core_coverage",
    "compute_ms",
)


def summary(report: RunReport) -> dict[str, Any]:
    """A run's headline keys: for a trace every one; for summary text the timeline's as null, then what
    op tables hold."""
    s: RunSummary = report.summary
    cast = s.cast_overhead
    casts = {"calls": cast.calls, "cpu_ms": cast.cpu_ms, "gpu_ms": cast.gpu_ms}
    if not report.has_timeline:
        out: dict[str, Any] = dict.fromkeys(TIMELINE_METRICS)
        keys = ("steps", "fp16_coverage", "tensor_core_coverage")
        return {**out, **{k: getattr(s, k) for k in keys}, "cast_overhead": casts, "ops_total": s.ops_total}
    out = {k: getattr(s, k) for k in _TRACE_KEYS}
    out["cast_overhead"] = {**casts, "cpu_share": cast.cpu_share, "round_trips": cast.round_trips}
    split = report.split
    out["step_split_ms"] = {"busy": split.busy, "idle": split.idle} if split is not None else None
    out["ops_total"] = s.ops_total
    if s.rank_spread is not None:
        out["rank_spread"] = s.rank_spread
    out["outlier_steps"] = [rounding.outlier(o) for o in s.outlier_steps]
    return out


def finding(f: Finding) -> dict[str, Any]:
    """``id``, ``title``, ``impact_ms``, ``evidence``, ``next_step``, and ``what_if_ms`` and
    ``unprofiled_ms`` where the replay gave them."""
    out = {
        "id": f.id,
        "title": f.title,
        "impact_ms": rounding.impact(f),
        "evidence": rounding.evidence(f),
        "next_step": f.next_step,
    }
    if f.what_if_ms is not None:
        out["what_if_ms"] = rounding.ms(f.what_if_ms)
    if f.unprofiled_ms is not None:
        out["unprofiled_ms"] = rounding.ms(f.unprofiled_ms)
    return out


def waterfall(w: Waterfall) -> list[dict[str, Any]]:
    """One ``{"part", "label", "base_ms", "new_ms", "ms_per_step"}`` per part (``ms_per_step``: NEW minus BASE)."""
    return [
        {"part": p.part, "label": p.label, "base_ms": p.base_ms, "new_ms": p.new_ms, "ms_per_step": p.delta_ms}
        for p in w.parts
    ]


def report(r: RunReport) -> dict[str, Any]:
    """A run's report: headline keys, ``ops`` rows, ``findings``, per-step causes and, for several ranks,
    rank views."""
    out = {
        "run": r.run,
        **summary(r),
        "ops": r.ops.to_dicts(),
        "findings": [finding(f) for f in r.findings],
        "idle_sites": r.sites.head(IDLE_SITES).to_dicts(),
        "step_causes": r.step_causes.drop("top_cause", strict=False).to_dicts(),
        "notes": r.notes,
    }
    if not r.ranks.is_empty():
        out["ranks"] = r.ranks.to_dicts()
        out["stragglers"] = r.stragglers.to_dicts()
    if not r.what_if.is_empty():
        out["what_if"] = r.what_if.to_dicts()
    if r.unprofiled is not None:
        out["unprofiled"] = rounding.estimate(r.unprofiled)
        if r.unprofiled_split is not None:
            out["unprofiled"]["split"] = {"busy": r.unprofiled_split.busy, "idle": r.unprofiled_split.idle}
    return out


def comparison(c: Comparison) -> dict[str, Any]:
    """A comparison: both runs' reports, the waterfall, the findings and the verdict. ``explained_ms`` is
    what the findings' sizes as written add up to, and ``unexplained_ms`` the rest of the difference."""
    findings = [finding(f) for f in c.findings]
    explained = unexplained = None
    if c.explained_ms is not None:
        explained = sum(f["impact_ms"] or 0.0 for f in findings)
    if c.step_time_delta_ms is not None and explained is not None:
        unexplained = c.step_time_delta_ms - explained
    out = {
        "base": report(c.base),
        "new": report(c.new),
        "step_time_delta_ms": c.step_time_delta_ms,
        "explained_ms": explained,
        "unexplained_ms": unexplained,
        "verdict": c.verdict,
        "warnings": c.warnings,
        "measured": c.measured,
        "waterfall": [] if c.waterfall is None else waterfall(c.waterfall),
        "findings": findings,
        "op_deltas": c.op_deltas.head(OP_DELTAS).to_dicts(),
        "ranks": c.ranks.to_dicts(),
        "notes": c.notes,
    }
    if c.unprofiled is not None:
        out["unprofiled"] = rounding.verdict(c.unprofiled)
        if c.unprofiled_waterfall is not None:
            out["unprofiled"]["waterfall"] = waterfall(c.unprofiled_waterfall)
    return out
