"""Assemble a run's canonical tables from a reader's events."""

from __future__ import annotations

import polars as pl

from traceq.model.links import INHERITED, inherit_from_launch, link_launches
from traceq.model.nesting import nest_host_events
from traceq.model.placing import placed_at
from traceq.model.steps import as_step_kind, assign_steps, find_steps, is_step_candidate
from traceq.schema import EVENTS, GPU_WORK_KINDS, STEPS, THREADS, RunTables

#: Reader columns the model is derived from (``name`` is read on step events only).
KEY_COLUMNS = ("kind", "name", "ts_ns", "dur_ns", "pid", "tid", "correlation")


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
    dtypes, names = EVENTS.schema, dict.fromkeys((*KEY_COLUMNS, *launch_keys))
    keys = events.select(pl.col(c) if c in events.columns else pl.lit(None, dtypes[c]).alias(c) for c in names)
    keys = keys.with_columns(
        pl.when(is_step_candidate(pl.col("kind"), pl.col("name"))).then(pl.col("name")).alias("name")
    )
    derived, steps = derive(keys, tolerance_ns=tolerance_ns, launch_keys=launch_keys)
    return RunTables(attach(events, derived), steps, conform_threads(threads))


def derive(
    keys: pl.DataFrame, *, tolerance_ns: int = 0, launch_keys: tuple[str, ...] = (), steps_from: str | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The derived columns of each row of ``keys`` (:data:`KEY_COLUMNS` and ``launch_keys``), in the
    rows' order, and the ``steps`` table (:func:`~traceq.model.steps.find_steps`, with ``steps_from``)."""
    order = keys.select(
        pl.arg_sort_by(["ts_ns", pl.col("dur_ns").neg()], nulls_last=True, maintain_order=True)
    ).to_series()
    ids = _positions(order).alias("event_id")
    del order
    keys = keys.select(list(dict.fromkeys((*KEY_COLUMNS, *launch_keys)))).with_columns(ids)
    # The steps first: ranges chosen as steps become of kind step before nesting (they are no ops).
    steps = find_steps(keys, steps_from)
    keys = as_step_kind(keys, steps)
    kind = keys.get_column("kind")
    # Nesting and links come back by event id, and are placed at their id (not joined); the step is
    # found per row.
    by_id = _placed(nest_host_events(keys, tolerance_ns), keys.height)
    by_id |= _placed(link_launches(keys, launch_keys), keys.height)
    step = assign_steps(keys, steps)
    is_gpu = keys.get_column("kind").is_in(GPU_WORK_KINDS)
    del keys
    by_id["step"] = placed_at(step, ids, len(step))
    # Back to the rows' order, with what the launching call of each row holds.
    own = {name: by_id[name].gather(ids) for name in ("parent_id", "depth", "op_id", "top_op_id", "launch_id")}
    launch_id = own["launch_id"]
    inherited = [by_id[name].gather(launch_id).alias(f"launch_{name}") for name in INHERITED]
    del by_id
    derived = pl.DataFrame([ids, kind, *own.values(), step, *inherited])
    return inherit_from_launch(derived, is_gpu), STEPS.conform(steps)


def attach(events: pl.DataFrame, derived: pl.DataFrame) -> pl.DataFrame:
    """Reader columns of some events and the same rows of :func:`derive`'s columns, as ``events``."""
    keep = [c.name for c in EVENTS.columns if c.name in events.columns and c.name not in derived.columns]
    return EVENTS.conform(events.select(keep).hstack(derived.get_columns()))


def conform_threads(threads: pl.DataFrame | None) -> pl.DataFrame:
    """The ``threads`` table from a reader's rows (the last name of a thread wins)."""
    if threads is None:
        return THREADS.empty()
    return THREADS.conform(threads).unique(["pid", "tid"], keep="last").sort(["pid", "tid"])


def _placed(frame: pl.DataFrame, n: int) -> dict[str, pl.Series]:
    """The columns of ``frame`` (rows of some events, by ``event_id``) as full-length columns over
    ``n`` events in id order, null where ``frame`` has no row."""
    ids = frame.get_column("event_id")
    return {name: placed_at(frame.get_column(name), ids, n) for name in frame.columns if name != "event_id"}


def _positions(order: pl.Series) -> pl.Series:
    """Where each row falls in ``order`` (row indices in sorted order): the inverse permutation."""
    return placed_at(pl.int_range(len(order), dtype=pl.Int64, eager=True), order, len(order))
