"""One representative step of a run as lanes to draw: GPU work by class, GPU idle by cause, the host's top-level ops.

The data comes from query blocks: the step is ``_typical_step`` (the window nearest the mean on the run's
first rank), its lanes ``_step_gpu_lanes`` (GPU work with its kernel class), ``_step_idle_lanes`` (idle
time by cause) and ``_step_host_lanes`` (the launching threads' top-level ops), all in ns from the
window's start. This module turns them into ms, so two runs' steps line up on one scale, and merges
touching idle pieces of one cause (a gap is cut wherever the host's calls change) into one interval.
"""

from __future__ import annotations

import polars as pl

from traceq.analysis.results import StepLanes
from traceq.querying.engine import Session

_MS = 1e6


def timeline(session: Session, run_id: str) -> StepLanes | None:
    """The representative step of ``run_id`` (None where the run has no window: summary text)."""
    step = session.query("_typical_step").filter(pl.col("run_id") == run_id)
    if step.is_empty():
        return None
    w = step.row(0, named=True)

    def lanes(name: str) -> pl.DataFrame:
        return session.query(name).filter(pl.col("run_id") == run_id).drop("run_id", "rank")

    return StepLanes(
        run_id=run_id,
        rank=int(w["rank"]),
        step=w["step"],
        windows=int(w["windows"]),
        window_ms=(w["win_end"] - w["win_start"]) / _MS,
        gpu=_in_ms(lanes("_step_gpu_lanes")),
        idle=_in_ms(_merged(lanes("_step_idle_lanes"))),
        host=_in_ms(lanes("_step_host_lanes")),
    )


def _merged(idle: pl.DataFrame) -> pl.DataFrame:
    """Pieces of one device and cause that touch (a gap cut where the host's calls change) as one."""
    if idle.is_empty():
        return idle
    gap = pl.col("start_ns") > pl.col("end_ns").shift(1)
    changed = (pl.col("cause") != pl.col("cause").shift(1)) | gap
    return (
        idle.sort("device", "start_ns")
        .with_columns(changed.fill_null(True).cum_sum().over("device").alias("_run"))
        .group_by("device", "_run", maintain_order=True)
        .agg(pl.col("cause").first(), pl.col("start_ns").min(), pl.col("end_ns").max())
        .drop("_run")
    )


def _in_ms(frame: pl.DataFrame) -> pl.DataFrame:
    """``start_ns``/``end_ns`` (from the window's start) as ``start_ms``/``end_ms``."""
    return frame.with_columns(
        (pl.col("start_ns") / _MS).alias("start_ms"), (pl.col("end_ns") / _MS).alias("end_ms")
    ).drop("start_ns", "end_ns")
