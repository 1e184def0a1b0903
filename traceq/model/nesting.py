"""Host-side nesting: the op tree on each thread, and the op that encloses each API call.

Per host thread, ``op`` and ``op_inner`` ranges form a tree by time containment. ``annotation`` ranges
are tracked too, but only as a fallback owner: work launched where no op encloses it (a fused optimizer
called from Python, say) is attributed to the innermost annotation. ``runtime`` calls are leaves: each is
placed under the innermost range that contains it, by an as-of join and a walk up the tree (vectorised,
since launches scale with kernels). Sources that round times to whole microseconds let a child end up to
one tick after its parent: ``tolerance_ns`` absorbs that.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from traceq._utils.column_buffers import column_bytes
from traceq._utils.native import NESTING, load
from traceq.schema import OP_TREE_KINDS

#: The C walk and climb (same columns as the Python ones below).
_nest_scan = load(NESTING)

_CONTAINER_KINDS = (*OP_TREE_KINDS, "annotation")
_LEAF_KINDS = ("runtime",)
_OUT = {"event_id": pl.Int64, "parent_id": pl.Int64, "depth": pl.Int32, "op_id": pl.Int64, "top_op_id": pl.Int64}


def native_available() -> bool:
    """Whether the C walk was built at install."""
    return _nest_scan is not None


def nest_host_events(events: pl.DataFrame, tolerance_ns: int = 0, native: bool = True) -> pl.DataFrame:
    """``event_id`` with ``parent_id``, ``depth``, ``op_id``, ``top_op_id`` for host ranges and calls.

    ``events`` needs ``event_id``, ``kind``, ``ts_ns``, ``dur_ns``, ``pid``, ``tid``. Runtime calls get
    the innermost op-tree range as ``parent_id`` and its depth plus one as ``depth``.
    """
    return _nest(events, tolerance_ns, native)[0]


def nest_with_open_ranges(
    events: pl.DataFrame, tolerance_ns: int = 0, native: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`nest_host_events`, and the rows of ``events`` still open after them: per thread, its last
    range and the ranges enclosing it (the thread's stack, in the walk's order).

    Walking those rows again with events that start later on the same threads rebuilds the same
    stacks, so events can be nested in batches of consecutive start times.
    """
    nested, containers = _nest(events, tolerance_ns, native)
    return nested, _open_stacks(containers).select(events.columns)


def _nest(events: pl.DataFrame, tolerance_ns: int, native: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    containers = _nest_containers(events, tolerance_ns, native)
    leaves = _place_leaves(events, containers, tolerance_ns, native)
    tree = containers.filter(pl.col("kind") != "annotation").select(_OUT.keys())
    return pl.concat([tree, leaves.select(_OUT.keys())], how="vertical_relaxed").cast(_OUT), containers


def _open_stacks(containers: pl.DataFrame) -> pl.DataFrame:
    """Each thread's last range and the ranges enclosing it (``container_parent`` up to the top), in
    the walk's order (``containers`` is in it)."""
    chain = containers.unique(["pid", "tid"], keep="last")
    links = [chain]
    while chain.height:
        chain = containers.filter(pl.col("event_id").is_in(chain.get_column("container_parent").drop_nulls().implode()))
        links.append(chain)
    ids = pl.concat(links).get_column("event_id")
    return containers.filter(pl.col("event_id").is_in(ids.implode()))


_WALK_COLUMNS = ("container_parent", "parent_id", "depth", "op_id", "top_op_id", "leaf_parent", "leaf_depth")
_KIND_CODES = {"op": 0, "annotation": 2}  # other op-tree kinds: 1
_NONE = -(2**63)


def _nest_containers(events: pl.DataFrame, tolerance_ns: int, native: bool = True) -> pl.DataFrame:
    """The range tree per thread (one pass over ranges in start order with a stack)."""
    host = (
        events.filter(pl.col("kind").is_in(_CONTAINER_KINDS) & pl.col("tid").is_not_null())
        .select("event_id", "kind", "ts_ns", "dur_ns", "pid", "tid")
        .sort(["pid", "tid", "ts_ns", pl.col("dur_ns").neg(), "event_id"], nulls_last=True)
        .with_columns(end_ns=pl.col("ts_ns") + pl.col("dur_ns").clip(lower_bound=0))
    )
    inputs = host.select(
        "event_id",
        pl.col("kind").replace_strict(_KIND_CODES, default=1, return_dtype=pl.Int64),
        "ts_ns",
        "end_ns",
        pl.struct("pid", "tid").rank("dense").cast(pl.Int64).alias("thread"),
    )
    if native and _nest_scan is not None and not inputs.null_count().sum_horizontal().item():
        walked = _walk_native(inputs, tolerance_ns)
    else:
        walked = _walk(*(inputs.get_column(c).to_list() for c in inputs.columns), tolerance_ns)
    dtypes = {"depth": pl.Int32, "leaf_depth": pl.Int32}
    return host.with_columns(pl.Series(name, walked[name], dtype=dtypes.get(name, pl.Int64)) for name in _WALK_COLUMNS)


def _walk_native(inputs: pl.DataFrame, tolerance_ns: int) -> dict[str, pl.Series]:
    buffers = [column_bytes(inputs.get_column(c)) for c in inputs.columns]
    walked = _int64_frame(dict(zip(_WALK_COLUMNS, _nest_scan.nest(*buffers, tolerance_ns), strict=True)), inputs.height)
    return {name: walked.get_column(name) for name in _WALK_COLUMNS}


def _int64_frame(columns: dict[str, bytes], n: int) -> pl.DataFrame:
    """Int64 columns handed back by the C code, its ``INT64_MIN`` read as null (it never is a value:
    depths are small and ids run from 0 to the number of events)."""
    arrays = [pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(data)]) for data in columns.values()]
    frame = pl.from_arrow(pa.Table.from_arrays(arrays, names=list(columns)))
    assert isinstance(frame, pl.DataFrame)
    return frame.with_columns(pl.all().replace(_NONE, None))


def _walk(
    ids: list[int], kinds: list[int], starts: list[int], ends: list[int], threads: list[int], tolerance_ns: int
) -> dict[str, list[int | None]]:
    """The reference walk (used where the C walk is not built)."""
    n = len(ids)
    cparent: list[int | None] = [None] * n
    parent: list[int | None] = [None] * n
    depth: list[int | None] = [0] * n
    op_id: list[int | None] = [None] * n
    top_op: list[int | None] = [None] * n
    leaf_parent: list[int | None] = [None] * n
    leaf_depth: list[int | None] = [0] * n
    # stack entry: (end, id, tree parent for children, tree depth for children, nearest op, outermost op,
    # nearest annotation)
    stack: list[tuple[int, int, int | None, int, int | None, int | None, int | None]] = []
    current = None
    for i in range(n):
        if threads[i] != current:
            stack.clear()
            current = threads[i]
        start, end, kind, eid = starts[i], ends[i], kinds[i], ids[i]
        while stack and (stack[-1][0] <= start or end > stack[-1][0] + tolerance_ns):
            stack.pop()
        if stack:
            top = stack[-1]
            cparent[i] = top[1]
            tree_parent, tree_depth, near, outer, note = top[2:]
        else:
            tree_parent, tree_depth, near, outer, note = None, 0, None, None, None
        if kind == _KIND_CODES["annotation"]:
            note = eid
            op_id[i] = near if near is not None else eid
            top_op[i] = outer if outer is not None else eid
            leaf_parent[i], leaf_depth[i] = tree_parent, tree_depth
            stack.append((end, eid, tree_parent, tree_depth, near, outer, note))
            continue
        if kind == _KIND_CODES["op"]:
            near = eid
            outer = outer if outer is not None else eid
        parent[i], depth[i] = tree_parent, tree_depth
        op_id[i] = near if near is not None else note
        top_op[i] = outer if outer is not None else note
        leaf_parent[i], leaf_depth[i] = eid, tree_depth + 1
        stack.append((end, eid, eid, tree_depth + 1, near, outer, note))
    return dict(zip(_WALK_COLUMNS, (cparent, parent, depth, op_id, top_op, leaf_parent, leaf_depth), strict=True))


def _place_leaves(
    events: pl.DataFrame, containers: pl.DataFrame, tolerance_ns: int, native: bool = True
) -> pl.DataFrame:
    """Each runtime call under the innermost range containing it: as-of join, then walk up."""
    leaves = (
        events.filter(pl.col("kind").is_in(_LEAF_KINDS) & pl.col("tid").is_not_null())
        .select("event_id", "pid", "tid", "ts_ns", end_ns=pl.col("ts_ns") + pl.col("dur_ns").clip(lower_bound=0))
        .sort("ts_ns")
    )
    ranges = containers.select(
        pl.col("event_id").alias("cand"),
        "pid",
        "tid",
        pl.col("ts_ns").alias("c_start"),
        pl.col("end_ns").alias("c_end"),
        pl.col("container_parent").alias("c_parent"),
    )
    # the last range on the thread that started at or before the call
    cand = leaves.join_asof(
        ranges.sort("c_start").select("cand", "pid", "tid", "c_start"),
        left_on="ts_ns",
        right_on="c_start",
        by=["pid", "tid"],
        strategy="backward",
        check_sortedness=False,
    ).select("event_id", "ts_ns", "end_ns", "cand")
    complete = not ranges.select("c_end").null_count().item() and not cand.select("end_ns").null_count().item()
    if native and _nest_scan is not None and complete:
        cand = _climb_native(cand, ranges, tolerance_ns)
    else:
        cand = _climb(cand, ranges, tolerance_ns)
    owners = containers.select(
        pl.col("event_id").alias("cand"),
        pl.col("leaf_parent").alias("parent_id"),
        pl.col("leaf_depth").alias("depth"),
        "op_id",
        "top_op_id",
    )
    outside_all = cand.select("event_id", "cand")
    return outside_all.join(owners, on="cand", how="left").with_columns(
        pl.when(pl.col("cand").is_null()).then(pl.lit(0, pl.Int32)).otherwise(pl.col("depth")).alias("depth")
    )


def _climb_native(cand: pl.DataFrame, ranges: pl.DataFrame, tolerance_ns: int) -> pl.DataFrame:
    buffers = [
        column_bytes(cand.get_column("cand").fill_null(_NONE)),
        column_bytes(cand.get_column("ts_ns")),
        column_bytes(cand.get_column("end_ns")),
        *(column_bytes(ranges.get_column(c).fill_null(_NONE)) for c in ("cand", "c_end", "c_parent")),
    ]
    climbed = _int64_frame({"cand": _nest_scan.climb(*buffers, tolerance_ns)}, cand.height)
    return cand.with_columns(climbed.get_column("cand"))


def _climb(cand: pl.DataFrame, ranges: pl.DataFrame, tolerance_ns: int) -> pl.DataFrame:
    """The reference climb: join each call's candidate range, move the calls it does not contain to
    the range's parent, until every call is inside its candidate (or has none)."""
    lookup = ranges.select("cand", "c_end", "c_parent")
    for _ in range(1 + max(64, lookup.height)):
        cand = cand.drop("c_end", "c_parent", strict=False).join(lookup, on="cand", how="left")
        outside = pl.col("cand").is_not_null() & (
            (pl.col("c_end") <= pl.col("ts_ns")) | (pl.col("end_ns") > pl.col("c_end") + tolerance_ns)
        )
        if not cand.select(outside.any()).item():
            break
        cand = cand.with_columns(pl.when(outside).then(pl.col("c_parent")).otherwise(pl.col("cand")).alias("cand"))
    return cand.select("event_id", "ts_ns", "end_ns", "cand")
