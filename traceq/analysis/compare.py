"""``traceq report --compare BASE NEW``: why one run's step is slower (or faster) than another's.

The step-time difference is split exactly along the identity every window satisfies,
``window = GPU busy + host-launch gaps + dependency gaps + idle at the window end`` (means per step), and
each part is carved further by evidence from the metric queries: GPU busy time into cast, layout and
other kernel time; host-launch gap time into the part spent while the CPU was inside cast ops and the
rest. A part becomes a finding only when it is large enough to matter; what no finding covers is
reported as ``unexplained_ms``. Positive numbers mean NEW is slower.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from traceq.analysis import ranks as rank_views
from traceq.analysis.findings import Finding, Waterfall
from traceq.analysis.report import run_report
from traceq.analysis.results import Comparison, RunReport
from traceq.query.engine import Session
from traceq.store import Store

#: A finding is named when its impact is at least this many ms per step and this share of a step.
MIN_IMPACT_MS = 0.25
MIN_IMPACT_SHARE = 0.005


@dataclass(frozen=True)
class RunParts:
    """One run's step window split into parts (mean ms per step) and what carves them further."""

    window: float
    busy: float
    exposed_comm: float
    host_launch: float
    dependency: float
    window_end: float
    #: host-launch gap time while the launching thread was in a cast op
    cast_gap: float
    #: GPU time of cast, layout and optimizer kernels, and of copies and sets (summed, not merged)
    cast_kernels: float
    layout_kernels: float
    optimizer_kernels: float
    copies: float
    #: all GPU work summed (overlaps counted twice): busy time is its union
    work_sum: float
    windows: int
    #: host-launch gap ms per step by the op the launching thread was in (cast ops left out)
    gap_by_op: dict[str, float]
    #: synchronising runtime calls in the run (device and stream syncs, blocking copies)
    sync_calls: int

    def on_busy(self, work: float) -> float:
        """Summed GPU work scaled onto busy time (a union: summed work exceeds it where work overlaps)."""
        return work * (self.busy / self.work_sum if self.work_sum else 0.0)


@dataclass(frozen=True)
class Pair:
    """What a comparison's findings are made from: both reports, both runs' parts and the waterfall."""

    base: RunReport
    new: RunReport
    b: RunParts
    n: RunParts
    waterfall: Waterfall


def _parts(report: RunReport, session: Session) -> RunParts:
    """Mean per-step ms of every waterfall part of one run (reusing the report's metric frames)."""
    mine = pl.col("run_id") == report.run["run_id"]
    busy, gaps, activity = (report.frames[k] for k in ("gpu_busy", "gpu_gap_buckets", "gap_cpu_activity"))
    gpu_time = session.query("gpu_time").filter(mine)
    windows = max(busy.select(pl.struct("rank", "step").n_unique()).item(), 1)
    gap_ms = dict(gaps.group_by("kind").agg(pl.col("gap_ns").sum() / windows / 1e6).iter_rows())
    kernels = gpu_time.filter(pl.col("kind") == "kernel")
    k_ms = dict(kernels.group_by("kernel_class").agg(pl.col("time_ns").sum() / windows / 1e6).iter_rows())
    w_ms = dict(gpu_time.group_by("kind").agg(pl.col("time_ns").sum() / windows / 1e6).iter_rows())
    cast_gap = activity.filter(pl.col("is_cast"))["gap_ns"].sum() / windows / 1e6
    by_op = dict(
        activity.filter(~pl.col("is_cast")).group_by("op").agg(pl.col("gap_ns").sum() / windows / 1e6).iter_rows()
    )
    return RunParts(
        window=busy["window_ns"].sum() / windows / 1e6,
        busy=busy["busy_ns"].sum() / windows / 1e6,
        exposed_comm=busy["exposed_comm_ns"].sum() / windows / 1e6,
        host_launch=gap_ms.get("host_launch", 0.0),
        dependency=gap_ms.get("dependency", 0.0) + gap_ms.get("unknown", 0.0),
        window_end=gap_ms.get("window_end", 0.0),
        cast_gap=cast_gap,
        cast_kernels=k_ms.get("cast", 0.0),
        layout_kernels=k_ms.get("layout", 0.0),
        optimizer_kernels=k_ms.get("optimizer", 0.0),
        copies=w_ms.get("memcpy", 0.0) + w_ms.get("memset", 0.0),
        work_sum=sum(w_ms.values()),
        windows=windows,
        gap_by_op=by_op,
        sync_calls=_sync_calls(session, report.run["run_id"]),
    )


def _waterfall(b: RunParts, n: RunParts, grown_gap: float) -> Waterfall:
    """The step-time difference split into parts: busy time carved by kernel class (scaled onto busy time),
    host-launch gaps by the ops the CPU was in, and the dependency gaps."""
    cast_busy = n.on_busy(n.cast_kernels) - b.on_busy(b.cast_kernels)
    layout_busy = n.on_busy(n.layout_kernels) - b.on_busy(b.layout_kernels)
    optimizer_busy = n.on_busy(n.optimizer_kernels) - b.on_busy(b.optimizer_kernels)
    copies_busy = n.on_busy(n.copies) - b.on_busy(b.copies)
    cast_gap = n.cast_gap - b.cast_gap
    return Waterfall(
        gpu_compute=(n.busy - b.busy) - cast_busy - layout_busy - optimizer_busy - copies_busy
        - (n.exposed_comm - b.exposed_comm),
        communication=n.exposed_comm - b.exposed_comm,
        cast_overhead=cast_gap + cast_busy,
        layout_transforms=layout_busy,
        optimizer=optimizer_busy,
        memory_copies=copies_busy,
        launch_bound=(n.host_launch - b.host_launch) - cast_gap - grown_gap,
        op_cpu_growth=grown_gap,
        dependency_idle=(n.dependency - b.dependency) + (n.window_end - b.window_end),
    )


def compare(base_ref: str, new_ref: str, store: Store | str | Path | None = None) -> Comparison:
    """Compare two stored runs (run ids or names; :func:`traceq.compare` also takes trace files, ingested
    first): waterfall, findings, verdict."""
    store = store if isinstance(store, Store) else Store(store)
    base_id, new_id = store.resolve(base_ref), store.resolve(new_ref)
    with Session(store, [base_id, new_id], own_queries=True) as session:
        return _compare(base_id, new_id, store, session)


def _compare(base_id: str, new_id: str, store: Store, session: Session) -> Comparison:
    base, new = run_report(base_id, store, session), run_report(new_id, store, session)
    if "paddle_summary" in (base.run["source_format"], new.run["source_format"]):
        return _compare_summaries(base, new)
    b, n = _parts(base, session), _parts(new, session)
    delta = n.window - b.window
    threshold = max(MIN_IMPACT_MS, MIN_IMPACT_SHARE * b.window)
    grown = [g for g in _grown_ops(base, new, b, n) if g.impact_ms >= threshold]
    pair = Pair(base, new, b, n, _waterfall(b, n, sum((g.impact_ms for g in grown), 0.0)))
    candidates = [rule(pair) for rule in RULES] + grown
    findings = sorted((f for f in candidates if abs(f.impact_ms) >= threshold), key=lambda f: -abs(f.impact_ms))
    explained = sum(f.impact_ms for f in findings)
    notes = []
    if max(new.summary["launch_bound_ratio"] or 0, base.summary["launch_bound_ratio"] or 0) >= 0.2:
        notes.append(
            "Profiled step times include the profiler's own CPU cost per op: a launch-bound run is slowed more "
            "by the profiler, so the traced difference can exceed the difference measured without it."
        )
    steps = pl.concat(
        [
            base.steps.select("rank", "step", "window_ns", "busy_ns", "idle_ns").with_columns(run=pl.lit("base")),
            new.steps.select("rank", "step", "window_ns", "busy_ns", "idle_ns").with_columns(run=pl.lit("new")),
        ]
    )
    ranks = pl.DataFrame()
    if not (base.ranks.is_empty() and new.ranks.is_empty()):
        ranks = rank_views.aligned(_per_rank(base, session), _per_rank(new, session))
        if ranks.null_count().sum_horizontal().item():
            notes.append(
                f"The runs have different ranks (BASE {base.run['n_ranks']}, NEW {new.run['n_ranks']}): "
                "the rank-aligned table compares the ranks both have; the waterfall compares means over all."
            )
    return Comparison(
        base=base,
        new=new,
        step_time_delta_ms=delta,
        waterfall=pair.waterfall,
        findings=findings,
        explained_ms=explained,
        unexplained_ms=delta - explained,
        verdict=_verdict(delta, pair, findings),
        op_deltas=_op_deltas(base.ops, new.ops),
        steps=steps,
        notes=notes,
        ranks=ranks,
    )


def _per_rank(report: RunReport, session: Session) -> pl.DataFrame:
    """A run's per-rank table (for a one-rank run, its one rank), from the same query as the report's."""
    if not report.ranks.is_empty():
        return report.ranks
    balance = session.query("rank_balance").filter(pl.col("run_id") == report.run["run_id"])
    return rank_views.per_rank(balance)


# -- the findings of a comparison: one rule per part of the waterfall ------------------------------------
def _gpu_compute(p: Pair) -> Finding:
    bs, ns, impact = p.base.summary, p.new.summary, p.waterfall.gpu_compute
    return Finding(
        id="gpu_compute",
        title=("GPU compute time per step fell" if impact < 0 else "GPU compute time per step grew")
        + f" by {abs(impact):.2f} ms ({p.b.busy:.2f} -> {p.n.busy:.2f} ms busy)",
        impact_ms=impact,
        evidence={
            "gpu_busy_ms": [p.b.busy, p.n.busy],
            "ops_still_fp32_ms_per_step": _still_fp32(p.new.ops),
            "fp16_coverage": [bs["fp16_coverage"], ns["fp16_coverage"]],
            "tensor_core_coverage": [bs["tensor_core_coverage"], ns["tensor_core_coverage"]],
            "median_kernel_us": [bs["median_kernel_us"], ns["median_kernel_us"]],
        },
        next_step="Kernels got faster: the rest of this list says where the saving went."
        if impact < 0
        else "Look at the per-op GPU deltas: ops still in FP32, or GEMMs too small for tensor cores.",
    )


def _launch_bound(p: Pair) -> Finding:
    bs, ns, impact = p.base.summary, p.new.summary, p.waterfall.launch_bound
    kernels_b, kernels_n = bs["kernels_per_step"] or 0, ns["kernels_per_step"] or 0
    return Finding(
        id="launch_bound",
        title=("The run became more bound" if impact >= 0 else "The run became less bound")
        + f" by the CPU launching work: GPU idle waiting for launches {impact:+.2f} ms per step",
        impact_ms=impact,
        evidence={
            "launch_bound_ratio": [bs["launch_bound_ratio"], ns["launch_bound_ratio"]],
            "gpu_idle_ms": [bs["gpu_idle_ms"], ns["gpu_idle_ms"]],
            "gpu_events_per_step": [bs["gpu_events_per_step"], ns["gpu_events_per_step"]],
            "kernels_per_step": [kernels_b, kernels_n],
            "kernels_change": (kernels_n / kernels_b - 1) if kernels_b else None,
            "median_kernel_us": [bs["median_kernel_us"], ns["median_kernel_us"]],
            "median_launch_us": [bs["median_launch_us"], ns["median_launch_us"]],
            "cpu_ops_during_gaps_ms_delta": _cpu_growth(p.base.gap_activity, p.new.gap_activity),
        },
        next_step="Launch fewer, larger kernels: a larger batch, CUDA graphs or torch.compile, fused "
        "optimizers; cut per-op framework overhead.",
    )


def _cast_overhead(p: Pair) -> Finding:
    cb, cn = p.base.summary["cast_overhead"], p.new.summary["cast_overhead"]
    return Finding(
        id="cast_overhead",
        title=f"AMP casts: {cn['calls']:.0f} conversions per step (was {cb['calls']:.0f}), costing "
        f"{p.waterfall.cast_overhead:.2f} ms per step of GPU idle and cast kernels",
        impact_ms=p.waterfall.cast_overhead,
        evidence={
            "conversions_per_step": [cb["calls"], cn["calls"]],
            "cast_cpu_ms": [cb["cpu_ms"], cn["cpu_ms"]],
            "cast_gpu_ms": [cb["gpu_ms"], cn["gpu_ms"]],
            "gpu_idle_during_casts_ms": [p.b.cast_gap, p.n.cast_gap],
            "round_trips_per_step": [cb.get("round_trips"), cn.get("round_trips")],
        },
        next_step="Cast parameters once (Paddle O2 / paddle.amp.decorate; half-precision weights), avoid "
        "fp32 <-> fp16 round trips between ops.",
    )


def _gpu_work_changed(part: str, what: str, work: str, evidence: str, next_step: str) -> Callable[[Pair], Finding]:
    """The rule of a waterfall part that is one kind of GPU work (``work``, a :class:`RunParts` field) whose
    time changed."""

    def rule(p: Pair) -> Finding:
        impact = getattr(p.waterfall, part)
        return Finding(
            id=part,
            title=f"{what} changed GPU time by {impact:+.2f} ms/step",
            impact_ms=impact,
            evidence={evidence: [getattr(p.b, work), getattr(p.n, work)]},
            next_step=next_step,
        )

    return rule


_layout_transforms = _gpu_work_changed(
    "layout_transforms", "Layout transforms (nchwToNhwc, transposes)", "layout_kernels", "layout_kernel_ms",
    "Use channels-last (NHWC) tensors end to end so cuDNN does not transpose around each conv.",
)  # fmt: skip
_optimizer = _gpu_work_changed(
    "optimizer", "Optimizer and loss-scaler kernels", "optimizer_kernels", "optimizer_kernel_ms",
    "Use a fused / multi-tensor optimizer (foreach or fused Adam, Paddle merged_adam).",
)  # fmt: skip
_memory_copies = _gpu_work_changed(
    "memory_copies", "Memory copies and sets", "copies", "copy_ms",
    "Avoid host<->device copies inside the step (pinned memory, non_blocking, keep data on GPU).",
)  # fmt: skip


def _communication(p: Pair) -> Finding:
    """Collective time no other GPU work hides; across ranks this includes waiting for a straggler."""
    evidence: dict[str, Any] = {"exposed_comm_ms": [p.b.exposed_comm, p.n.exposed_comm]}
    for label, report in (("base", p.base), ("new", p.new)):
        if not report.ranks.is_empty():
            top = report.ranks.sort("straggler_steps", "rank", descending=[True, False]).row(0, named=True)
            evidence[f"{label}_straggler"] = f"rank {top['rank']} in {top['straggler_steps']} steps"
            evidence[f"{label}_wait_ms_by_rank"] = dict(report.ranks.select("rank", "wait_ms").iter_rows())
    return Finding(
        id="communication",
        title=f"Collective time not hidden by other GPU work changed by {p.waterfall.communication:+.2f} ms/step",
        impact_ms=p.waterfall.communication,
        evidence=evidence,
        next_step="Across ranks this is mostly waiting for the slowest rank: see the rank-aligned table; "
        "otherwise overlap communication with compute (DDP bucket size, gradient accumulation).",
    )


def _dependency_idle(p: Pair) -> Finding:
    return Finding(
        id="dependency_idle",
        title="GPU idle with work queued (syncs, events, copies) changed by "
        f"{p.waterfall.dependency_idle:+.2f} ms/step",
        impact_ms=p.waterfall.dependency_idle,
        evidence={
            "dependency_idle_ms": [p.b.dependency + p.b.window_end, p.n.dependency + p.n.window_end],
            "sync_calls_per_step": [p.b.sync_calls / p.b.windows, p.n.sync_calls / p.n.windows],
        },
        next_step="Remove host-device synchronisations (item(), .cpu(), loss-scaler found-inf checks).",
    )


#: The findings of a comparison, one per part of the waterfall (ops whose CPU time grew come besides).
RULES: tuple[Callable[[Pair], Finding], ...] = (
    _gpu_compute,
    _launch_bound,
    _cast_overhead,
    _layout_transforms,
    _optimizer,
    _communication,
    _memory_copies,
    _dependency_idle,
)


def _grown_ops(base: RunReport, new: RunReport, b: RunParts, n: RunParts) -> list[Finding]:
    """Ops whose CPU time per step (inclusive) at least doubled and that now keep the GPU waiting longer.

    Impact: the growth of host-launch gap time spent inside the op (carved out of launch_bound).
    """
    if base.ops.is_empty() or new.ops.is_empty():
        return []
    cpu = new.ops.select("name", pl.col("cpu_incl_ns_per_step").alias("new")).join(
        base.ops.select("name", pl.col("cpu_incl_ns_per_step").alias("base")), on="name", how="left"
    )
    doubled = {r[0]: (r[2] or 0.0, r[1]) for r in cpu.iter_rows() if r[1] >= 2 * (r[2] or 0.0) and r[1] > 1e6}
    out = []
    for op, new_gap in n.gap_by_op.items():
        if op == "(no op)" or op not in doubled:  # cast ops are left out of gap_by_op
            continue
        grew = new_gap - b.gap_by_op.get(op, 0.0)
        if grew <= 0:
            continue
        before, after = doubled[op]
        out.append(
            Finding(
                id="op_cpu_growth",
                title=f"{op}: CPU time per step {before / 1e6:.2f} -> {after / 1e6:.2f} ms, GPU waiting on it "
                f"{grew:+.2f} ms per step",
                impact_ms=grew,
                evidence={"op": op, "cpu_ms_per_step": [before / 1e6, after / 1e6]},
                next_step="CPU time that grows while GPU time does not points at algorithm search, layout work "
                "or per-call overhead in this op (cudnn benchmark caching, fewer shape changes).",
            )
        )
    return out


def _still_fp32(ops: pl.DataFrame, n: int = 5) -> dict[str, float]:
    """NEW's ops with the most GPU time whose GEMM/conv/attention kernels are mostly not in half precision."""
    if ops.is_empty() or "fp16_coverage" not in ops.columns:
        return {}
    heavy = ops.filter(pl.col("fp16_coverage") < 0.5).sort("gpu_ns_per_step", descending=True).head(n)
    return {name: round(ns / 1e6, 3) for name, ns in heavy.select("name", "gpu_ns_per_step").iter_rows() if ns}


def _sync_calls(session: Session, run_id: str) -> int:
    return int(session.query("sync_calls").filter(pl.col("run_id") == run_id)["calls"].sum())


def _cpu_growth(base: pl.DataFrame, new: pl.DataFrame, n: int = 6) -> dict[str, float]:
    """Ops whose share of host-launch gap time grew most (ms per step, NEW minus BASE)."""
    if new.is_empty():
        return {}
    joined = new.join(base, on="op", how="full", coalesce=True, suffix="_base").fill_null(0)
    joined = joined.with_columns(((pl.col("ns_per_step") - pl.col("ns_per_step_base")) / 1e6).alias("delta"))
    top = joined.sort("delta", descending=True).head(n)
    return {op: round(d, 3) for op, d in top.select("op", "delta").iter_rows()}


def _op_deltas(base: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """Per op name: CPU and GPU time per step in each run, and NEW minus BASE."""
    if base.is_empty() and new.is_empty():
        return pl.DataFrame()
    cpu, gpu = ("cpu_incl_ns_per_step", "gpu_ns_per_step") if "cpu_incl_ns_per_step" in new.columns else (
        "cpu_incl_ns", "gpu_ns")  # fmt: skip
    cols = ["name", cpu, gpu]
    joined = new.select(cols).join(base.select(cols), on="name", how="full", coalesce=True, suffix="_base").fill_null(0)
    return (
        joined.select(
            "name",
            (pl.col(f"{cpu}_base") / 1e6).alias("base_cpu_ms"),
            (pl.col(cpu) / 1e6).alias("new_cpu_ms"),
            ((pl.col(cpu) - pl.col(f"{cpu}_base")) / 1e6).alias("cpu_delta_ms"),
            (pl.col(f"{gpu}_base") / 1e6).alias("base_gpu_ms"),
            (pl.col(gpu) / 1e6).alias("new_gpu_ms"),
            ((pl.col(gpu) - pl.col(f"{gpu}_base")) / 1e6).alias("gpu_delta_ms"),
        )
        .with_columns((pl.col("cpu_delta_ms").abs() + pl.col("gpu_delta_ms").abs()).alias("_size"))
        .sort("_size", descending=True)
        .drop("_size")
    )


def _verdict(delta: float, p: Pair, findings: list[Finding]) -> str:
    if not findings:
        return f"NEW and BASE take the same time per step within noise ({delta:+.2f} ms); nothing to blame."
    direction = "slower" if delta > 0 else "faster"
    saved = -p.waterfall.gpu_compute
    idle_up = p.n.host_launch - p.b.host_launch  # all GPU idle waiting for launches, casts included
    if saved > 0 and idle_up > 0 and idle_up > 0.5 * saved:
        ke, kb = p.new.summary["kernels_per_step"] or 0, p.base.summary["kernels_per_step"] or 0
        more = f", {ke / kb - 1:+.0%} kernels per step" if kb else ""
        return (
            f"NEW saves {saved:.1f} ms of GPU time per step but is {abs(delta):.1f} ms per step {direction}: the "
            f"saving is not realised because the run is bound by the CPU launching work (GPU idle waiting for "
            f"launches {idle_up:+.1f} ms per step{more}, {p.new.summary['cast_overhead']['calls']:.0f} dtype "
            f"conversions per step)."
        )
    title = findings[0].title
    return f"NEW is {abs(delta):.1f} ms per step {direction}, mostly because: {title[0].lower()}{title[1:]}."


def _compare_summaries(base: RunReport, new: RunReport) -> Comparison:
    """Op-level comparison of summary text (no timeline: no step-time waterfall)."""
    deltas = _op_deltas(base.ops, new.ops)
    findings = []
    cb, cn = base.summary["cast_overhead"], new.summary["cast_overhead"]
    if cn["calls"] > cb["calls"]:
        findings.append(
            Finding(
                id="cast_overhead",
                title=f"{cn['calls'] - cb['calls']:,} more cast calls, "
                f"{cn['cpu_ms'] - cb['cpu_ms']:.1f} ms more CPU time",
                impact_ms=None,
                evidence={"cast_calls": [cb["calls"], cn["calls"]], "cast_cpu_ms": [cb["cpu_ms"], cn["cpu_ms"]]},
                next_step="Cast parameters once (O2), avoid per-op casts.",
            )
        )
    grown = deltas.filter((pl.col("cpu_delta_ms") > 1) & (pl.col("new_cpu_ms") > 2 * pl.col("base_cpu_ms")))
    for row in grown.head(5).iter_rows(named=True):
        findings.append(
            Finding(
                id="op_cpu_growth",
                title=f"{row['name']}: CPU time {row['base_cpu_ms']:.1f} -> {row['new_cpu_ms']:.1f} ms",
                impact_ms=None,
                evidence=row,
                next_step="CPU time that grows while GPU time does not points at algorithm search or layout work "
                "(cudnn exhaustive search, NCHW<->NHWC transposes) or per-call overhead.",
            )
        )
    return Comparison(
        base=base,
        new=new,
        step_time_delta_ms=None,
        waterfall=None,
        findings=findings,
        explained_ms=None,
        unexplained_ms=None,
        verdict="Summary text has no timeline: op-level differences only (per-step waterfall needs traces).",
        op_deltas=deltas,
        steps=pl.DataFrame(),
        notes=list(new.notes),
    )
