"""``traceq report RUN``: one run's metrics, the tables behind them, and ranked findings with evidence.

Every number comes from a metric query in ``queries/`` (run restricted to this run); this module only
combines them into per-step means and findings. Nothing here prints: rendering is in
:mod:`traceq.render.reports`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceq.analysis import ranks as rank_views
from traceq.query.engine import Session, sql
from traceq.store import Store

#: Thresholds for naming a finding (a finding is only named when its evidence clears the bar).
LAUNCH_BOUND_MIN = 0.2
CAST_CPU_SHARE_MIN = 0.03
LOW_FP16_COVERAGE = 0.5
LOW_TENSOR_CORE_COVERAGE = 0.5
DEPENDENCY_IDLE_MIN = 0.1
#: Metrics that need a timeline, reported as unavailable for summary-text runs.
TIMELINE_METRICS = ("gpu_busy_ms", "gpu_idle_ms", "gpu_idle_ratio", "launch_bound_ratio", "step_time_ms")


@dataclass
class RunReport:
    """A run's report: headline numbers (``summary``), findings and the tables behind them."""

    run: dict[str, Any]
    summary: dict[str, Any]
    findings: list[dict[str, Any]]
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

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: headline keys, ``ops`` rows, ``findings`` and, for several ranks, rank views."""
        out = {
            "run": self.run,
            **self.summary,
            "ops": self.ops.to_dicts(),
            "findings": self.findings,
            "notes": self.notes,
        }
        if not self.ranks.is_empty():
            out["ranks"] = self.ranks.to_dicts()
            out["stragglers"] = self.stragglers.to_dicts()
        return out


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
    runs = [run_id]
    run = session.sql("select * from runs").filter(pl.col("run_id") == run_id).row(0, named=True)
    run_info = {k: run[k] for k in ("run_id", "name", "source_format", "flavour", "profiler_version", "source_path")}
    run_info["n_ranks"] = run.get("n_ranks") or 1
    if run["source_format"] == "paddle_summary":
        return _summary_report(run_info, store, runs)

    def q(name: str) -> pl.DataFrame:
        return session.query(name).filter(pl.col("run_id") == run_id)

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
    findings = _findings(summary, gap_activity, gaps, windows)
    ranks = straggling = pl.DataFrame()
    if busy.select("rank").n_unique() > 1:
        balance = q("rank_balance")
        ranks, straggling = rank_views.per_rank(balance), rank_views.stragglers(balance)
        summary["rank_spread"] = rank_views.spread(ranks)
        finding = rank_views.straggler_finding(ranks, straggling, summary["step_time_ms"])
        if finding:
            findings = sorted([*findings, finding], key=lambda f: -(f["impact_ms"] or 0.0))
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


def _findings(
    summary: dict[str, Any], activity: pl.DataFrame, gaps: pl.DataFrame, windows: int
) -> list[dict[str, Any]]:
    out = []
    lb = summary["launch_bound_ratio"] or 0.0
    if lb >= LAUNCH_BOUND_MIN:
        top = activity.head(5).with_columns((pl.col("ns_per_step") / 1e6).round(3).alias("ms_per_step"))
        out.append(
            {
                "id": "launch_bound",
                "title": f"The GPU waits for the CPU to launch work {lb:.0%} of each step",
                "impact_ms": summary["host_launch_gap_ms"],
                "evidence": {
                    "launch_bound_ratio": lb,
                    "host_launch_gap_ms_per_step": summary["host_launch_gap_ms"],
                    "gpu_events_per_step": summary["gpu_events_per_step"],
                    "median_kernel_us": summary["median_kernel_us"],
                    "median_launch_us": summary["median_launch_us"],
                    "short_kernel_share": summary["short_kernel_share"],
                    "cpu_ops_during_gaps_ms_per_step": dict(top.select("op", "ms_per_step").iter_rows()),
                },
                "next_step": "Give the GPU more work per launch: a larger batch, fused ops (torch.compile, fused "
                "optimizers), CUDA graphs; or cut per-op CPU cost (fewer small ops, fewer casts).",
            }
        )
    cast = summary["cast_overhead"]
    if cast["calls"] and (cast["cpu_share"] or 0) >= CAST_CPU_SHARE_MIN:
        out.append(
            {
                "id": "cast_overhead",
                "title": f"{cast['calls']:.0f} dtype casts per step cost {cast['cpu_ms']:.2f} ms of CPU time",
                "impact_ms": cast["cpu_ms"],
                "evidence": cast,
                "next_step": "Cast once, not per op: keep parameters in half precision (Paddle O2 / "
                "paddle.amp.decorate, PyTorch autocast with half weights) and avoid fp32<->fp16 round trips.",
            }
        )
    fp16 = summary["fp16_coverage"]
    if fp16 is not None and fp16 < LOW_FP16_COVERAGE and summary["compute_ms"]:
        out.append(
            {
                "id": "fp32_compute",
                "title": f"Only {fp16:.0%} of the GEMM/conv/attention time runs in half precision",
                "impact_ms": summary["compute_ms"] * (1 - fp16) / 2,
                "evidence": {"fp16_coverage": fp16, "compute_ms_per_step": summary["compute_ms"]},
                "next_step": "Run these ops under autocast / AMP (check the op lists), or this run is FP32 by design.",
            }
        )
    tc = summary["tensor_core_coverage"]
    if fp16 is not None and fp16 >= LOW_FP16_COVERAGE and tc is not None and tc < LOW_TENSOR_CORE_COVERAGE:
        out.append(
            {
                "id": "no_tensor_cores",
                "title": f"Half-precision compute is on tensor cores only {tc:.0%} of the time",
                "impact_ms": summary["compute_ms"] * (1 - tc) / 2,
                "evidence": {"tensor_core_coverage": tc, "fp16_coverage": fp16},
                "next_step": "Pad GEMM and conv dimensions to multiples of 8, use NHWC for convolutions.",
            }
        )
    dependency = gaps.filter(pl.col("kind") == "dependency")["gap_ns"].sum() / windows / 1e6 if gaps.height else 0.0
    step = summary["step_time_ms"] or 0.0
    if step and dependency / step >= DEPENDENCY_IDLE_MIN:
        out.append(
            {
                "id": "dependency_idle",
                "title": f"The GPU idles {dependency:.2f} ms per step with work queued (syncs, events, other streams)",
                "impact_ms": dependency,
                "evidence": {"dependency_gap_ms_per_step": dependency},
                "next_step": "Look for host-device synchronisations (item(), .cpu(), loss-scaler checks).",
            }
        )
    return sorted(out, key=lambda f: -(f["impact_ms"] or 0.0))


def _summary_report(run: dict[str, Any], store: Store, runs: list[str]) -> RunReport:
    """Summary text has op-level totals only: ops, kernel coverage and casts; no timeline metrics."""
    ops = sql(
        "select op as name, sum(calls) calls, sum(cpu_total_ns) cpu_incl_ns, sum(gpu_total_ns) gpu_ns "
        "from op_stats where depth = 0 group by op order by cpu_incl_ns desc",
        store,
        runs,
    )
    k = sql(
        "select sum(o.gpu_total_ns) filter (where c.kernel_class in ('gemm','conv','attention')) compute_ns, "
        "sum(o.gpu_total_ns) filter (where c.kernel_class in ('gemm','conv','attention') and c.precision in "
        "('fp16','bf16','fp8')) reduced_ns, sum(o.gpu_total_ns) filter (where c.kernel_class in "
        "('gemm','conv','attention') and c.tensor_core) tc_ns from op_stats o join kernel_classes c "
        "using (run_id, rank, name) where o.row_type = 'kernel'",
        store,
        runs,
    ).row(0, named=True)
    casts = sql(
        "-- Requires: _cast_ops\nselect sum(calls) calls, sum(cpu_total_ns) cpu_incl_ns, sum(gpu_total_ns) gpu_ns "
        "from op_stats cross join _cast_ops c where depth = 0 and regexp_matches(op, c.conversion)",
        store,
        runs,
    )
    compute = k["compute_ns"] or 0
    summary: dict[str, Any] = {key: None for key in TIMELINE_METRICS}
    summary.update(
        {
            "steps": None,
            "fp16_coverage": (k["reduced_ns"] or 0) / compute if compute else None,
            "tensor_core_coverage": (k["tc_ns"] or 0) / compute if compute else None,
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
