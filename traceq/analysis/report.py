"""``traceq report RUN``: one run's step split into causes, ranked findings with evidence, and the tables behind them.

Every number comes from a metric query in ``queries/`` (run restricted to this run): the step's split into
GPU busy parts and idle causes (:mod:`traceq.analysis.split`), each cause's evidence
(:mod:`traceq.analysis.evidence`) and the headline metrics. This module only combines them into per-step
means and findings. Nothing here prints: rendering is in :mod:`traceq.render.reports`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from traceq._utils.words import count, fixed
from traceq.analysis import ranks as rank_views
from traceq.analysis.causes import (
    BUSY_PARTS,
    CAUSES,
    FP32_COMPUTE,
    GPU_COMPUTE,
    LAUNCH_OVERHEAD,
    NO_TENSOR_CORES,
    NOT_FINDINGS,
    PYTHON_OVERHEAD,
)
from traceq.analysis.evidence import evidence as evidence_of
from traceq.analysis.evidence import idle_sites_per_gpu
from traceq.analysis.findings import Finding
from traceq.analysis.ops_table import by_cpu_time
from traceq.analysis.results import RunReport, window_gpus
from traceq.analysis.run_summary import CastOverhead, OutlierStep, RunSummary
from traceq.analysis.split import Split, split
from traceq.analysis.step_lanes import timeline
from traceq.querying.engine import Session
from traceq.schema import has_timeline
from traceq.store import Store

#: A cause is a finding of one run when it costs at least this many ms per step and this share of the step.
RUN_MIN_MS = 0.25
RUN_MIN_SHARE = 0.03
#: Coverage below these names the fp32_compute / no_tensor_cores findings.
LOW_FP16_COVERAGE = 0.5
LOW_TENSOR_CORE_COVERAGE = 0.5
#: A step is an outlier when its window is this many times the median window and 1 ms longer.
OUTLIER_RATIO = 1.5
_MS = 1e6


def run_report(
    ref: str, store: Store | str | Path | None = None, session: Session | None = None, lanes: bool = True
) -> RunReport:
    """Compute the report of one stored run (a run id or a run name; :func:`traceq.run_report` also
    takes a trace file, ingested first).

    ``session``: a :class:`~traceq.querying.engine.Session` over this run and others (a comparison's two runs)
    whose metric results are shared; by default one is opened for this run alone. The report carries every
    op (render lists the first). ``lanes``: with the representative step's lanes (``timeline``, which only
    the HTML page draws); False leaves it None and its queries unmade.
    """
    store = Store.of(store)
    run_id = store.resolve(ref)
    if session is None:
        with Session(store, [run_id], own_queries=True) as own:
            return run_report(run_id, store, own, lanes)
    run = session.run_row(run_id)
    run_info = {k: run[k] for k in ("run_id", "name", "source_format", "flavour", "profiler_version", "source_path")}
    run_info["n_ranks"] = run.get("n_ranks") or 1
    run_info["devices"] = sorted({d.get("name") for d in _json_list(run.get("devices")) if d.get("name")})

    def q(name: str) -> pl.DataFrame:
        return session.query(name).filter(pl.col("run_id") == run_id)

    if not has_timeline(run):
        return _summary_report(run_info, q)

    busy, bound, cover, casts = q("gpu_busy"), q("launch_bound"), q("precision_coverage"), q("cast_overhead")
    gaps, ops = q("gpu_gap_buckets").drop("run_id"), q("op_summary")
    parts = split(session, run_id)
    windows = parts.windows
    host = q("_windows").filter(pl.col("step").is_not_null())
    cpu_only = busy.is_empty() and not host.is_empty()
    if cpu_only:  # no GPU work: the steps are the host's windows
        windows = host.select(pl.struct("rank", "step").n_unique()).item()
    steps = busy.join(bound.select("rank", "step", "device", "host_launch_gap_ns", "launch_bound_ratio",
                                   "gpu_events", "kernels"), on=["rank", "step", "device"], how="left",
                      nulls_equal=True)  # fmt: skip
    cover_row = cover.row(0, named=True) if cover.height else {}
    cast_calls = int(casts["calls"].sum()) if casts.height else 0
    host_ms = host["win_end"] - host["win_start"]
    summary = RunSummary(
        steps=windows if run["n_steps"] else 0,
        step_rule=run.get("step_rule"),
        step_time_ms=_ms(host_ms.median()) if cpu_only else _ms(busy["window_ns"].median()),
        mean_step_time_ms=_ms(host_ms.mean()) if cpu_only else parts.window_ms if busy.height else None,
        gpu_busy_ms=_ms(busy["busy_ns"].mean()),
        gpu_kernel_busy_ms=_ms(busy["kernel_busy_ns"].mean()),
        gpu_idle_ms=_ms(busy["idle_ns"].mean()),
        gpu_idle_ratio=_f(busy["idle_ratio"].mean()),
        launch_bound_ratio=_f(bound["launch_bound_ratio"].mean()),
        host_launch_gap_ms=_ms(bound["host_launch_gap_ns"].mean()),
        gpu_events_per_step=_f(bound["gpu_events"].mean()),
        kernels_per_step=_f(bound["kernels"].mean()),
        median_kernel_us=_us(bound["median_kernel_ns"].mean()),
        median_launch_us=_us(bound["median_launch_ns"].mean()),
        short_kernel_share=_f(bound["short_kernel_share"].mean()),
        median_queue_depth=_f(bound["median_queue_depth"].mean()),
        fp16_coverage=_f(cover_row.get("fp16_coverage")),
        tensor_core_coverage=_f(cover_row.get("tensor_core_coverage")),
        compute_ms=_ms((cover_row.get("compute_ns") or 0) / windows),
        cast_overhead=CastOverhead(
            calls=cast_calls / windows,
            cpu_ms=_ms(casts["cpu_ns"].sum() / windows) if casts.height else 0.0,
            gpu_ms=_ms(casts["gpu_ns"].sum() / windows) if casts.height else 0.0,
            cpu_share=_f(casts["cpu_share"].mean()) if casts.height else 0.0,
            round_trips=(casts["round_trips"].sum() / windows)
            if casts.height and casts["round_trips"].null_count() < casts.height
            else None,
        ),
        ops_total=0,  # set below, once the ops are combined over ranks
    )
    devices = window_gpus(busy)["gpus"].max() if busy.height else 1
    _check_invariants(summary, parts, int(devices or 1))
    gap_histogram = (
        gaps.group_by("kind", "bucket")
        .agg(pl.col("gaps").sum(), (pl.col("gap_ns").sum() / windows).alias("ns_per_step"))
        # shortest bucket first: a bucket's mean gap lies inside its range, and the ranges do not overlap
        .sort("kind", pl.col("ns_per_step") / pl.col("gaps"))
    )
    sites = _sites(idle_sites_per_gpu(session, run_id), windows)
    per_step_ops = _ranks_combined(ops).with_columns(
        (pl.col("calls") / windows).alias("calls_per_step"),
        *(
            (pl.col(c) / windows).alias(c.replace("_ns", "_ns_per_step"))
            for c in ("cpu_incl_ns", "cpu_self_ns", "gpu_ns", "gpu_incl_ns")
        ),
    )
    summary = replace(summary, ops_total=per_step_ops.height)
    per_step_ops = by_cpu_time(per_step_ops)
    ev = evidence_of(session, run_id, windows)
    findings = run_findings(parts, ev, summary, run_info["flavour"])
    ranks = straggling = pl.DataFrame()
    if busy.select("rank").n_unique() > 1:
        balance = q("rank_balance")
        ranks, straggling = rank_views.per_rank(balance), rank_views.stragglers(balance)
        summary = replace(summary, rank_spread=rank_views.spread(ranks))
        finding = rank_views.straggler_finding(ranks, straggling, summary.step_time_ms)
        if finding:
            findings = _largest_first([*findings, finding])
    step_causes, outliers = _step_causes(parts)
    summary = replace(summary, outlier_steps=outliers)
    notes = []
    if cpu_only:
        notes.append(
            "No GPU work in this trace: step times are the host's step windows; GPU busy and idle time, the "
            "causes of idle time and the launch-bound ratio need a trace of a GPU run."
        )
    host_bound = parts.idle.get(LAUNCH_OVERHEAD.id, 0.0) + parts.idle.get(PYTHON_OVERHEAD.id, 0.0)
    if not cpu_only and host_bound >= 0.2 * parts.window_ms:  # no GPU: nothing is launch-bound
        notes.append(
            "Profiled step times include the profiler's own CPU cost per op, so a launch-bound run looks "
            "more launch-bound under the profiler than without it; compare with step times measured unprofiled."
        )
    frames = {"gpu_busy": busy, "gpu_gap_buckets": gaps}
    return RunReport(
        run=run_info,
        summary=summary,
        findings=findings,
        steps=steps.drop("run_id"),
        gap_histogram=gap_histogram,
        sites=sites,
        ops=per_step_ops,
        notes=notes,
        frames=frames,
        ranks=ranks,
        stragglers=straggling,
        split=parts,
        evidence=ev,
        step_causes=step_causes,
        timeline=timeline(session, run_id) if lanes else None,
    )


def run_findings(
    parts: Split, ev: dict[str, dict[str, Any]], summary: RunSummary, flavour: str | None
) -> list[Finding]:
    """The causes of a run's steps that cost at least :data:`RUN_MIN_MS` and :data:`RUN_MIN_SHARE` of its
    step, and the coverage findings, largest first, each with its evidence and next step."""
    step = parts.window_ms
    out = []
    for cause, ms in parts.parts().items():
        if cause in NOT_FINDINGS or ms < max(RUN_MIN_MS, RUN_MIN_SHARE * step):
            continue
        sides = {}
        if cause in parts.idle:
            sides["gpu_idle_ms_per_step"] = parts.idle[cause]
        if cause in BUSY_PARTS:
            sides["gpu_busy_ms_per_step"] = parts.busy[cause]
        out.append(
            Finding(
                id=cause,
                title=_title(cause, ms, step, ev.get(cause, {})),
                impact_ms=ms,
                evidence={**sides, **ev.get(cause, {})},
                next_step=CAUSES[cause].next_step(flavour),
            )
        )
    out += [f for rule in _COVERAGE_RULES if (f := rule(summary, ev, flavour))]
    return _largest_first(out)


def _title(cause: str, ms: float, step: float, ev: dict[str, Any]) -> str:
    """One line naming ``cause`` with its size, in words that match the numbers (its :attr:`Cause.title`)."""
    c = CAUSES[cause]
    share = f"{ms / step:.0%} of the step" if step else "of each step"
    n = c.count.of(ev) if c.count else 0.0
    calls = count(n, *c.count.noun) if c.count and c.count.noun else ""
    label = f"{c.label[0].upper()}{c.label[1:]}"
    return c.title.format(ms=fixed(ms), share=share, n=n, calls=calls, Label=label)


def _fp32_compute(summary: RunSummary, ev: dict[str, dict[str, Any]], flavour: str | None) -> Finding | None:
    fp16, compute = summary.fp16_coverage, summary.compute_ms
    if not (fp16 is not None and fp16 < LOW_FP16_COVERAGE and compute):
        return None
    return Finding(
        id=FP32_COMPUTE.id,
        title=f"Only {fp16:.0%} of the GEMM/conv/attention time runs in half precision",
        impact_ms=compute * (1 - fp16) / 2,
        evidence={
            "fp16_coverage": fp16,
            "compute_ms_per_step": compute,
            "ops_still_fp32_ms_per_step": ev.get(GPU_COMPUTE.id, {}).get("ops_still_fp32_ms_per_step", {}),
        },
        next_step=FP32_COMPUTE.next_step(flavour),
    )


def _no_tensor_cores(summary: RunSummary, ev: dict[str, dict[str, Any]], flavour: str | None) -> Finding | None:
    fp16, tc, compute = summary.fp16_coverage, summary.tensor_core_coverage, summary.compute_ms or 0.0
    if not (fp16 is not None and fp16 >= LOW_FP16_COVERAGE and tc is not None and tc < LOW_TENSOR_CORE_COVERAGE):
        return None
    return Finding(
        id=NO_TENSOR_CORES.id,
        title=f"Half-precision compute is on tensor cores only {tc:.0%} of the time",
        impact_ms=compute * (1 - tc) / 2,
        evidence={"tensor_core_coverage": tc, "fp16_coverage": fp16},
        next_step=NO_TENSOR_CORES.next_step(flavour),
    )


#: Findings from the compute kernels' precision (their impact: half the compute time not yet reduced).
_COVERAGE_RULES: tuple[Callable[[RunSummary, dict[str, dict[str, Any]], str | None], Finding | None], ...] = (
    _fp32_compute,
    _no_tensor_cores,
)


def _check_invariants(summary: RunSummary, parts: Split, devices: int = 1) -> None:
    """What must hold whatever the trace: ratios in [0, 1], busy within the step, casts' GPU time within the
    busy time of the rank's ``devices`` GPUs, and the split adding up to the step (a broken rule fails
    loudly, not silently)."""
    for key in ("gpu_idle_ratio", "launch_bound_ratio", "fp16_coverage", "tensor_core_coverage", "short_kernel_share"):
        v = getattr(summary, key)
        assert v is None or -1e-9 <= v <= 1 + 1e-9, f"{key}={v} is not a ratio"
    cast_gpu, busy = summary.cast_overhead.gpu_ms or 0.0, summary.gpu_busy_ms
    if busy is not None:  # cast kernels run inside the GPU's busy time (on each of a rank's GPUs)
        assert cast_gpu <= busy * devices + 1e-6, f"cast GPU time {cast_gpu:.3f} ms exceeds GPU busy {busy:.3f} ms"
    total = sum(parts.busy.values()) + sum(parts.idle.values())
    assert abs(total - parts.window_ms) <= 1e-6 * max(1.0, parts.window_ms), "the step split does not add up"
    assert parts.busy_ms <= parts.window_ms * (1 + 1e-9), "GPU busy exceeds the step"


def _sites(sites: pl.DataFrame, windows: int) -> pl.DataFrame:
    """Where each cause's idle time went (call, op around it, user frame), ms and calls per step."""
    if sites.is_empty():
        return pl.DataFrame(schema=_SITE_SCHEMA)
    return (
        sites.group_by("cause", "site", "op", "top_op", "frame")
        .agg(
            (pl.col("calls").sum() / windows).alias("calls_per_step"),
            (pl.col("idle_ns").sum() / windows / _MS).alias("ms_per_step"),
        )
        .sort("ms_per_step", descending=True)
    )


def _step_causes(parts: Split) -> tuple[pl.DataFrame, tuple[OutlierStep, ...]]:
    """Each window's split with its largest cause, and the outlier steps (much longer than the median) with
    the cause that grew most over its median."""
    table = parts.per_step
    if table.is_empty():
        return table, ()
    causes = [c for c in table.columns if c not in ("rank", "step", "window_ms", "busy_ms")]
    table = table.with_columns(
        pl.concat_list([pl.struct(pl.lit(c).alias("c"), pl.col(c).alias("v")) for c in causes if c != GPU_COMPUTE.id])
        .list.eval(pl.element().sort_by(pl.element().struct.field("v"), descending=True).first().struct.field("c"))
        .list.first()
        .alias("top_cause")
    )
    median = table["window_ms"].median() or 0.0
    outliers = []
    for row in table.filter(pl.col("window_ms") >= max(OUTLIER_RATIO * median, median + 1.0)).iter_rows(named=True):
        grew = {c: row[c] - (table[c].median() or 0.0) for c in causes}
        cause = max(grew, key=grew.get)  # type: ignore[arg-type]
        outliers.append(
            OutlierStep(row["step"], row["rank"], row["window_ms"], median, cause.removeprefix("idle_"), grew[cause])
        )
    return table, tuple(outliers)


def _json_list(text: str | None) -> list[dict[str, Any]]:
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return [d for d in value if isinstance(d, dict)] if isinstance(value, list) else []


def _largest_first(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: -(f.impact_ms or 0.0))


def _ranks_combined(ops: pl.DataFrame) -> pl.DataFrame:
    """``op_summary`` with one row per op name: sums over ranks; coverages weighted by the GPU time they are
    over (the work launched by the op or beneath it)."""
    if ops.is_empty() or ops["rank"].n_unique() <= 1:
        return ops.drop("run_id", "rank")
    sums = ("calls", "cpu_incl_ns", "cpu_self_ns", "gpu_ns", "gpu_top_ns", "gpu_incl_ns", "kernels")
    gpu = pl.col("gpu_incl_ns")
    weighted = [
        ((pl.col(c) * gpu).sum() / gpu.filter(pl.col(c).is_not_null()).sum()).alias(c)
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


def _summary_report(run: dict[str, Any], q: Callable[[str], pl.DataFrame]) -> RunReport:
    """Summary text has op-level totals only: ops, kernel coverage and casts; no timeline metrics."""
    ops, casts = q("summary_ops").drop("run_id"), q("summary_casts")
    total = ops.height
    ops = by_cpu_time(ops)
    cover = q("summary_coverage")
    cover_row = cover.row(0, named=True) if cover.height else {}
    summary = RunSummary(
        fp16_coverage=cover_row.get("fp16_coverage"),
        tensor_core_coverage=cover_row.get("tensor_core_coverage"),
        cast_overhead=CastOverhead(
            calls=int(casts["calls"].sum()), cpu_ms=_ms(casts["cpu_incl_ns"].sum()), gpu_ms=_ms(casts["gpu_ns"].sum())
        ),
        ops_total=total,
    )
    notes = [
        "Summary text has no timeline: GPU idle time, gaps, the launch-bound ratio and step times need a "
        "trace (paddle.profiler export_chrome_tracing). Totals are for the whole profile, not per step."
    ]
    return RunReport(run=run, summary=summary, findings=[], ops=ops, notes=notes, has_timeline=False)


_SITE_SCHEMA = {
    "cause": pl.String,
    "site": pl.String,
    "op": pl.String,
    "top_op": pl.String,
    "frame": pl.String,
    "calls_per_step": pl.Float64,
    "ms_per_step": pl.Float64,
}


def _ms(ns: float | None) -> float | None:
    return None if ns is None else float(ns) / 1e6


def _us(ns: float | None) -> float | None:
    return None if ns is None else float(ns) / 1e3


def _f(x: float | None) -> float | None:
    return None if x is None else float(x)
