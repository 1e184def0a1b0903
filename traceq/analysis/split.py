"""A run's step time split into causes: GPU busy parts and GPU idle causes that add up to the window.

Every window satisfies ``window = GPU busy + GPU idle``; the busy time is split by what the GPU ran
(compute, casts, layout transforms, optimizer, copies, collectives not hidden by compute, algorithm
search) and the idle time by why it waited (``queries/idle_causes.sql``). Both splits come from the
metric queries; this module only averages them per step (and over a rank's GPUs) and scales summed kernel
time onto the busy union (kernels of several streams overlap, so their sum can exceed the time the GPU
was busy).
"""

from __future__ import annotations

import polars as pl

from traceq.analysis.causes import (
    ALGORITHM_SEARCH,
    BUSY_PARTS,
    CLASS_PARTS,
    COMMUNICATION,
    GPU_COMPUTE,
    IDLE_CAUSES,
    MEMORY_COPIES,
)
from traceq.analysis.results import Split, window_gpus
from traceq.querying.engine import Session

_MS = 1e6
_SEARCH, _COPIES = ALGORITHM_SEARCH.id, MEMORY_COPIES.id


def split(session: Session, run_id: str) -> Split:
    """The split of ``run_id``'s steps, from the session's metric queries."""
    mine = pl.col("run_id") == run_id
    busy = session.query("gpu_busy").filter(mine)
    keys = ["rank", "step"]
    windows = max(busy.select(pl.struct(keys).n_unique()).item(), 1) if busy.height else 1
    per_window = (
        busy.group_by(keys)
        .agg(
            (pl.col("window_ns").max() / _MS).alias("window_ms"),
            (pl.col("busy_ns").sum() / _MS).alias("busy_ms"),
            (pl.col("exposed_comm_ns").sum() / _MS).alias(COMMUNICATION.id),
        )
        .join(window_gpus(busy), on=keys, how="left", nulls_equal=True)
    )

    def by_part(frame: pl.DataFrame) -> pl.DataFrame:
        part = (
            pl.when(pl.col("kind") != "kernel")
            .then(pl.lit(_COPIES))
            .otherwise(pl.col("kernel_class").replace_strict(CLASS_PARTS, default="compute"))
        )
        return (
            frame.with_columns(part.alias("part"))
            .group_by(*keys, "part")
            .agg((pl.col("time_ns").sum() / _MS).alias("ms"))
        )

    # work launched inside searching calls is algorithm search, whatever its class
    searched = session.query("search_gpu_time").filter(mine)
    classes = (
        by_part(session.query("gpu_time").filter(mine))
        .join(by_part(searched).rename({"ms": "searched"}), on=[*keys, "part"], how="left", nulls_equal=True)
        .select(*keys, "part", pl.col("ms") - pl.col("searched").fill_null(0.0))
    )
    search = searched.group_by(keys).agg((pl.col("time_ns").sum() / _MS).alias(_SEARCH))
    summed = (  # in one order (the group-bys above leave their rows in any): the same float sum each time
        pl.concat([classes, search.select(*keys, pl.lit(_SEARCH).alias("part"), pl.col(_SEARCH).alias("ms"))])
        .sort(*keys, "part")
        .group_by(keys, maintain_order=True)
        .agg(pl.col("ms").sum().alias("work_ms"))
    )
    wide = (
        classes.pivot("part", index=keys, values="ms")
        if classes.height
        else pl.DataFrame(schema={k: per_window.schema[k] for k in keys})
    )
    table = (
        per_window.join(summed, on=keys, how="left", nulls_equal=True)
        .join(wide, on=keys, how="left", nulls_equal=True)
        .join(search, on=keys, how="left", nulls_equal=True)
    )
    for c in ("compute", _COPIES, *CLASS_PARTS.values(), _SEARCH, "work_ms"):
        if c not in table.columns:
            table = table.with_columns(pl.lit(0.0).alias(c))
    table = table.with_columns(pl.exclude(keys).fill_null(0.0))
    # summed kernel time scaled onto the busy union (streams overlap); communication is already a union part
    scale = pl.when(pl.col("work_ms") > 0).then(pl.col("busy_ms") / pl.col("work_ms")).otherwise(0.0)
    scaled = [(pl.col(c) * scale).alias(c) for c in (_COPIES, *CLASS_PARTS.values(), _SEARCH)]
    table = table.with_columns(scaled).with_columns(
        (pl.col("busy_ms") - pl.sum_horizontal(*(c for c in BUSY_PARTS if c != GPU_COMPUTE.id))).alias(GPU_COMPUTE.id)
    )
    idle = session.query("idle_causes").filter(mine)
    idle_wide = (
        idle.group_by(*keys, "cause")
        .agg((pl.col("idle_ns").sum() / _MS).alias("ms"))
        .pivot("cause", index=keys, values="ms")
        if idle.height
        else pl.DataFrame(schema={k: per_window.schema[k] for k in keys})
    )
    table = table.join(idle_wide, on=keys, how="left", suffix="_idle", nulls_equal=True)
    both = [c for c in IDLE_CAUSES if c in BUSY_PARTS]
    for c in IDLE_CAUSES:
        name = f"{c}_idle" if c in both else c
        if name not in table.columns:
            table = table.with_columns(pl.lit(0.0).alias(name))
    table = table.with_columns(pl.exclude(keys).fill_null(0.0)).sort(keys)
    # a rank with several GPUs: each GPU's busy and idle time adds up to the window; the split is their mean
    table = table.with_columns(pl.exclude(*keys, "window_ms", "gpus") / pl.col("gpus").clip(1)).drop("gpus")
    mean = {c: (table[c].sum() / windows) for c in table.columns if c not in keys}
    busy_parts = {c: mean[c] for c in BUSY_PARTS}
    idle_parts = {c: mean[f"{c}_idle" if c in both else c] for c in IDLE_CAUSES}
    per_step = table.select(
        *keys,
        "window_ms",
        "busy_ms",
        *(pl.col(c) for c in BUSY_PARTS),
        *((pl.col(f"{c}_idle") if c in both else pl.col(c)).alias(f"idle_{c}") for c in IDLE_CAUSES),
    )
    return Split(
        run_id=run_id,
        windows=windows,
        window_ms=mean.get("window_ms", 0.0),
        busy_ms=mean.get("busy_ms", 0.0),
        busy=busy_parts,
        idle=idle_parts,
        per_step=per_step,
    )
