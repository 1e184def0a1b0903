"""Host-side nesting: the op tree on each thread, and the op that encloses each API call.

Per host thread, ``op`` and ``op_inner`` ranges form a tree by time containment; ``runtime`` calls are
leaves placed in it. ``annotation`` ranges are tracked too, but only as a fallback owner: work launched
where no op encloses it (a fused optimizer called from Python, say) is attributed to the innermost
annotation. Sources that round times to whole microseconds let a child end up to one tick after its
parent: ``tolerance_ns`` absorbs that.
"""

from __future__ import annotations

import polars as pl

from traceq.schema import OP_TREE_KINDS

_FALLBACK_KINDS = ("annotation",)
_LEAF_KINDS = ("runtime",)
_OUT = {
    "parent_id": pl.Int64,
    "depth": pl.Int32,
    "op_id": pl.Int64,
    "top_op_id": pl.Int64,
}


def nest_host_events(events: pl.DataFrame, tolerance_ns: int = 0) -> pl.DataFrame:
    """``event_id`` with ``parent_id``, ``depth``, ``op_id``, ``top_op_id`` for host ranges and calls.

    ``events`` needs ``event_id``, ``kind``, ``ts_ns``, ``dur_ns``, ``pid``, ``tid``. Only op-tree
    events get ``parent_id``/``depth``; op-tree and runtime events get ``op_id``/``top_op_id``.
    """
    host = (
        events.filter(pl.col("kind").is_in(OP_TREE_KINDS + _FALLBACK_KINDS + _LEAF_KINDS) & pl.col("tid").is_not_null())
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
    depth: list[int | None] = [None] * n
    op_id: list[int | None] = [None] * n
    top_op: list[int | None] = [None] * n
    # stack entry: (end, tree parent id, tree depth, nearest op, outermost op, nearest annotation)
    stack: list[tuple[int, int | None, int, int | None, int | None, int | None]] = []
    current_thread = None
    for i in range(n):
        if threads[i] != current_thread:
            stack.clear()
            current_thread = threads[i]
        start, end, kind, eid = starts[i], ends[i], kinds[i], ids[i]
        while stack and (stack[-1][0] <= start or end > stack[-1][0] + tolerance_ns):
            stack.pop()
        tree_parent, tree_depth, near, outer, note = stack[-1][1:] if stack else (None, 0, None, None, None)
        if kind == "annotation":
            stack.append((end, tree_parent, tree_depth, near, outer, eid))
            continue
        if kind == "op":
            near = eid
            outer = outer if outer is not None else eid
        op_id[i] = near if near is not None else note
        top_op[i] = outer if outer is not None else note
        if kind != "runtime":
            parent[i], depth[i] = tree_parent, tree_depth
            stack.append((end, eid, tree_depth + 1, near, outer, note))
    keep = [k != "annotation" for k in kinds]
    return pl.DataFrame(
        {"event_id": ids, "parent_id": parent, "depth": depth, "op_id": op_id, "top_op_id": top_op},
        schema={"event_id": pl.Int64, **_OUT},
    ).filter(pl.Series(keep, dtype=pl.Boolean))
