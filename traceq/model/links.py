"""Launch links: each GPU kernel, memcpy and memset to the runtime/driver call that launched it, and what it
takes from that call."""

from __future__ import annotations

import polars as pl

from traceq.schema import GPU_WORK_KINDS


def link_launches(events: pl.DataFrame, by: tuple[str, ...] = ()) -> pl.DataFrame:
    """``event_id`` of GPU work with ``launch_id``: the runtime call with the same correlation id.

    ``by`` adds keys that must match too (nsys: the process, since correlation ids repeat across
    processes). Event ids must follow start time: a correlation id launched twice keeps its first call
    (the lowest id).
    """
    keys = launch_keys(by)
    launches = first_launches(events.filter((pl.col("kind") == "runtime") & pl.col("correlation").is_not_null()), by)
    gpu = events.filter(pl.col("kind").is_in(GPU_WORK_KINDS)).select("event_id", *keys)
    return gpu.join(launches, on=keys, how="left").select("event_id", "launch_id")


def launch_keys(by: tuple[str, ...] = ()) -> list[str]:
    """The columns a launch and its GPU work share: the correlation id and ``by``."""
    return list(dict.fromkeys(("correlation", *by)))


def first_launches(calls: pl.DataFrame, by: tuple[str, ...] = ()) -> pl.DataFrame:
    """The launch of each correlation id (and ``by``) among runtime ``calls``, as ``launch_id``: the first
    call (the lowest ``event_id``) where one was launched twice."""
    return calls.group_by(launch_keys(by)).agg(pl.col("event_id").min().alias("launch_id"))


#: What GPU work takes from the call that launched it.
INHERITED = ("op_id", "top_op_id", "step")


def inherit_from_launch(derived: pl.DataFrame, is_gpu: pl.Series) -> pl.DataFrame:
    """Derived columns with GPU work's op, top op and step (where it has a launch) replaced by its
    launching call's (``launch_op_id``, ``launch_top_op_id``, ``launch_step``, then dropped)."""
    launched = is_gpu & pl.col("launch_id").is_not_null()
    return derived.with_columns(
        pl.when(is_gpu).then(pl.col("launch_op_id")).otherwise(pl.col("op_id")).alias("op_id"),
        pl.when(is_gpu).then(pl.col("launch_top_op_id")).otherwise(pl.col("top_op_id")).alias("top_op_id"),
        pl.when(launched).then(pl.col("launch_step")).otherwise(pl.col("step")).alias("step"),
    ).drop(f"launch_{name}" for name in INHERITED)
