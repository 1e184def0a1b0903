"""Chrome-trace categories and the event kinds they stand for: what the chrome readers (Kineto, Paddle)
read each event as, and what the Perfetto export, which writes chrome traces, checks its categories against."""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

import polars as pl

from traceq.model.steps import STEP_NAME

F = TypeVar("F", pl.DataFrame, pl.LazyFrame)

#: Chrome-trace category (lower-cased) -> event kind. Kineto and Paddle spellings, old and new.
CATEGORY_KIND: dict[str, str] = {
    # framework ops and their stages
    "cpu_op": "op",
    "operator": "op",
    "operatorinner": "op_inner",
    "dygraphkernellaunch": "op_inner",
    "statickernellaunch": "op_inner",
    "python_function": "python",
    # host ranges
    "user_annotation": "annotation",
    "userdefined": "annotation",
    "pythonuserdefined": "annotation",
    "pythonop": "annotation",
    "forward": "annotation",
    "backward": "annotation",
    "optimization": "annotation",
    "dataloader": "annotation",
    "communication": "annotation",
    "profilestep": "step",
    "gpu_user_annotation": "gpu_annotation",
    # API calls
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "runtime": "runtime",
    "cudaruntime": "runtime",
    "mluruntime": "runtime",
    # GPU work
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_sync": "sync",
    # allocator instants
    "allocate": "memory",
    "free": "memory",
    "reservedallocate": "memory",
    "reservedfree": "memory",
}
#: CUPTI's range where the host blocked on a full launch queue (category ``overhead``): kind ``queue_full``.
QUEUE_FULL_NAME = "Command Buffer Full"
#: The column :func:`with_kind` holds each event's category's kind in.
_CATEGORY_KIND = "_category_kind"


def with_kind(frame: F, categories: Collection[str], column: str = "kind") -> F:
    """``frame`` (raw chrome events: columns ``ph``, ``cat``, ``name``, each of the ``categories``) with each
    event's kind as ``column``. Each category is looked up in :data:`CATEGORY_KIND` once, and its kind held
    in a column of its own while the rules below read it: as an expression in each rule, it was looked up
    again by each, and the kind took about four times as long (benchmarks/README.md, twenty-third round)."""
    kinds = {cat: CATEGORY_KIND.get(cat.lower()) for cat in categories}
    by_cat = pl.col(_CATEGORY_KIND)
    instant = pl.col("ph") == "i"
    kind = (
        pl.when(instant & ((by_cat == "memory") | (pl.col("name") == "[memory]")))
        .then(pl.lit("memory"))
        .when(instant)
        .then(pl.lit("marker"))
        .when(by_cat.is_in(["annotation", "step"]) & pl.col("name").str.contains(STEP_NAME))
        .then(pl.lit("step"))
        .when(by_cat == "step")
        .then(pl.lit("annotation"))
        .when(by_cat.is_null() & (pl.col("name") == QUEUE_FULL_NAME))
        .then(pl.lit("queue_full"))
        .otherwise(by_cat.fill_null("other"))
    )
    by_category = pl.col("cat").replace_strict(kinds, default=None, return_dtype=pl.String)
    return frame.with_columns(by_category.alias(_CATEGORY_KIND)).with_columns(kind.alias(column)).drop(_CATEGORY_KIND)
