"""``traceq report RUN``: one run's metrics, the tables behind them, and ranked findings with evidence.

Every number comes from a metric query in ``queries/`` (run restricted to this run); this module only
combines them into per-step means and findings. Nothing here prints: rendering is in
:mod:`traceq.render.reports`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from traceq.analysis import ranks as rank_views
from traceq.analysis.findings import Finding
from traceq.analysis.results import RunReport
from traceq.query.engine import Session
from traceq.store import Store

#: Thresholds for naming a finding (a finding is only named when its evidence clears the bar).
LAUNCH_BOUND_MIN = 0.2
CAST_CPU_SHARE_MIN = 0.03
LOW_FP16_COVERAGE = 0.5
LOW_TENSOR_CORE_COVERAGE = 0.5
DEPENDENCY_IDLE_MIN = 0.1
#: Metrics that need a timeline, reported as unavailable for summary-text runs.
TIMELINE_METRICS = ("gpu_busy_ms", "gpu_idle_ms", "gpu_idle_ratio", "launch_bound_ratio", "step_time_ms")


def run_report(ref: str, store: Store | str | Path | None = None, session: Session | None = None) -> RunReport:
    """Compute the report of one stored run (a run id or a run name; :func:`traceq.run_report` also
    takes a trace file, ingested first).

    ``session``: a :class:`~traceq.query.engine.Session` over this run and others (a comparison's two runs) whose
    metric results are shared; by default one is opened for this run alone.
    """
    store = store if isinstance(store, Store) else Store(store)
    run_id = store.resolve(ref)
    if session is None:
        with Session(store, [run_id], own_queries=True) as own:
            return run_report(run_id, store, own)
    run = session.sql("select * from runs").filter(pl.col("run_id") == run_id).row(0, named=True)
    run_info = {k: run[k] for k in ("run_id", "name", "source_format", "flavour", "profiler_version", "source_path")}
    run_info["n_ranks"] = run.get("n_ranks") or 1

    def q(name: str) -> pl.DataFrame:
        return session.query(name).filter(pl.col("run_id") == run_id)

    if run["source_format"] == "paddle_summary":
        return _summary_report(run_info, q)

    busy, bound, cover, casts = q("gpu_busy"), q("launch_bound"), q("precision_coverage"), q("cast_overhead")
    gaps, activity, ops = q("gpu_gap_buckets").drop("run_id"), q("gap_cpu_activity"), q("op_summary")
    windows = max(bound.select(pl.struct("step", "rank").n_unique()).item(), 1) if bound.height else 1
    steps = busy.join(bound.select("rank", "step", "device", "host_launch_gap_ns", "launch_bound_ratio",
                                   "gpu_events", "kernels"), on=["rank", "step", "device"], how="left")  # fmt: skip
    cover_row = cover.row(0, named=True) if cover.height else {}
    cast_calls = int(casts["calls"].sum()) if casts.height else 0
    summary = {
        "steps": windows if run["n_steps"] else 0,
        "step_time_ms": _ms(busy["window_ns"].median()),
        "gpu_busy_ms": _ms(busy["busy_ns"].mean()),
        "gpu_kernel_busy_ms": _ms(busy["kernel_busy_ns"].mean()),
        "gpu_idle_ms": _ms(busy["idle_ns"].mean()),
        "gpu_idle_ratio": _f(busy["idle_ratio"].mean()),
        "launch_bound_ratio": _f(bound["launch_bound_ratio"].mean()),
        "host_launch_gap_ms": _ms(bound["host_launch_gap_ns"].mean()),
        "gpu_events_per_step": _f(bound["gpu_events"].mean()),
        "kernels_per_step": _f(bound["kernels"].mean()),
        "median_kernel_us": _us(bound["median_kernel_ns"].mean()),
        "median_launch_us": _us(bound["median_launch_ns"].mean()),
        "short_kernel_share": _f(bound["short_kernel_share"].mean()),
        "median_queue_depth": _f(bound["median_queue_depth"].mean()),
        "fp16_coverage": _f(cover_row.get("fp16_coverage")),
        "tensor_core_coverage": _f(cover_row.get("tensor_core_coverage")),
        "compute_ms": _ms((cover_row.get("compute_ns") or 0) / windows),
        "cast_overhead": {
            "calls": cast_calls / windows,
            "cpu_ms": _ms(casts["cpu_ns"].sum() / windows) if casts.height else 0.0,
            "gpu_ms": _ms(casts["gpu_ns"].sum() / windows) if casts.height else 0.0,
            "cpu_share": _f(casts["cpu_share"].mean()) if casts.height else 0.0,
            "round_trips": (casts["round_trips"].sum() / windows)
            if casts.height and casts["round_trips"].null_count() < casts.height
            else None,
        },
    }
    gap_histogram = (
        gaps.group_by("kind", "bucket")
        .agg(pl.col("gaps").sum(), (pl.col("gap_ns").sum() / windows).alias("ns_per_step"))
        .sort("kind", "bucket")
    )
    gap_activity = (
        activity.group_by("op")
        .agg((pl.col("gap_ns").sum() / windows).alias("ns_per_step"))
        .sort("ns_per_step", descending=True)
    )
    per_step_ops = _ranks_combined(ops).with_columns(
        (pl.col("calls") / windows).alias("calls_per_step"),
        *(
            (pl.col(c) / windows).alias(c.replace("_ns", "_ns_per_step"))
            for c in ("cpu_incl_ns", "cpu_self_ns", "gpu_ns")
        ),
    )
    dependency = gaps.filter(pl.col("kind") == "dependency")["gap_ns"].sum() / windows / 1e6 if gaps.height else 0.0
    findings = _largest_first([f for rule in RULES if (f := rule(_Seen(summary, gap_activity, dependency)))])
    ranks = straggling = pl.DataFrame()
    if busy.select("rank").n_unique() > 1:
        balance = q("rank_balance")
        ranks, straggling = rank_views.per_rank(balance), rank_views.stragglers(balance)
        summary["rank_spread"] = rank_views.spread(ranks)
        finding = rank_views.straggler_finding(ranks, straggling, summary["step_time_ms"])
        if finding:
            findings = _largest_first([*findings, finding])
    notes = []
    if summary["launch_bound_ratio"] and summary["launch_bound_ratio"] >= LAUNCH_BOUND_MIN:
        notes.append(
            "Profiled step times include the profiler's own CPU cost per op, so a launch-bound run looks "
            "more launch-bound under the profiler than without it; compare with step times measured unprofiled."
        )
    frames = {"gpu_busy": busy, "gpu_gap_buckets": gaps, "gap_cpu_activity": activity}
    return RunReport(
        run_info,
        summary,
        findings,
        steps.drop("run_id"),
        gap_histogram,
        gap_activity,
        per_step_ops,
        notes,
        frames,
        ranks,
        straggling,
    )


def _ranks_combined(ops: pl.DataFrame) -> pl.DataFrame:
    """``op_summary`` with one row per op name: sums over ranks; coverages weighted by the op's GPU time."""
    if ops.is_empty() or ops["rank"].n_unique() <= 1:
        return ops.drop("run_id", "rank")
    sums = ("calls", "cpu_incl_ns", "cpu_self_ns", "gpu_ns", "gpu_top_ns", "kernels")
    weighted = [
        ((pl.col(c) * pl.col("gpu_ns")).sum() / pl.col("gpu_ns").filter(pl.col(c).is_not_null()).sum()).alias(c)
        for c in ("fp16_coverage", "tensor_core_coverage")
    ]
    return (
        ops.group_by("name", maintain_order=True)
        .agg(*(pl.col(c).sum() for c in sums), *weighted)
        .with_columns(
            (pl.col("kernels") / pl.col("calls")).alias("kernels_per_call"),
            (pl.col("cpu_incl_ns") / pl.col("gpu_ns")).alias("cpu_gpu_ratio"),
        )
        .select(ops.drop("run_id", "rank").columns)
    )


@dataclass(frozen=True)
class _Seen:
    """What the findings of one run's report are made from."""

    #: the report's headline numbers
    summary: dict[str, Any]
    #: per op the launching thread was in, host-launch gap ns per step (largest first)
    gap_activity: pl.DataFrame
    #: GPU idle ms per step with work queued (dependency gaps)
    dependency_ms: float


def _launch_bound(seen: _Seen) -> Finding | None:
    summary = seen.summary
    lb = summary["launch_bound_ratio"] or 0.0
    if not lb >= LAUNCH_BOUND_MIN:
        return None
    top = seen.gap_activity.head(5).with_columns((pl.col("ns_per_step") / 1e6).round(3).alias("ms_per_step"))
    return Finding(
        id="launch_bound",
        title=f"The GPU waits for the CPU to launch work {lb:.0%} of each step",
        impact_ms=summary["host_launch_gap_ms"],
        evidence={
            "launch_bound_ratio": lb,
            "host_launch_gap_ms_per_step": summary["host_launch_gap_ms"],
            "gpu_events_per_step": summary["gpu_events_per_step"],
            "median_kernel_us": summary["median_kernel_us"],
            "median_launch_us": summary["median_launch_us"],
            "short_kernel_share": summary["short_kernel_share"],
            "cpu_ops_during_gaps_ms_per_step": dict(top.select("op", "ms_per_step").iter_rows()),
        },
        next_step="Give the GPU more work per launch: a larger batch, fused ops (torch.compile, fused "
        "optimizers), CUDA graphs; or cut per-op CPU cost (fewer small ops, fewer casts).",
    )


def _cast_overhead(seen: _Seen) -> Finding | None:
    cast = seen.summary["cast_overhead"]
    if not (cast["calls"] and (cast["cpu_share"] or 0) >= CAST_CPU_SHARE_MIN):
        return None
    return Finding(
        id="cast_overhead",
        title=f"{cast['calls']:.0f} dtype casts per step cost {cast['cpu_ms']:.2f} ms of CPU time",
        impact_ms=cast["cpu_ms"],
        evidence=cast,
        next_step="Cast once, not per op: keep parameters in half precision (Paddle O2 / "
        "paddle.amp.decorate, PyTorch autocast with half weights) and avoid fp32<->fp16 round trips.",
    )


def _fp32_compute(seen: _Seen) -> Finding | None:
    summary = seen.summary
    fp16 = summary["fp16_coverage"]
    if not (fp16 is not None and fp16 < LOW_FP16_COVERAGE and summary["compute_ms"]):
        return None
    return Finding(
        id="fp32_compute",
        title=f"Only {fp16:.0%} of the GEMM/conv/attention time runs in half precision",
        impact_ms=summary["compute_ms"] * (1 - fp16) / 2,
        evidence={"fp16_coverage": fp16, "compute_ms_per_step": summary["compute_ms"]},
        next_step="Run these ops under autocast / AMP (check the op lists), or this run is FP32 by design.",
    )


def _no_tensor_cores(seen: _Seen) -> Finding | None:
    summary = seen.summary
    fp16, tc = summary["fp16_coverage"], summary["tensor_core_coverage"]
    if not (fp16 is not None and fp16 >= LOW_FP16_COVERAGE and tc is not None and tc < LOW_TENSOR_CORE_COVERAGE):
        return None
    return Finding(
        id="no_tensor_cores",
        title=f"Half-precision compute is on tensor cores only {tc:.0%} of the time",
        impact_ms=summary["compute_ms"] * (1 - tc) / 2,
        evidence={"tensor_core_coverage": tc, "fp16_coverage": fp16},
        next_step="Pad GEMM and conv dimensions to multiples of 8, use NHWC for convolutions.",
    )


def _dependency_idle(seen: _Seen) -> Finding | None:
    dependency, step = seen.dependency_ms, seen.summary["step_time_ms"] or 0.0
    if not (step and dependency / step >= DEPENDENCY_IDLE_MIN):
        return None
    return Finding(
        id="dependency_idle",
        title=f"The GPU idles {dependency:.2f} ms per step with work queued (syncs, events, other streams)",
        impact_ms=dependency,
        evidence={"dependency_gap_ms_per_step": dependency},
        next_step="Look for host-device synchronisations (item(), .cpu(), loss-scaler checks).",
    )


#: The rules of a run's findings: each names its finding when the evidence clears its bar.
RULES: tuple[Callable[[_Seen], Finding | None], ...] = (
    _launch_bound,
    _cast_overhead,
    _fp32_compute,
    _no_tensor_cores,
    _dependency_idle,
)


def _largest_first(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: -(f.impact_ms or 0.0))


def _summary_report(run: dict[str, Any], q: Callable[[str], pl.DataFrame]) -> RunReport:
    """Summary text has op-level totals only: ops, kernel coverage and casts; no timeline metrics."""
    ops, casts = q("summary_ops").drop("run_id"), q("summary_casts")
    cover = q("summary_coverage")
    cover_row = cover.row(0, named=True) if cover.height else {}
    summary: dict[str, Any] = {key: None for key in TIMELINE_METRICS}
    summary.update(
        {
            "steps": None,
            "fp16_coverage": cover_row.get("fp16_coverage"),
            "tensor_core_coverage": cover_row.get("tensor_core_coverage"),
            "cast_overhead": {
                "calls": int(casts["calls"].sum()),
                "cpu_ms": _ms(casts["cpu_incl_ns"].sum()),
                "gpu_ms": _ms(casts["gpu_ns"].sum()),
            },
        }
    )
    notes = [
        "Summary text has no timeline: GPU idle time, gaps, the launch-bound ratio and step times need a "
        "trace (paddle.profiler export_chrome_tracing). Totals are for the whole profile, not per step."
    ]
    return RunReport(run, summary, [], pl.DataFrame(), pl.DataFrame(), pl.DataFrame(), ops, notes)


def _ms(ns: float | None) -> float | None:
    return None if ns is None else float(ns) / 1e6


def _us(ns: float | None) -> float | None:
    return None if ns is None else float(ns) / 1e3


def _f(x: float | None) -> float | None:
    return None if x is None else float(x)
