"""The results the analysis hands to rendering: a run's report and a comparison of two runs, at full precision."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from traceq.analysis.causes import BUSY_PARTS, IDLE_CAUSES
from traceq.analysis.findings import Finding, Waterfall
from traceq.analysis.run_summary import RunSummary

if TYPE_CHECKING:
    from traceq.analysis.replay.estimates import Estimate, Verdict

#: The idle part of a step estimated without the profiler that no cause holds (the replay's windows are
#: drawn a little differently from the trace's): small where the split by cause holds.
REST = "estimate_rest"
REST_LABEL = "rest of the estimate, not split by cause"


def window_gpus(busy: pl.DataFrame) -> pl.DataFrame:
    """The GPUs of each window (``rank``, ``step``, ``gpus``) of ``gpu_busy`` rows: a rank that drives several
    GPUs states its busy and idle time, and where the idle time went, as their mean."""
    return busy.group_by("rank", "step").agg(pl.col("device").n_unique().alias("gpus"))


@dataclass
class Split:
    """One run's mean step (ms per step, over its windows): ``busy`` and ``idle`` parts add up to ``window_ms``."""

    run_id: str
    windows: int
    window_ms: float
    busy_ms: float
    busy: dict[str, float]
    idle: dict[str, float]
    #: per window: step, rank, window_ms, busy_ms and one column per cause (busy + idle parts), ms
    per_step: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False)

    @property
    def idle_ms(self) -> float:
        return self.window_ms - self.busy_ms

    def part(self, cause: str) -> float:
        """ms per step of ``cause``, busy and idle sides together."""
        return self.busy.get(cause, 0.0) + self.idle.get(cause, 0.0)

    def parts(self) -> dict[str, float]:
        """Every cause's ms per step (busy and idle sides together), in waterfall order."""
        return {c: self.part(c) for c in dict.fromkeys((*BUSY_PARTS, *IDLE_CAUSES))}


@dataclass(frozen=True)
class StepLanes:
    """A run's representative step: its window and the lanes inside it (times in ms from its start)."""

    run_id: str
    rank: int
    #: the window's step (None: a run without steps, whose one window is its GPU-active span)
    step: int | None
    #: how many windows the mean was taken over
    windows: int
    window_ms: float
    #: GPU work: device, stream, kind (kernel, memcpy, memset), kernel_class (memcpy/memset: the kind),
    #: name, start_ms, end_ms
    gpu: pl.DataFrame
    #: GPU idle: device, cause (as in ``idle_causes``), start_ms, end_ms
    idle: pl.DataFrame
    #: the launching threads' top-level ops: pid, tid, name, start_ms, end_ms
    host: pl.DataFrame


@dataclass
class RunReport:
    """A run's report: headline numbers (``summary``), findings and the tables behind them, at full
    precision (:mod:`traceq.render` rounds and cuts them as each format writes them)."""

    run: dict[str, Any]
    summary: RunSummary
    findings: list[Finding]
    #: per window and device: window, busy and idle ns, launch-bound ratio, GPU events
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: GPU idle gaps counted and summed per kind and length bucket (ns per step)
    gap_histogram: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: where each cause's idle time went: cause, site (call), op, top_op, frame, calls and ms per step
    sites: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: per op: calls, CPU and GPU time per step (the top ops; ``summary.ops_total`` says how many there are)
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
    #: ``report --what-if``: per cause the replay models, the fix, the step without the profiler with the
    #: fix and the saving with its band (:meth:`traceq.analysis.replay.replayer.Replayer.what_if`); empty otherwise
    what_if: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: ``report --unprofiled``: the step time estimated without the profiler
    unprofiled: Estimate | None = None
    #: with ``unprofiled``, for a run of one rank whose steps are host ranges: that step split like ``split``
    #: (each traced gap's causes scaled as the replay changed the gap; idle key ``estimate_rest``: the rest)
    unprofiled_split: Split | None = field(default=None, repr=False)
    #: the representative step (nearest the mean) as lanes to draw (None for summary text)
    timeline: StepLanes | None = field(default=None, repr=False)
    #: whether the run is a timeline of events (a trace); False: op tables only (summary text)
    has_timeline: bool = True


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
    #: ``report --compare --unprofiled``: both runs' step times estimated without the profiler and the
    #: verdict on them
    unprofiled: Verdict | None = None
    #: with ``unprofiled``, for runs of one rank: the estimated difference split by cause (each gap's traced
    #: causes scaled as the replay changed the gap), closing on the difference of the estimates
    unprofiled_waterfall: Waterfall | None = None

    def change(self) -> tuple[float, str] | None:
        """NEW's step time against BASE's in per cent (positive: NEW slower) as the verdict leads with it,
        and what it stands on: the step times measured without the profiler where given, else the estimate
        without the profiler where the replay ran, else the traced steps (None: no steps to compare)."""
        if self.measured is not None and self.measured["base_ms"]:
            return self.measured["delta_ms"] / self.measured["base_ms"] * 100, "measured without the profiler"
        if self.unprofiled is not None:
            return self.unprofiled.change_pct, "estimated without the profiler"
        window = self.base.summary.mean_step_time_ms
        if self.step_time_delta_ms is None or not window:
            return None
        return self.step_time_delta_ms / window * 100, "traced"
