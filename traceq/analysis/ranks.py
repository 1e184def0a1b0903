"""Cross-rank views of a multi-rank run, from the ``rank_balance`` query: per-rank means, the straggler
of each step, the spread of idle and launch-bound time across ranks, and rank-aligned comparisons."""

from __future__ import annotations

from typing import Any

import polars as pl

from traceq.analysis.causes import STRAGGLER
from traceq.analysis.findings import Finding

#: The straggler finding is named when the other ranks wait at least this long per step for one rank
#: (in ms, and as a share of the step).
STRAGGLER_MIN_MS = 0.25
STRAGGLER_MIN_SHARE = 0.05

_MS = 1e6
_SHORT = {
    "step_ms": "step",
    "gpu_work_ms": "gpu_work",
    "host_launch_gap_ms": "launch_gap",
    "exposed_comm_ms": "comm",
    "wait_ms": "wait",
}


def per_rank(balance: pl.DataFrame) -> pl.DataFrame:
    """One row per rank: mean per-step ms, ratios, and the steps in which it was the straggler."""
    return (
        balance.group_by("rank")
        .agg(
            pl.len().alias("steps"),
            (pl.col("window_ns").mean() / _MS).alias("step_ms"),
            (pl.col("busy_ns").mean() / _MS).alias("gpu_busy_ms"),
            ((pl.col("busy_ns") - pl.col("exposed_comm_ns")).mean() / _MS).alias("gpu_work_ms"),
            pl.col("idle_ratio").mean(),
            pl.col("launch_bound_ratio").mean(),
            (pl.col("host_launch_gap_ns").mean() / _MS).alias("host_launch_gap_ms"),
            (pl.col("exposed_comm_ns").mean() / _MS).alias("exposed_comm_ms"),
            (pl.col("wait_ns").mean() / _MS).alias("wait_ms"),
            pl.col("is_straggler").sum().cast(pl.Int64).alias("straggler_steps"),
        )
        .sort("rank")
    )


def stragglers(balance: pl.DataFrame) -> pl.DataFrame:
    """One row per step: the straggler, how long the other ranks waited for it, and the spread of windows."""
    return (
        balance.group_by("step")
        .agg(
            pl.len().alias("ranks"),
            pl.col("rank").filter(pl.col("is_straggler")).first().alias("straggler"),
            (pl.col("work_ns").max() / _MS).alias("straggler_work_ms"),
            (pl.col("wait_ns").filter(~pl.col("is_straggler")).mean() / _MS).alias("others_wait_ms"),
            ((pl.col("window_ns").max() - pl.col("window_ns").min()) / _MS).alias("window_spread_ms"),
        )
        .sort("step", nulls_last=True)
    )


def spread(ranks: pl.DataFrame) -> dict[str, Any]:
    """Min, median and max across ranks of the per-rank means, and the ranks at the extremes."""
    out: dict[str, Any] = {"ranks": ranks.height}
    for col in ("step_ms", "idle_ratio", "launch_bound_ratio", "exposed_comm_ms", "wait_ms"):
        values = ranks.select("rank", col).drop_nulls()
        if values.is_empty():
            continue
        ordered = values.sort(col)
        (lo_rank, lo), (hi_rank, hi) = ordered.row(0), ordered.row(-1)
        out[col] = {"min": lo, "median": values[col].median(), "max": hi, "min_rank": lo_rank, "max_rank": hi_rank}
    return out


def straggler_finding(ranks: pl.DataFrame, steps: pl.DataFrame, step_ms: float | None) -> Finding | None:
    """The straggler finding: one rank is the slowest in most steps and the others wait for it."""
    if ranks.height < 2 or steps.is_empty():
        return None
    top = ranks.sort("straggler_steps", "rank", descending=[True, False]).row(0, named=True)
    wait = steps.filter(pl.col("straggler") == top["rank"])["others_wait_ms"].mean() or 0.0
    share = top["straggler_steps"] / steps.height
    if share < 0.5 or wait < STRAGGLER_MIN_MS or (step_ms and wait / step_ms < STRAGGLER_MIN_SHARE):
        return None
    others = ranks.filter(pl.col("rank") != top["rank"])
    gap_delta = top["host_launch_gap_ms"] - others["host_launch_gap_ms"].median()
    busy_delta = top["gpu_work_ms"] - others["gpu_work_ms"].median()
    cause = (
        f"its GPU waits {gap_delta:+.1f} ms per step longer for the CPU to launch work than the others' "
        "(a slower host: data loading, Python, profiler)"
        if gap_delta >= busy_delta
        else f"its GPU works {busy_delta:+.1f} ms per step longer than the others' (more or slower GPU work)"
    )
    return Finding(
        id=STRAGGLER.id,
        title=f"Rank {top['rank']} is the slowest in {top['straggler_steps']} of {steps.height} steps; the "
        f"other ranks wait {wait:.2f} ms per step for it in collectives",
        impact_ms=wait,
        evidence={
            "straggler_rank": top["rank"],
            "straggler_steps": top["straggler_steps"],
            "others_wait_ms_per_step": wait,
            "host_launch_gap_ms_vs_others": gap_delta,
            "gpu_work_ms_vs_others": busy_delta,
            "exposed_comm_ms_straggler": top["exposed_comm_ms"],
            "exposed_comm_ms_others_median": others["exposed_comm_ms"].median(),
            "cause": cause,
        },
        next_step=f"Find what rank {top['rank']} does differently: {cause}. Balance the input per rank, "
        "move data loading off the training thread, or check that rank's host and GPU.",
    )


def aligned(base: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """Per-rank deltas (NEW - BASE, ms per step) of two runs' per-rank tables, matched on rank number."""
    cols = ("step_ms", "gpu_work_ms", "host_launch_gap_ms", "exposed_comm_ms", "wait_ms")
    joined = base.select("rank", *cols, "straggler_steps").join(
        new.select("rank", *cols, "straggler_steps"), on="rank", how="full", coalesce=True, suffix="_new"
    )
    return joined.select(
        "rank",
        pl.col("step_ms").alias("base_step_ms"),
        pl.col("step_ms_new").alias("new_step_ms"),
        *((pl.col(f"{c}_new") - pl.col(c)).alias(f"{_SHORT[c]}_delta") for c in cols),
        pl.col("straggler_steps").alias("straggler_base"),
        pl.col("straggler_steps_new").alias("straggler_new"),
    ).sort("rank")
