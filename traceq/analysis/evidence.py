"""The evidence for each cause of a run's steps: the calls, ops, call sites and counts behind it.

Everything comes from the metric queries (``idle_sites``, ``host_calls``, ``_search_calls``,
``launch_bound``, ``cast_overhead``, ``precision_coverage``, ``op_summary``, ``gpu_gap_buckets``) restricted
to one run and divided by its number of windows, at full precision (the render layer states each number
with its digits); nothing is counted here that a query does not count.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from traceq.analysis.causes import (
    ALGORITHM_SEARCH,
    ALLOCATOR,
    CAST_OVERHEAD,
    GPU_COMPUTE,
    HOST_SYNC,
    HOST_UNATTRIBUTED,
    INPUT_PIPELINE,
    LAUNCH_OVERHEAD,
    PYTHON_OVERHEAD,
    UNEXPLAINED,
)
from traceq.analysis.results import window_gpus
from traceq.querying.engine import Session

_MS = 1e6


def idle_sites_per_gpu(session: Session, run_id: str) -> pl.DataFrame:
    """``run_id``'s ``idle_sites`` with each row's ``idle_ns`` the mean over the GPUs of its window (a float):
    a rank with several GPUs sums their idle time there, while its split is their mean (:func:`window_gpus`),
    which the findings state beside the sites."""
    mine = pl.col("run_id") == run_id
    gpus = window_gpus(session.query("gpu_busy").filter(mine))
    sites = session.query("idle_sites").filter(mine)
    return (
        sites.join(gpus, on=["rank", "step"], how="left", nulls_equal=True, maintain_order="left")
        .with_columns(pl.col("idle_ns") / pl.col("gpus").fill_null(1).clip(1))
        .drop("gpus")
    )


def evidence(session: Session, run_id: str, windows: int) -> dict[str, dict[str, Any]]:
    """What the metric queries say about each cause of ``run_id``'s steps, per step (``windows`` of them)."""
    mine = pl.col("run_id") == run_id
    w = max(windows, 1)
    sites = idle_sites_per_gpu(session, run_id)
    # a run without steps has one window (step NULL) and its calls are all in it
    stepped = session.query("_windows").filter(mine)["step"].is_not_null().any()
    calls = session.query("host_calls").filter(mine & (pl.col("step").is_not_null() | (not stepped)))
    out: dict[str, dict[str, Any]] = {}

    def top_sites(cause: str, by: list[str], n: int = 5) -> list[dict[str, Any]]:
        rows = (
            sites.filter(pl.col("cause") == cause)
            .group_by(by)
            .agg(
                (pl.col("idle_ns").sum() / w / _MS).alias("idle_ms_per_step"),
                (pl.col("calls").sum() / w).alias("calls_per_step"),
            )
            .sort(["idle_ms_per_step", *by], descending=[True] + [False] * len(by), nulls_last=True)
            .head(n)
        )
        return list(rows.iter_rows(named=True))

    def per_step_calls(cause: str) -> dict[str, float]:
        rows = calls.filter((pl.col("cause") == cause) & pl.col("bytes").is_null())
        rows = rows.group_by("name").agg(pl.col("calls").sum() / w)
        rows = rows.sort(["calls", "name"], descending=[True, False])
        return dict(rows.iter_rows())

    bound = session.query("launch_bound").filter(mine)
    out[LAUNCH_OVERHEAD.id] = {
        "kernels_per_step": _mean(bound, "kernels"),
        "median_kernel_us": _scaled(_mean(bound, "median_kernel_ns"), 1e3),
        "median_launch_us": _scaled(_mean(bound, "median_launch_ns"), 1e3),
        "kernels_shorter_than_their_launch": _mean(bound, "short_kernel_share"),
        "ops_the_gpu_waited_on": top_sites(LAUNCH_OVERHEAD.id, ["top_op"]),
    }
    out[HOST_SYNC.id] = {
        "sync_calls_per_step": per_step_calls(HOST_SYNC.id),
        "sites": top_sites(HOST_SYNC.id, ["site", "op", "top_op", "frame"]),
    }
    data = calls.filter(pl.col("cause") == INPUT_PIPELINE.id)
    copies = data.filter(pl.col("bytes").is_not_null())
    out[INPUT_PIPELINE.id] = {
        "data_loading_ms_per_step": data.filter(pl.col("bytes").is_null())["dur_ns"].sum() / w / _MS,
        "data_loading_calls": per_step_calls(INPUT_PIPELINE.id),
        "pageable_copies_per_step": copies["calls"].sum() / w,
        "pageable_mb_per_step": copies["bytes"].sum() / w / 1e6,
        "sites": top_sites(INPUT_PIPELINE.id, ["site", "frame"]),
    }
    out[ALGORITHM_SEARCH.id] = _search_evidence(session.query("_search_calls").filter(mine), w)
    out[ALLOCATOR.id] = {
        "allocator_calls_per_step": per_step_calls(ALLOCATOR.id),
        "sites": top_sites(ALLOCATOR.id, ["site", "op", "top_op"]),
    }
    casts = session.query("cast_overhead").filter(mine)
    trips = casts["round_trips"] if casts.height else pl.Series([], dtype=pl.Int64)
    out[CAST_OVERHEAD.id] = {
        "conversions_per_step": casts["calls"].sum() / w if casts.height else 0.0,
        "cast_op_cpu_ms_per_step": casts["cpu_ns"].sum() / w / _MS if casts.height else 0.0,
        "cast_kernel_ms_per_step": casts["gpu_ns"].sum() / w / _MS if casts.height else 0.0,
        "round_trips_per_step": trips.sum() / w if trips.null_count() < trips.len() else None,
        "idle_in_casts_by_op": top_sites(CAST_OVERHEAD.id, ["top_op"]),
    }

    def ranges(cause: str) -> list[dict[str, Any]]:  # the ranges (annotations) the cause's time lay in
        return [
            {"site": s["site"], "idle_ms_per_step": s["idle_ms_per_step"], "ranges_per_step": s["calls_per_step"]}
            for s in top_sites(cause, ["site"])
            if s["site"]
        ]

    out[PYTHON_OVERHEAD.id] = {
        "frames": [s for s in top_sites(PYTHON_OVERHEAD.id, ["frame"]) if s["frame"]],
        "in_ranges": ranges(PYTHON_OVERHEAD.id),
    }
    out[HOST_UNATTRIBUTED.id] = {"in_ranges": ranges(HOST_UNATTRIBUTED.id)}
    gaps = session.query("gpu_gap_buckets").filter(mine & pl.col("kind").is_in(["dependency", "unknown"]))
    out[UNEXPLAINED.id] = {"waits_with_work_queued_per_step": gaps["gaps"].sum() / w if gaps.height else 0.0}
    cover = session.query("precision_coverage").filter(mine)
    ops = session.query("op_summary").filter(mine)
    out[GPU_COMPUTE.id] = {
        "fp16_coverage": _mean(cover, "fp16_coverage"),
        "tensor_core_coverage": _mean(cover, "tensor_core_coverage"),
        "median_kernel_us": out[LAUNCH_OVERHEAD.id]["median_kernel_us"],
        "ops_still_fp32_ms_per_step": _still_fp32(ops, w),
    }
    return out


def _search_evidence(searches: pl.DataFrame, w: int) -> dict[str, Any]:
    if searches.is_empty():
        return {"searching_calls_per_step": 0.0}
    by_op = (  # in the events' order, so that each op's first shapes are the same on every read
        searches.sort("event_id")
        .group_by("name", maintain_order=True)
        .agg(
            pl.len().alias("calls"),
            (pl.col("dur_ns").mean() / _MS).alias("ms_per_call"),
            (pl.col("typical_ns").first() / _MS).alias("typical_ms_per_call"),
            pl.col("kernels").mean().alias("kernels_per_call"),
            pl.col("typical_kernels").first().alias("typical_kernels_per_call"),
            pl.col("new_shape").sum().alias("new_shapes"),
            pl.col("input_shapes").drop_nulls().unique(maintain_order=True).head(3).alias("shapes"),
        )
        .sort(["calls", "name"], descending=[True, False])
    )
    ops = []
    for r in by_op.iter_rows(named=True):
        ops.append(
            {
                "op": r["name"],
                "calls_per_step": r["calls"] / w,
                "ms_per_call": r["ms_per_call"],
                "typical_ms_per_call": r["typical_ms_per_call"],
                "kernels_per_call": r["kernels_per_call"],
                "typical_kernels_per_call": r["typical_kernels_per_call"],
                "calls_on_new_shapes": r["new_shapes"],
                "example_shapes": [_shape(s) for s in r["shapes"]],
            }
        )
    return {"searching_calls_per_step": searches.height / w, "ops": ops}


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
    heavy = heavy.sort(["gpu_ns", "name"], descending=[True, False]).head(n)
    return {name: ns / w / _MS for name, ns in heavy.iter_rows() if ns}


def _mean(frame: pl.DataFrame, column: str) -> float | None:
    if frame.is_empty() or column not in frame.columns:
        return None
    value = frame[column].mean()
    return None if value is None else float(value)  # type: ignore[arg-type]


def _scaled(value: float | None, by: float) -> float | None:
    return None if value is None else value / by
