"""Host-side nesting: the op tree on each thread, and the op that encloses each API call.

Per host thread, ``op`` and ``op_inner`` ranges form a tree by time containment; ``runtime`` calls are
leaves placed in it. Sources that round times to whole microseconds let a child end up to one tick
after its parent: ``tolerance_ns`` absorbs that.
"""

from __future__ import annotations

import polars as pl

from traceq.schema import OP_TREE_KINDS

_LEAF_KINDS = ("runtime",)
_OUT = {
    "parent_id": pl.Int64,
    "depth": pl.Int32,
    "op_id": pl.Int64,
    "top_op_id": pl.Int64,
}


def nest_host_events(events: pl.DataFrame, tolerance_ns: int = 0) -> pl.DataFrame:
    """``event_id`` with ``parent_id``, ``depth``, ``op_id``, ``top_op_id`` for op-tree and runtime events.

    ``events`` needs ``event_id``, ``kind``, ``ts_ns``, ``dur_ns``, ``pid``, ``tid``.
    """
    host = (
        events.filter(pl.col("kind").is_in(OP_TREE_KINDS + _LEAF_KINDS) & pl.col("tid").is_not_null())
        .select("event_id", "kind", "ts_ns", "dur_ns", "pid", "tid")
        .sort(["pid", "tid", "ts_ns", pl.col("dur_ns").neg(), "event_id"], nulls_last=True)
    )
    ids = host["event_id"].to_list()
    kinds = host["kind"].to_list()
    starts = host["ts_ns"].to_list()
    ends = (host["ts_ns"] + host["dur_ns"].clip(lower_bound=0)).to_list()
    threads = host.select(pl.struct("pid", "tid").rank("dense")).to_series().to_list()

    n = len(ids)
    parent: list[int | None] = [None] * n
    depth: list[int] = [0] * n
    op_id: list[int | None] = [None] * n
    top_op: list[int | None] = [None] * n
    # stack entries: (end, event_id, nearest op id, outermost op id)
    stack: list[tuple[int, int, int | None, int | None]] = []
    current_thread = None
    for i in range(n):
        if threads[i] != current_thread:
            stack.clear()
            current_thread = threads[i]
        start, end = starts[i], ends[i]
        while stack and (stack[-1][0] <= start or end > stack[-1][0] + tolerance_ns):
            stack.pop()
        if stack:
            top = stack[-1]
            parent[i], depth[i], near, outer = top[1], len(stack), top[2], top[3]
        else:
            near = outer = None
        if kinds[i] == "op":
            near = ids[i]
            outer = outer if outer is not None else ids[i]
        op_id[i], top_op[i] = near, outer
        if kinds[i] != "runtime":
            stack.append((end, ids[i], near, outer))
    return pl.DataFrame(
        {"event_id": ids, "parent_id": parent, "depth": depth, "op_id": op_id, "top_op_id": top_op},
        schema={"event_id": pl.Int64, **_OUT},
    )
