"""The GPU idle of a replay split by cause: each traced gap's causes, scaled by how the replay changed it.

A replay keeps every GPU event and its order; what it changes is when each starts. The idle time before an
event on its device (the gap an island of work ends) is therefore measured in the trace and in the replay,
and the traced pieces of that gap (``_idle_pieces``: its causes, by the host's calls) are scaled by the
gap's replayed length over its traced one. Summed by cause, this splits the replay's idle time the way the
trace's was split, so a step estimated without the profiler has parts by cause like a traced one.
"""

from __future__ import annotations

import polars as pl

from traceq.analysis.causes import CAUSES
from traceq.analysis.findings import Part, Waterfall
from traceq.analysis.replay.engine import Replay
from traceq.analysis.replay.timeline import Timeline
from traceq.analysis.results import REST, REST_LABEL, Split

#: The query whose pieces of traced idle time the split scales.
IDLE_PIECES = "_idle_pieces"


def idle_scale_by_cause(timeline: Timeline, replay: Replay, pieces: pl.DataFrame) -> dict[str, float]:
    """Per cause, the replay's idle time over the trace's: the pieces of ``pieces`` (``_idle_pieces`` rows
    of the timeline's run and rank, in windows) each scaled by the replay's length of its gap over the
    traced length, summed, over the pieces' traced sum. A cause without pieces is absent."""
    mine = pieces.filter(
        (pl.col("run_id") == timeline.run_id) & (pl.col("rank") == timeline.rank) & pl.col("step").is_not_null()
    )
    if mine.is_empty() or timeline.gpu.is_empty():
        return {}
    items = timeline.gpu["item"]
    gpu = timeline.gpu.select(
        "device",
        pl.col("ts").cast(pl.Float64),
        pl.col("end").cast(pl.Float64),
        replay_ts=pl.Series(replay.start, dtype=pl.Float64).gather(items),
        replay_end=pl.Series(replay.end, dtype=pl.Float64).gather(items),
    ).with_columns(pl.col("device").cast(pl.Int64))
    gpu = _gap_before(_gap_before(gpu, "ts", "end", "traced_gap"), "replay_ts", "replay_end", "replay_gap")
    # each piece belongs to the gap that the next event on its device (by traced start) ends
    ends = mine.select(
        pl.col("device").cast(pl.Int64), "cause", "ns", at=(pl.col("piece_end") - timeline.t0_ns).cast(pl.Float64)
    ).sort("device", "at")
    starts = gpu.select("device", "ts", "traced_gap", "replay_gap").sort("device", "ts")
    matched = ends.join_asof(
        starts, left_on="at", right_on="ts", by="device", strategy="forward", check_sortedness=False
    )
    gap = pl.col("traced_gap")
    ratio = pl.when(gap > 0).then(pl.col("replay_gap") / gap).otherwise(1.0).fill_null(1.0)
    sums = matched.group_by("cause").agg(traced=pl.col("ns").sum(), replayed=(pl.col("ns") * ratio).sum())
    return {c: r / t for c, t, r in sums.select("cause", "traced", "replayed").iter_rows() if t > 0}


def _gap_before(gpu: pl.DataFrame, start: str, end: str, name: str) -> pl.DataFrame:
    """``gpu`` with ``name``: the idle time on its device before each event (0 where work before it still
    runs), in the order of ``start``."""
    return (
        gpu.sort("device", start)
        .with_columns(_busy_to=pl.col(end).cum_max().shift(1).over("device"))
        .with_columns(pl.max_horizontal(pl.col(start) - pl.col("_busy_to"), pl.lit(0.0)).fill_null(0.0).alias(name))
        .drop("_busy_to")
    )


def estimated_split(split: Split, scale: dict[str, float], step_ms: float) -> Split:
    """A run's step without the profiler split like its traced one (ms per step): busy parts as traced,
    each idle cause scaled (:func:`idle_scale_by_cause`), and :data:`REST`, idle time up to ``step_ms``
    (the estimate) that no cause holds."""
    idle = {c: ms * scale.get(c, 1.0) for c, ms in split.idle.items()}
    idle[REST] = step_ms - split.busy_ms - sum(idle.values())
    return Split(split.run_id, split.windows, step_ms, split.busy_ms, dict(split.busy), idle)


def parts_of(split: Split) -> dict[str, float]:
    """Every part of an estimated split (:func:`estimated_split`), busy and idle sides together, in
    waterfall order, :data:`REST` last."""
    return {**split.parts(), REST: split.idle.get(REST, 0.0)}


def estimated_waterfall(base: Split, new: Split) -> Waterfall:
    """The difference between two runs' steps without the profiler split by part (of each one's
    :func:`estimated_split`): it closes on the difference of their estimates."""
    b, n = parts_of(base), parts_of(new)
    parts = tuple(Part(c, REST_LABEL if c == REST else CAUSES[c].label, b[c], n[c]) for c in b)
    return Waterfall(parts, new.window_ms - base.window_ms)
