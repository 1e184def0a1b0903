"""Assemble a run's canonical tables from a reader's events."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceq.model.kernel_classes import classify
from traceq.model.links import link_launches
from traceq.model.nesting import nest_host_events
from traceq.model.placing import placed_at
from traceq.model.steps import assign_steps, steps_table
from traceq.schema import (
    EVENTS,
    GPU_WORK_KINDS,
    KERNEL_CLASS_TABLE,
    KERNEL_STATS,
    OP_STATS,
    STEPS,
    SUMMARY_CELLS,
    THREADS,
)

#: Columns this module computes; readers provide the others.
_DERIVED = ("event_id", "step", "parent_id", "depth", "op_id", "top_op_id", "launch_id")


@dataclass
class RunTables:
    """The per-rank tables of one run, conforming to :mod:`traceq.schema`."""

    events: pl.DataFrame
    steps: pl.DataFrame
    threads: pl.DataFrame
    op_stats: pl.DataFrame = field(default_factory=OP_STATS.empty)
    kernel_stats: pl.DataFrame = field(default_factory=KERNEL_STATS.empty)
    summary_cells: pl.DataFrame = field(default_factory=SUMMARY_CELLS.empty)
    kernel_classes: pl.DataFrame = field(default_factory=KERNEL_CLASS_TABLE.empty)

    def classify_kernels(self) -> None:
        """Fill ``kernel_classes`` from every kernel name the tables hold."""
        names = pl.concat(
            [
                self.events.filter(pl.col("kind") == "kernel")["name"],
                self.op_stats.filter(pl.col("row_type") == "kernel")["name"],
                self.kernel_stats["name"],
            ]
        )
        self.kernel_classes = KERNEL_CLASS_TABLE.conform(classify(names))


def build_run_tables(
    events: pl.DataFrame,
    threads: pl.DataFrame | None = None,
    *,
    tolerance_ns: int = 0,
    launch_keys: tuple[str, ...] = (),
) -> RunTables:
    """Number events in time order, and fill steps, nesting and launch links.

    ``events`` holds the reader's columns (a subset of ``events`` without the derived ones), plus
    any ``launch_keys`` helper columns. Event ids number the events by start (longest first on ties,
    then the trace's order), but the rows keep the trace's order, so no column is copied by a sort.
    """
    keep = {c.name for c in EVENTS.columns} | set(launch_keys)
    events = events.select([c for c in events.columns if c in keep])
    missing = [c for c in EVENTS.columns if c.name not in events.columns and c.name not in _DERIVED]
    events = events.with_columns(pl.lit(None, c.dtype).alias(c.name) for c in missing)
    order = events.select(
        pl.arg_sort_by(["ts_ns", pl.col("dur_ns").neg()], nulls_last=True, maintain_order=True)
    ).to_series()
    ids = _positions(order).alias("event_id")
    del order

    narrow = ("kind", "name", "ts_ns", "dur_ns", "pid", "tid", "correlation", *launch_keys)
    keys = events.select(list(dict.fromkeys(narrow))).with_columns(ids)
    # Nesting and links come back by event id, and are placed at their id (not joined); the step is
    # found per row.
    by_id = _placed(nest_host_events(keys, tolerance_ns), keys.height)
    by_id |= _placed(link_launches(keys, launch_keys), keys.height)
    steps = steps_table(keys)
    step = assign_steps(keys, steps)
    is_gpu = keys.get_column("kind").is_in(GPU_WORK_KINDS)
    del keys
    by_id["step"] = placed_at(step, ids, len(step))
    # Back to the rows' order; GPU work inherits op, top op and step from the call that launched it.
    own = {name: by_id[name].gather(ids) for name in ("parent_id", "depth", "op_id", "top_op_id", "launch_id")}
    launch_id = own["launch_id"]
    inherited = {name: by_id[name].gather(launch_id) for name in ("op_id", "top_op_id", "step")}
    del by_id
    derived = pl.DataFrame([*own.values(), step]).with_columns(
        pl.when(is_gpu).then(inherited["op_id"]).otherwise(pl.col("op_id")).alias("op_id"),
        pl.when(is_gpu).then(inherited["top_op_id"]).otherwise(pl.col("top_op_id")).alias("top_op_id"),
        pl.when(is_gpu & launch_id.is_not_null()).then(inherited["step"]).otherwise(pl.col("step")).alias("step"),
    )
    events = events.drop([c for c in derived.columns if c in events.columns]).hstack([ids, *derived.get_columns()])
    if threads is None:
        threads = THREADS.empty()
    threads = THREADS.conform(threads).unique(["pid", "tid"], keep="last").sort(["pid", "tid"])
    return RunTables(EVENTS.conform(events), STEPS.conform(steps), threads)


def _placed(frame: pl.DataFrame, n: int) -> dict[str, pl.Series]:
    """The columns of ``frame`` (rows of some events, by ``event_id``) as full-length columns over
    ``n`` events in id order, null where ``frame`` has no row."""
    ids = frame.get_column("event_id")
    return {name: placed_at(frame.get_column(name), ids, n) for name in frame.columns if name != "event_id"}


def _positions(order: pl.Series) -> pl.Series:
    """Where each row falls in ``order`` (row indices in sorted order): the inverse permutation."""
    return placed_at(pl.int_range(len(order), dtype=pl.Int64, eager=True), order, len(order))
