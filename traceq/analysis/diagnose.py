"""Diagnosis: findings by cause for one run, and for two runs the step-time difference by cause.

A run's step is split into causes (:mod:`traceq.analysis.split`); each cause large enough to matter
becomes a :class:`Finding` with its evidence (what the metric queries say about it: the calls, ops,
call sites, counts) and the next step for that cause and framework (:mod:`traceq.analysis.causes`).
For two runs the parts' differences add up to the step-time difference, and the words of every title
and verdict are chosen from the signs of the numbers beside them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceq.analysis.causes import CAUSES
from traceq.analysis.findings import Finding
from traceq.analysis.split import BUSY_PARTS, Split
from traceq.sql import Session

#: A single run's cause is a finding when it costs at least this many ms per step and this share of the step.
RUN_MIN_MS = 0.25
RUN_MIN_SHARE = 0.03
#: A comparison's part is a finding when it changed by at least this many ms per step and this share of
#: the longer step (smaller changes are within the step-to-step noise of a few profiled steps).
COMPARE_MIN_MS = 0.25
COMPARE_MIN_SHARE = 0.02
#: A waterfall shows every part that changed by at least this share of the longer step; the rest is "other".
WATERFALL_MIN_SHARE = 0.005
#: A step is an outlier when its window is this many times the median window (and 1 ms longer).
OUTLIER_RATIO = 1.5
_MS = 1e6


# -- evidence ------------------------------------------------------------------------------------------
def evidence(session: Session, run_id: str, windows: int) -> dict[str, dict[str, Any]]:
    """What the metric queries say about each cause of ``run_id``'s steps, per step (``windows`` of them)."""
    mine = pl.col("run_id") == run_id
    w = max(windows, 1)
    sites = session.query("idle_sites").filter(mine)
    calls = session.query("host_calls").filter(mine & pl.col("step").is_not_null())
    out: dict[str, dict[str, Any]] = {}

    def top_sites(cause: str, by: list[str], n: int = 5) -> list[dict[str, Any]]:
        rows = (
            sites.filter(pl.col("cause") == cause)
            .group_by(by)
            .agg((pl.col("idle_ns").sum() / w / _MS).alias("idle_ms_per_step"), (pl.col("calls").sum() / w).alias("calls_per_step"))
            .sort("idle_ms_per_step", descending=True)
            .head(n)
        )
        return [{k: _clean(v) for k, v in r.items()} for r in rows.iter_rows(named=True)]

    def per_step_calls(cause: str) -> dict[str, float]:
        rows = calls.filter((pl.col("cause") == cause) & pl.col("bytes").is_null())
        rows = rows.group_by("name").agg(pl.col("calls").sum() / w)
        return {name: round(n, 2) for name, n in rows.sort("calls", descending=True).iter_rows()}

    bound = session.query("launch_bound").filter(mine)
    out["launch_overhead"] = {
        "kernels_per_step": _mean(bound, "kernels"),
        "median_kernel_us": _scaled(_mean(bound, "median_kernel_ns"), 1e3),
        "median_launch_us": _scaled(_mean(bound, "median_launch_ns"), 1e3),
        "kernels_shorter_than_their_launch": _mean(bound, "short_kernel_share"),
        "ops_the_gpu_waited_on": top_sites("launch_overhead", ["top_op"]),
    }
    out["host_sync"] = {
        "sync_calls_per_step": per_step_calls("host_sync"),
        "sites": top_sites("host_sync", ["site", "op", "top_op", "frame"]),
    }
    data = calls.filter(pl.col("cause") == "input_pipeline")
    copies = data.filter(pl.col("bytes").is_not_null())
    out["input_pipeline"] = {
        "data_loading_ms_per_step": round(data.filter(pl.col("bytes").is_null())["dur_ns"].sum() / w / _MS, 3),
        "data_loading_calls": per_step_calls("input_pipeline"),
        "pageable_copies_per_step": round(copies["calls"].sum() / w, 2),
        "pageable_mb_per_step": round(copies["bytes"].sum() / w / 1e6, 3),
        "sites": top_sites("input_pipeline", ["site", "frame"]),
    }
    out["algorithm_search"] = _search_evidence(session.query("_search_calls").filter(mine), w)
    out["allocator"] = {
        "allocator_calls_per_step": per_step_calls("allocator"),
        "sites": top_sites("allocator", ["site", "op", "top_op"]),
    }
    casts = session.query("cast_overhead").filter(mine)
    trips = casts["round_trips"] if casts.height else pl.Series([], dtype=pl.Int64)
    out["cast_overhead"] = {
        "conversions_per_step": round(casts["calls"].sum() / w, 1) if casts.height else 0.0,
        "cast_op_cpu_ms_per_step": round(casts["cpu_ns"].sum() / w / _MS, 3) if casts.height else 0.0,
        "cast_kernel_ms_per_step": round(casts["gpu_ns"].sum() / w / _MS, 3) if casts.height else 0.0,
        "round_trips_per_step": round(trips.sum() / w, 1) if trips.null_count() < trips.len() else None,
        "idle_in_casts_by_op": top_sites("cast_overhead", ["top_op"]),
    }
    out["python_overhead"] = {"frames": [s for s in top_sites("python_overhead", ["frame"]) if s["frame"]]}
    gaps = session.query("gpu_gap_buckets").filter(mine & pl.col("kind").is_in(["dependency", "unknown"]))
    out["unexplained"] = {"waits_with_work_queued_per_step": round(gaps["gaps"].sum() / w, 1) if gaps.height else 0.0}
    cover = session.query("precision_coverage").filter(mine)
    ops = session.query("op_summary").filter(mine)
    out["gpu_compute"] = {
        "fp16_coverage": _mean(cover, "fp16_coverage"),
        "tensor_core_coverage": _mean(cover, "tensor_core_coverage"),
        "median_kernel_us": out["launch_overhead"]["median_kernel_us"],
        "ops_still_fp32_ms_per_step": _still_fp32(ops, w),
    }
    return out


def _search_evidence(searches: pl.DataFrame, w: int) -> dict[str, Any]:
    if searches.is_empty():
        return {"searching_calls_per_step": 0.0}
    by_op = (
        searches.group_by("name")
        .agg(
            pl.len().alias("calls"),
            (pl.col("dur_ns").mean() / _MS).alias("ms_per_call"),
            (pl.col("typical_ns").first() / _MS).alias("typical_ms_per_call"),
            pl.col("kernels").mean().alias("kernels_per_call"),
            pl.col("typical_kernels").first().alias("typical_kernels_per_call"),
            pl.col("new_shape").sum().alias("new_shapes"),
            pl.col("input_shapes").drop_nulls().unique(maintain_order=True).head(3).alias("shapes"),
        )
        .sort("calls", descending=True)
    )
    ops = []
    for r in by_op.iter_rows(named=True):
        ops.append(
            {
                "op": r["name"],
                "calls_per_step": round(r["calls"] / w, 2),
                "ms_per_call": round(r["ms_per_call"], 2),
                "typical_ms_per_call": round(r["typical_ms_per_call"], 3),
                "kernels_per_call": round(r["kernels_per_call"], 1),
                "typical_kernels_per_call": r["typical_kernels_per_call"],
                "calls_on_new_shapes": r["new_shapes"],
                "example_shapes": [_shape(s) for s in r["shapes"]],
            }
        )
    return {"searching_calls_per_step": round(searches.height / w, 2), "ops": ops}


def _shape(text: str) -> Any:
    try:
        return [s for s in json.loads(text) if s]
    except (TypeError, ValueError):
        return text


def _still_fp32(ops: pl.DataFrame, w: int, n: int = 5) -> dict[str, float]:
    """The ops with the most GPU time whose GEMM/conv/attention kernels are mostly not in half precision."""
    if ops.is_empty() or "fp16_coverage" not in ops.columns:
        return {}
    heavy = ops.filter(pl.col("fp16_coverage") < 0.5).group_by("name").agg(pl.col("gpu_ns").sum())
    heavy = heavy.sort("gpu_ns", descending=True).head(n)
    return {name: round(ns / w / _MS, 3) for name, ns in heavy.iter_rows() if ns}


def _mean(frame: pl.DataFrame, column: str) -> float | None:
    if frame.is_empty() or column not in frame.columns:
        return None
    value = frame[column].mean()
    return None if value is None else round(float(value), 4)  # type: ignore[arg-type]


def _scaled(value: float | None, by: float) -> float | None:
    return None if value is None else round(value / by, 2)


def _clean(v: Any) -> Any:
    return round(v, 3) if isinstance(v, float) else v


# -- one run -------------------------------------------------------------------------------------------
#: Parts that are the work itself, not a cause to act on, in a single run's findings (they show in its split).
_NOT_FOR_ONE_RUN = ("gpu_compute", "optimizer", "memory_copies", "communication", "unexplained")

def run_findings(split: Split, ev: dict[str, dict[str, Any]], framework: str | None) -> list[Finding]:
    """The causes of ``split``'s steps that cost at least :data:`RUN_MIN_MS` and :data:`RUN_MIN_SHARE` of a
    step, largest first, each with its evidence and next step."""
    step = split.window_ms
    out = []
    for cause, ms in split.parts().items():
        if cause in _NOT_FOR_ONE_RUN or ms < max(RUN_MIN_MS, RUN_MIN_SHARE * step):
            continue
        out.append(
            Finding(
                id=cause,
                title=_run_title(cause, ms, step, ev.get(cause, {}), split),
                impact_ms=round(ms, 3),
                evidence={**({"gpu_idle_ms_per_step": round(split.idle.get(cause, 0.0), 3)} if cause in split.idle else {}),
                          **({"gpu_busy_ms_per_step": round(split.busy.get(cause, 0.0), 3)} if cause in BUSY_PARTS else {}),
                          **ev.get(cause, {})},  # fmt: skip
                next_step=CAUSES[cause].next_step(framework),
            )
        )
    return sorted(out, key=lambda f: -(f.impact_ms or 0.0))


def _run_title(cause: str, ms: float, step: float, ev: dict[str, Any], split: Split) -> str:
    share = f"{ms / step:.0%} of the step" if step else "of each step"
    if cause == "launch_overhead":
        return f"The GPU idles {ms:.2f} ms per step ({share}) while the CPU launches work"
    if cause == "host_sync":
        n = sum(ev.get("sync_calls_per_step", {}).values())
        return f"{n:.0f} host synchronisations per step drain the GPU queue: {ms:.2f} ms per step of GPU idle ({share})"
    if cause == "input_pipeline":
        return f"The GPU waits {ms:.2f} ms per step ({share}) for input data"
    if cause == "algorithm_search":
        n = ev.get("searching_calls_per_step", 0.0)
        return f"cuDNN/cuBLAS searches algorithms for new input shapes ({n:.1f} calls per step): {ms:.2f} ms per step ({share})"
    if cause == "allocator":
        n = sum(ev.get("allocator_calls_per_step", {}).values())
        return f"{n:.0f} device allocations and frees per step cost {ms:.2f} ms per step of GPU idle ({share})"
    if cause == "cast_overhead":
        n = ev.get("conversions_per_step", 0.0)
        return f"{n:.0f} dtype casts per step cost {ms:.2f} ms per step ({share}): GPU idle in cast ops and cast kernels"
    if cause == "python_overhead":
        return f"Python between ops keeps the GPU idle {ms:.2f} ms per step ({share})"
    label = CAUSES[cause].label
    return f"{label[0].upper()}{label[1:]} takes {ms:.2f} ms of GPU time per step ({share})"


# -- two runs ------------------------------------------------------------------------------------------
#: How each part's change is described: (what changed, unit of the before/after values).
_CHANGE = {
    "gpu_compute": "GPU compute time",
    "cast_overhead": "AMP cast cost (GPU idle in cast ops and cast kernels)",
    "layout_transforms": "Layout-transform kernel time",
    "optimizer": "Optimizer and loss-scaler kernel time",
    "memory_copies": "Memory copy and set time",
    "communication": "Collective time not hidden by compute",
    "algorithm_search": "Algorithm search (cuDNN/cuBLAS autotuning)",
    "launch_overhead": "GPU idle while the CPU launches work",
    "host_sync": "GPU idle after host synchronisations",
    "input_pipeline": "GPU idle waiting for input data",
    "allocator": "GPU idle in device allocations and frees",
    "python_overhead": "GPU idle while Python runs between ops",
    "unexplained": "GPU idle with work queued (unexplained)",
}


@dataclass
class Difference:
    """Two runs' step time, split by cause: ``waterfall`` parts add up to ``delta_ms`` (NEW minus BASE)."""

    delta_ms: float
    waterfall: pl.DataFrame
    findings: list[Finding]
    explained_ms: float
    other_ms: float
    verdict: str
    warnings: list[str] = field(default_factory=list)


def difference(
    base: Split,
    new: Split,
    base_ev: dict[str, dict[str, Any]],
    new_ev: dict[str, dict[str, Any]],
    framework: str | None,
) -> Difference:
    """NEW's step time minus BASE's, by cause, with findings for the parts that changed enough to matter."""
    delta = new.window_ms - base.window_ms
    longer = max(base.window_ms, new.window_ms)
    bp, np_ = base.parts(), new.parts()
    rows = [(c, bp[c], np_[c], np_[c] - bp[c]) for c in bp]
    waterfall = pl.DataFrame(rows, schema=["part", "base_ms", "new_ms", "delta_ms"], orient="row")
    shown = waterfall.filter(pl.col("delta_ms").abs() >= WATERFALL_MIN_SHARE * longer)
    other = delta - shown["delta_ms"].sum()
    threshold = max(COMPARE_MIN_MS, COMPARE_MIN_SHARE * longer)
    findings = [
        _change_finding(c, b, n, d, base_ev.get(c, {}), new_ev.get(c, {}), framework)
        for c, b, n, d in rows
        if abs(d) >= threshold
    ]
    findings.sort(key=lambda f: -abs(f.impact_ms or 0.0))
    explained = sum(f.impact_ms or 0.0 for f in findings)
    return Difference(
        delta_ms=delta,
        waterfall=shown.sort(pl.col("delta_ms").abs(), descending=True),
        findings=findings,
        explained_ms=explained,
        other_ms=other,
        verdict=verdict(delta, base, new, findings),
    )


def _change_finding(
    cause: str, b: float, n: float, d: float, ev_b: dict[str, Any], ev_n: dict[str, Any], framework: str | None
) -> Finding:
    what = _CHANGE[cause]
    title = f"{what} {'grew' if d > 0 else 'fell'} by {abs(d):.2f} ms per step ({b:.2f} -> {n:.2f} ms)"
    extra = _change_detail(cause, ev_b, ev_n)
    if extra:
        title += f"; {extra}"
    if d > 0 or cause == "gpu_compute":
        step = CAUSES[cause].next_step(framework) if d > 0 else (
            "Kernels got faster: the parts that grew say where the saving went."
        )  # fmt: skip
    else:
        step = f"No action: {CAUSES[cause].label} cost less in NEW."
    evidence = {"base": ev_b, "new": ev_n} if (ev_b or ev_n) else {}
    return Finding(id=cause, title=title, impact_ms=round(d, 3), evidence=evidence, next_step=step)


def _change_detail(cause: str, ev_b: dict[str, Any], ev_n: dict[str, Any]) -> str:
    """A count that shows the mechanism, before and after (e.g. syncs per step), where one tells it."""
    if cause == "host_sync":
        b, n = sum(ev_b.get("sync_calls_per_step", {}).values()), sum(ev_n.get("sync_calls_per_step", {}).values())
        return f"{b:.0f} -> {n:.0f} sync calls per step"
    if cause == "algorithm_search":
        return f"{ev_b.get('searching_calls_per_step', 0):.1f} -> {ev_n.get('searching_calls_per_step', 0):.1f} searching calls per step"
    if cause == "cast_overhead":
        return f"{ev_b.get('conversions_per_step', 0):.0f} -> {ev_n.get('conversions_per_step', 0):.0f} conversions per step"
    if cause == "allocator":
        b, n = sum(ev_b.get("allocator_calls_per_step", {}).values()), sum(ev_n.get("allocator_calls_per_step", {}).values())
        return f"{b:.0f} -> {n:.0f} allocations and frees per step"
    if cause == "launch_overhead":
        b, n = ev_b.get("kernels_per_step"), ev_n.get("kernels_per_step")
        return f"{b:.0f} -> {n:.0f} kernels per step" if b is not None and n is not None else ""
    if cause == "input_pipeline":
        return f"{ev_b.get('data_loading_ms_per_step', 0):.2f} -> {ev_n.get('data_loading_ms_per_step', 0):.2f} ms per step in data loading"
    return ""


def verdict(delta: float, base: Split, new: Split, findings: list[Finding]) -> str:
    """One sentence whose every word agrees with the signs of the numbers in it."""
    if not findings:
        return f"NEW and BASE take the same time per step within noise ({delta:+.2f} ms); nothing to blame."
    direction = "slower" if delta > 0 else "faster"
    saved = base.part("gpu_compute") - new.part("gpu_compute")
    idle_up = new.idle_ms - base.idle_ms
    head = f"NEW is {abs(delta):.1f} ms per step {direction} ({base.window_ms:.1f} -> {new.window_ms:.1f} ms)"
    grew = [f for f in findings if (f.impact_ms or 0) > 0 and f.id != "gpu_compute"]
    if saved > 0 and idle_up > 0 and grew:
        top = ", ".join(f"{CAUSES[f.id].label} {f.impact_ms:+.1f} ms" for f in grew[:2])
        if delta > 0:
            return f"{head}: it saves {saved:.1f} ms of GPU compute per step, but the GPU idles {idle_up:.1f} ms longer ({top})."
        return f"{head}: it saves {saved:.1f} ms of GPU compute per step, of which {idle_up:.1f} ms is lost to longer GPU idle ({top})."
    top = next((f for f in findings if (f.impact_ms or 0) * delta > 0), findings[0])
    return f"{head}, mostly because: {_mid_sentence(top.title)}."


def _mid_sentence(title: str) -> str:
    """``title`` to follow a colon: its first letter lowercased unless it starts an acronym (GPU, AMP)."""
    return title if title[:2].isupper() else title[0].lower() + title[1:]
