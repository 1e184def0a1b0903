"""Launch links: each GPU kernel, memcpy and memset to the runtime/driver call that launched it."""

from __future__ import annotations

import polars as pl

from traceq.schema import GPU_WORK_KINDS


def link_launches(events: pl.DataFrame, by: tuple[str, ...] = ()) -> pl.DataFrame:
    """``event_id`` of GPU work with ``launch_id``: the runtime call with the same correlation id.

    ``by`` adds keys that must match too (nsys: the process, since correlation ids repeat across
    processes). Event ids must follow start time: a correlation id launched twice keeps its first call
    (the lowest id).
    """
    keys = ["correlation", *by]
    launches = (
        events.filter((pl.col("kind") == "runtime") & pl.col("correlation").is_not_null())
        .group_by(keys)
        .agg(pl.col("event_id").min().alias("launch_id"))
    )
    gpu = events.filter(pl.col("kind").is_in(GPU_WORK_KINDS)).select("event_id", *keys)
    return gpu.join(launches, on=keys, how="left").select("event_id", "launch_id")
