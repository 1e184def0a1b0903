"""The results the analysis hands to rendering: a run's report and a comparison of two runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceq.analysis.findings import Finding, Waterfall
from traceq.analysis.split import Split
from traceq.analysis.timeline import Timeline


@dataclass
class RunReport:
    """A run's report: headline numbers (``summary``), findings and the tables behind them."""

    run: dict[str, Any]
    summary: dict[str, Any]
    findings: list[Finding]
    #: per window and device: window, busy and idle ns, launch-bound ratio, GPU events
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: GPU idle gaps counted and summed per kind and length bucket (ns per step)
    gap_histogram: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: where each cause's idle time went: cause, site (call), op, top_op, frame, calls and ms per step
    sites: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: per op: calls, CPU and GPU time per step (the top ops; ``summary['ops_total']`` says how many there are)
    ops: pl.DataFrame = field(default_factory=pl.DataFrame)
    notes: list[str] = field(default_factory=list)
    #: the metric frames behind the report, by query name (reused by comparisons)
    frames: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    #: multi-rank runs: per-rank means (:func:`traceq.analysis.ranks.per_rank`), empty otherwise
    ranks: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: multi-rank runs: the straggler of each step (:func:`traceq.analysis.ranks.stragglers`)
    stragglers: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: the step split into causes (None for summary text)
    split: Split | None = field(default=None, repr=False)
    #: each cause's evidence (empty for summary text)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    #: per window: its split into causes (ms) and its largest cause
    step_causes: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: the representative (median) step as lanes to draw (None for summary text)
    timeline: Timeline | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: headline keys, ``ops`` rows, ``findings``, per-step causes and, for several
        ranks, rank views."""
        out = {
            "run": self.run,
            **self.summary,
            "ops": self.ops.to_dicts(),
            "findings": [f.to_dict() for f in self.findings],
            "idle_sites": self.sites.head(50).to_dicts(),
            "step_causes": self.step_causes.drop("top_cause", strict=False).to_dicts(),
            "notes": self.notes,
        }
        if not self.ranks.is_empty():
            out["ranks"] = self.ranks.to_dicts()
            out["stragglers"] = self.stragglers.to_dicts()
        return out


@dataclass
class Comparison:
    """Two runs' reports, the step-time waterfall between them and the ranked findings."""

    base: RunReport
    new: RunReport
    step_time_delta_ms: float | None
    #: None for summary text (no timeline, no steps)
    waterfall: Waterfall | None
    findings: list[Finding]
    explained_ms: float | None
    unexplained_ms: float | None
    verdict: str
    op_deltas: pl.DataFrame
    steps: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    #: multi-rank runs: per-rank NEW - BASE deltas matched on rank (:func:`traceq.analysis.ranks.aligned`)
    ranks: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: why the two runs may not compare like for like (different GPUs, profilers, step counts, ...)
    warnings: list[str] = field(default_factory=list)
    #: step times measured without the profiler, where given: base_ms, new_ms, delta_ms, traced_delta_ms
    measured: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.to_dict(),
            "new": self.new.to_dict(),
            "step_time_delta_ms": self.step_time_delta_ms,
            "explained_ms": self.explained_ms,
            "unexplained_ms": self.unexplained_ms,
            "verdict": self.verdict,
            "warnings": self.warnings,
            "measured": self.measured,
            "waterfall": [] if self.waterfall is None else self.waterfall.rows(),
            "findings": [f.to_dict() for f in self.findings],
            "op_deltas": self.op_deltas.head(30).to_dicts(),
            "ranks": self.ranks.to_dicts(),
            "notes": self.notes,
        }
