"""The results the analysis hands to rendering: a run's report and a comparison of two runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceq.analysis.findings import Finding, Waterfall

#: Ops a report's JSON lists by default, the most CPU time first (``report --all``: every op).
TOP_OPS = 100


def most_cpu_first(ops: pl.DataFrame) -> pl.DataFrame:
    """A report's ops, the most CPU time (inclusive, per step where there are steps) first."""
    cpu = "cpu_incl_ns_per_step" if "cpu_incl_ns_per_step" in ops.columns else "cpu_incl_ns"
    return ops.sort(cpu, descending=True, nulls_last=True, maintain_order=True)


@dataclass
class RunReport:
    """A run's report: headline numbers (``summary``), findings and the tables behind them."""

    run: dict[str, Any]
    summary: dict[str, Any]
    findings: list[Finding]
    steps: pl.DataFrame
    gap_histogram: pl.DataFrame
    gap_activity: pl.DataFrame
    ops: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    #: the metric frames behind the report, by query name (reused by comparisons); the gaps are
    #: ``gpu_gap_buckets`` (counted and summed per bucket), not a row per gap
    frames: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    #: multi-rank runs: per-rank means (:func:`traceq.analysis.ranks.per_rank`), empty otherwise
    ranks: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: multi-rank runs: the straggler of each step (:func:`traceq.analysis.ranks.stragglers`)
    stragglers: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: how many ops :meth:`to_dict` lists, the most CPU time first (None: every op); a trace of millions
    #: of distinct op names made a JSON report of a gigabyte
    top_ops: int | None = TOP_OPS

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: headline keys, ``ops`` rows (the :attr:`top_ops` with the most CPU time, of
        ``ops_total``), ``findings`` and, for several ranks, rank views."""
        ops = self.ops if self.top_ops is None else most_cpu_first(self.ops).head(self.top_ops)
        out = {
            "run": self.run,
            **self.summary,
            "ops": ops.to_dicts(),
            "ops_total": self.ops.height,
            "findings": [f.to_dict() for f in self.findings],
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.to_dict(),
            "new": self.new.to_dict(),
            "step_time_delta_ms": self.step_time_delta_ms,
            "explained_ms": self.explained_ms,
            "unexplained_ms": self.unexplained_ms,
            "verdict": self.verdict,
            "waterfall": [] if self.waterfall is None else self.waterfall.rows(),
            "findings": [f.to_dict() for f in self.findings],
            "op_deltas": self.op_deltas.head(30).to_dicts(),
            "ranks": self.ranks.to_dicts(),
            "notes": self.notes,
        }
