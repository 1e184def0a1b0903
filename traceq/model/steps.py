"""Profiler steps: which events are steps, the steps table, and the step each event belongs to."""

from __future__ import annotations

import polars as pl

from traceq.model.placing import nulls, placed_at

#: A profiler step's name: PyTorch ``ProfilerStep#12``, Paddle ``ProfileStep#12``.
STEP_NAME = r"^Profiler?Step#(\d+)$"


def step_number(name: pl.Expr) -> pl.Expr:
    """The N of a step name, null for other names."""
    return name.str.extract(STEP_NAME, 1).cast(pl.Int32)


def steps_table(events: pl.DataFrame) -> pl.DataFrame:
    """One row per ``step`` event, ordered by start."""
    return (
        events.filter(pl.col("kind") == "step")
        .select(
            step_number(pl.col("name")).alias("step"),
            "name",
            "ts_ns",
            "dur_ns",
            "event_id",
        )
        .sort("ts_ns")
    )


def assign_steps(events: pl.DataFrame, steps: pl.DataFrame, at: str = "ts_ns") -> pl.Series:
    """For each event, the step whose window [start, end) contains the event's ``at`` time (else null)."""
    if steps.is_empty():
        return nulls("step", pl.Int32(), events.height)
    windows = steps.select(
        pl.col("ts_ns").alias("_win_start"),
        (pl.col("ts_ns") + pl.col("dur_ns")).alias("_win_end"),
        pl.col("step").alias("_win_step"),
    ).sort("_win_start")
    probe = events.select(pl.col(at).alias("_t")).with_row_index("_row")
    matched = (
        probe.filter(pl.col("_t").is_not_null())
        .sort("_t")
        .join_asof(windows, left_on="_t", right_on="_win_start", strategy="backward")
        .select("_row", pl.when(pl.col("_t") < pl.col("_win_end")).then(pl.col("_win_step")).alias("step"))
    )
    return placed_at(matched.get_column("step").cast(pl.Int32), matched.get_column("_row"), events.height)
