"""How fast a trace's host ran, from ops that do only bookkeeping (views, detaches, empty tensors).

Their durations move with the host's speed under the profiler: between the steps of one trace (the same
trivial ops took 25-47% longer in the slowest step of some traces than in the fastest) and between
traces of one machine (a Conformer's fp32 trace ran them 1.4x slower than its fp16 trace; both were
measured at about the same speed without the profiler). A comparison of two runs can scale one run's host
time to the other's speed (:mod:`traceq.analysis.replay.verdict`).
"""

from __future__ import annotations

import polars as pl

from traceq.analysis.replay.timeline import Timeline
from traceq.schema import OP_TREE_KINDS

#: Ops that do no work but bookkeeping: their durations measure the host's speed under the profiler.
TRIVIAL_OPS = [
    "aten::view", "aten::as_strided", "aten::detach", "detach", "aten::t", "aten::transpose", "aten::empty",
    "aten::unsqueeze", "aten::permute", "aten::_unsafe_view", "aten::expand", "aten::slice", "aten::select",
    "aten::reshape", "aten::empty_strided", "aten::alias", "aten::squeeze", "aten::unflatten",
]  # fmt: skip
#: Calls of an op a trace needs for its median to count.
MIN_CALLS = 20


def trivial_durations(tl: Timeline, by_step: bool = False) -> pl.DataFrame:
    """Median duration (``d``, ns) and count (``n``) of each trivial op (per step with ``by_step``)."""
    ops = tl.host.filter(pl.col("kind").is_in(list(OP_TREE_KINDS)) & pl.col("name").is_in(TRIVIAL_OPS))
    keys = ["name", "step"] if by_step else ["name"]
    if by_step:
        ops = ops.filter(pl.col("step").is_not_null())
    return ops.group_by(keys).agg(d=(pl.col("end") - pl.col("ts")).median(), n=pl.len())


def speed_ratio(a: Timeline, b: Timeline) -> float | None:
    """How much slower ``a``'s host ran the trivial ops both traces share than ``b``'s (median over op names
    of the ratio of their median durations), or None where they share too few."""
    da = trivial_durations(a).filter(pl.col("n") >= MIN_CALLS)
    db = trivial_durations(b).filter(pl.col("n") >= MIN_CALLS)
    joined = da.join(db, on="name", suffix="_b")
    if joined.height < 3:
        return None
    return float(joined.select((pl.col("d") / pl.col("d_b")).median()).item())


def step_spread(tl: Timeline) -> float | None:
    """How much slower the slowest step ran the trivial ops than the fastest (median over op names of the
    ratio of the per-step medians, less 1), or None where too few."""
    per = trivial_durations(tl, by_step=True).filter(pl.col("n") >= 10)
    ratio = per.group_by("name").agg(r=pl.col("d").max() / pl.col("d").min(), k=pl.len()).filter(pl.col("k") >= 2)
    return float(ratio["r"].median()) - 1 if ratio.height else None
