"""The recorded dependencies of a timeline: what each host thread and GPU stream waited for.

A host thread is cut into *slices* at every start and end of its ranges (its *nodes*); a slice's recorded
length is CPU time, except where the thread waited:

- a **GPU wait**: a runtime call that blocks the host until GPU work is done (stream, device or event
  synchronise, a synchronous memcpy, ``cudaFree``, a copy of pageable memory that waits for its own
  copy) or until the launch queue has room (a launch overlapping a range where the launch queue was full). The
  call ends when the awaited GPU work ends (for a full queue: when the latest GPU event before it starts
  or ends), plus the wake-up latency recorded; its own CPU time is the call's typical non-waiting length.
- a **thread wait**: an idle gap of a thread (no op or runtime call open for at least
  ``GAP_NS``) that ends after another thread's activity inside the gap: the autograd thread starting the
  backward after the main thread called it, the main thread resuming when the backward is done. The main
  thread's gaps count only where the other thread's activity spans at least ``COVER`` of the gap (else
  they are its own Python time); the other threads' gaps are always waits on the latest activity inside.

GPU work starts no earlier than its launch call's start plus a latency, its stream predecessor's end
plus a gap, and (where neither explains its recorded start) the end of the work on another stream of the
device that ended just before it (an event wait). Of the launch and the predecessor, the constraint that
bound in the trace keeps its recorded value and the other one is capped at its typical value, so that
the unchanged replay reproduces the recorded start exactly and a changed one moves work as the trace's
constraints say. GPU work without a captured launch (queued before the profile) keeps its recorded start.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceq._utils.column_buffers import column_bytes
from traceq.analysis.replay.timeline import Timeline
from traceq.schema import OP_TREE_KINDS

#: Idle time of a host thread counted as a possible wait on another thread, ns.
GAP_NS = 50_000
#: The main thread's gap is a wait on another thread where that thread's activity spans this share of it.
COVER = 0.5
#: Clock tolerance between host and GPU timestamps, ns.
TOL_NS = 2_000
#: Launch latencies (and, over 10, stream gaps) above this are waits, not typical values, ns.
LATENCY_CAP_NS = 100_000
#: Runtime calls that block the host until the device (or a stream, or an event) is done.
SYNC_RE = (
    r"^(cuda|cu|hip)(Stream|Device|Ctx|Event|Thread)Synchroni[sz]e|^cudaMemcpy(2D|3D)?(ToSymbol|FromSymbol)?$"
    r"|^cuMemcpy[DH]to[DH]$|^hipMemcpy$"
)
#: Runtime calls that synchronise the device implicitly (freeing device memory).
FREE_RE = r"^(cuda|hip)Free$|^cuMemFree"


@dataclass
class Graph:
    """A timeline's host slices, waits and GPU constraints (see the module doc).

    ``nodes``: one row per host node, threads in blocks, in time order within each: ``thread``, ``T``
    (recorded time), ``row`` (host event), ``kind`` (its kind), ``start``, ``L`` (length of the slice to the
    thread's next node), ``W0`` (its CPU time: ``L`` less any wait), and the slice's open counts (``act``,
    ``rt``, ``op``, ``py``).
    ``barriers``: one row per wait: ``node`` (where the thread resumes), ``type`` (``gpu_end``,
    ``gpu_start`` or ``thread``), ``target`` (GPU item or node), ``post`` (recorded latency after the
    target), ``call_row`` (the waiting call; null for thread waits), ``reason``, ``slice`` and ``wait_ns``
    (the slice whose recorded length includes the wait, and how much of it was waiting).
    ``items``: one row per GPU event: ``lane``, ``S``/``E``/``d``, ``launch_node``, ``lat``, ``gap``,
    ``fixed`` (recorded start of unlaunched work), ``dep``/``dep_gap`` (event wait), ``step``.
    ``order``: the loop order of items (``i >= 0``) and barriers (``-b - 1``) by recorded time (Int64).
    ``derived``: columns derived from these that every replay or scenario of the graph reads, each made once
    (by :func:`derived`).
    """

    timeline: Timeline
    nodes: pl.DataFrame
    first_node: list[int]
    barriers: pl.DataFrame
    items: pl.DataFrame
    order: pl.Series
    step_nodes: pl.DataFrame
    lat_typ: float
    gap_typ: float
    derived: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)


def derived(graph: Graph, key: Any, make: Callable[[], Any]) -> Any:
    """What ``make()`` derives from ``graph`` under ``key``, made on first use and kept with the graph."""
    if key not in graph.derived:
        graph.derived[key] = make()
    return graph.derived[key]


def build_graph(tl: Timeline) -> Graph:
    """The graph of ``tl`` (see the module doc)."""
    nodes = _nodes(tl.host)
    first = nodes.group_by("thread").agg(pl.col("node").min()).sort("thread")
    first_node = [0] * (len(tl.threads) + 1)
    for t, n in first.iter_rows():
        first_node[t] = n
    first_node[-1] = nodes.height
    start_of_row, end_of_row = (_node_of_row(nodes, start) for start in (True, False))
    items, lat_typ, gap_typ = _items(tl, start_of_row, nodes)
    barriers = _barriers(tl, nodes, end_of_row, items)
    nodes = _cpu_time(nodes, barriers)
    order = _order(items, barriers, nodes)
    step_nodes = _step_nodes(tl.steps, start_of_row, end_of_row)
    return Graph(tl, nodes, first_node, barriers, items, order, step_nodes, lat_typ, gap_typ)


def _nodes(host: pl.DataFrame) -> pl.DataFrame:
    """Every start and end of the host ranges, in order within each thread, with each slice's state. Only
    what the graph and the scenarios read is kept (no names, causes or ids: two rows per host range)."""
    base = host.select("row", "thread", "kind", "ts", "end", "event_id")
    starts = base.with_columns(T=pl.col("ts"), start=pl.lit(True), phase=pl.lit(1), key=pl.col("event_id"))
    ends = base.with_columns(
        T=pl.col("end"),
        start=pl.lit(False),
        phase=pl.when(pl.col("end") > pl.col("ts")).then(0).otherwise(2),
        key=-pl.col("event_id"),
    )
    kind, sign = pl.col("kind"), pl.when(pl.col("start")).then(1).otherwise(-1)
    opens = {  # what each node opens (+1) or closes (-1): made after the sort, which then moves fewer columns
        "act": kind.is_in([*OP_TREE_KINDS, "runtime"]),
        "rt": kind == "runtime",
        "op": kind.is_in(list(OP_TREE_KINDS)),
        "py": kind == "python",
    }
    # threads come in blocks, each range's start and end in its thread's: a running count over all nodes
    # is back at 0 at every block's end, so it is each thread's own (a window per thread costs twice as much)
    return (
        _in_node_order(starts.drop("ts", "end", "event_id"), ends.drop("ts", "end", "event_id"))
        .drop("phase", "key")
        .with_row_index("node")
        .with_columns(pl.col("node").cast(pl.Int64))
        .with_columns(
            *((opened.cast(pl.Int32) * sign).cum_sum().alias(c) for c, opened in opens.items()),
            L=pl.when(same_thread(-1)).then(pl.col("T").shift(-1) - pl.col("T")).otherwise(0).cast(pl.Float64),
        )
        .select("node", "row", "thread", "kind", *opens, "T", "start", "L")
    )


def same_thread(n: int) -> pl.Expr:
    """Over a graph's nodes: whether the node ``n`` rows away is of the same thread (false past either
    end). Nodes come in blocks by thread, so this is a window over the thread without grouping by it."""
    return (pl.col("thread").shift(n) == pl.col("thread")).fill_null(False)


def _in_node_order(starts: pl.DataFrame, ends: pl.DataFrame) -> pl.DataFrame:
    """The ``starts`` and ``ends`` of host ranges (each in the ranges' order) sorted by thread, time ``T``,
    ``phase`` and ``key``. A timeline's host ranges come in id order, so that starts are in key order, and
    ends reversed too (their key is the id negated): laid out by phase, they need only a stable sort by
    thread and time, one integer where both fit (as in any trace shorter than about 4.8 hours), a third
    faster than a sort by two integers on millions of nodes; otherwise by the four columns."""
    backwards = ends.reverse()
    phase = pl.col("phase")
    nodes = pl.concat([backwards.filter(phase == 0), starts, backwards.filter(phase == 2)])
    fits = starts["key"].is_sorted() and nodes.select(
        (pl.col("thread").max() < 1 << 18) & (pl.col("T").min() >= 0) & (pl.col("T").max() < 1 << 44)
    ).item()  # fmt: skip
    if not fits:
        return nodes.sort("thread", "T", "phase", "key")
    order = nodes.select(pl.arg_sort_by(pl.col("thread") * (1 << 44) + pl.col("T"), maintain_order=True))
    return nodes.gather(order.to_series())


def _node_of_row(nodes: pl.DataFrame, start: bool) -> pl.Series:
    """The start node (``start``) or the end node of each host row, by row: every host row has one of each,
    and a row's number is its position in the timeline's host frame (looked up by position, not joined)."""
    mask = nodes["start"] if start else ~nodes["start"]
    rows = nodes["row"].filter(mask)
    return pl.zeros(rows.len(), pl.Int64, eager=True).scatter(rows, nodes["node"].filter(mask))


def _step_nodes(steps: pl.DataFrame, start_of_row: pl.Series, end_of_row: pl.Series) -> pl.DataFrame:
    """Each step's ``start_node`` and ``end_node``: its host range's start and end, or for a step between two
    host ranges (``after_row``, ``until_row``: see the timeline) their ends; null for a step fixed in time."""
    starts, ends = pl.lit(start_of_row), pl.lit(end_of_row)
    return steps.with_columns(
        start_node=pl.coalesce(starts.gather(pl.col("row")), ends.gather(pl.col("after_row"))),
        end_node=pl.coalesce(ends.gather(pl.col("row")), ends.gather(pl.col("until_row"))),
    ).sort("ts")


def _items(tl: Timeline, start_of_row: pl.Series, nodes: pl.DataFrame) -> tuple[pl.DataFrame, float, float]:
    """GPU events with their launch node, latency, gap after their stream predecessor and event waits."""
    # a launch's start node by its row, and the node's time by the node (a node's id is its position)
    # the numbers only: the text columns are the timeline's own, whose rows are in item order already
    text = ["event_id", "kind", "name", "kernel_class"]
    g = (
        tl.gpu.drop(text)
        .with_columns(launch_node=pl.lit(start_of_row).gather(pl.col("launch_row")))
        .with_columns(S=pl.col("ts").cast(pl.Float64), E=pl.col("end").cast(pl.Float64))
        .with_columns(d=pl.col("E") - pl.col("S"), P=pl.col("E").shift(1).over("lane", order_by="item"))
        .with_columns(LT=pl.lit(nodes["T"]).gather(pl.col("launch_node")))
    )
    g = g.with_columns(xL=pl.col("S") - pl.col("LT"), xP=pl.col("S") - pl.col("P"))
    # typical latency where the launch bound the start, typical gap where the predecessor did (each under
    # LATENCY_CAP_NS: longer ones are waits for something else)
    launch_bound = g.select(
        pl.col("xL").filter(
            pl.col("xL").is_not_null()
            & (pl.col("P").is_null() | (pl.col("xL") <= pl.col("xP")))
            & (pl.col("xL") < LATENCY_CAP_NS)
        )
    )["xL"]
    lat_typ = float(launch_bound.median()) if launch_bound.len() else 5_000.0
    pred_bound = g.select(
        pl.col("xP").filter(
            pl.col("xP").is_not_null()
            & (pl.col("xL").is_null() | (pl.col("xP") < pl.col("xL")))
            & (pl.col("xP") < LATENCY_CAP_NS / 10)
        )
    )["xP"]
    gap_typ = float(pred_bound.clip(lower_bound=0).median()) if pred_bound.len() else 1_000.0
    lat_cap, gap_cap = lat_typ, max(gap_typ, 0.0)
    # the later of launch and predecessor bound the start: it keeps its recorded latency, the other is capped
    launch_binds = pl.col("P").is_null() | (pl.col("xL").is_not_null() & (pl.col("xL") <= pl.col("xP")))
    g = g.with_columns(
        lat=pl.when(launch_binds).then(pl.col("xL")).otherwise(pl.min_horizontal("xL", pl.lit(lat_cap))),
        gap=pl.when(launch_binds).then(pl.min_horizontal("xP", pl.lit(gap_cap))).otherwise(pl.col("xP")),
        fixed=pl.when(pl.col("launch_node").is_null()).then(pl.col("S")),
    )
    g = _event_waits(g, lat_cap, gap_cap)
    cols = [
        "item",
        "event_id",
        "kind",
        "name",
        "lane",
        "device",
        "S",
        "E",
        "d",
        "launch_node",
        "launch_row",
        "launch_thread",
        "lat",
        "gap",
        "fixed",
        "dep",
        "dep_gap",
        "step",
        "kernel_class",
    ]
    items = g.select(c for c in cols if c not in text).sort("item").hstack(tl.gpu.select(text))
    return items.select(cols), lat_typ, gap_typ


def _event_waits(g: pl.DataFrame, lat_cap: float, gap_cap: float) -> pl.DataFrame:
    """Work whose recorded start neither its launch nor its predecessor explains, and that started within
    ``TOL_NS`` * 5 of the end of work on another stream of its device: a wait on that work (an event)."""
    slow = g.filter(
        (pl.col("xL").is_null() | (pl.col("xL") > lat_cap + 5_000))
        & (pl.col("xP").is_null() | (pl.col("xP") > gap_cap + 5_000))
        & pl.col("launch_node").is_not_null()
    ).select("item", "lane", "device", "S")
    empty = g.with_columns(dep=pl.lit(None, pl.Int64), dep_gap=pl.lit(None, pl.Float64))
    if slow.height == 0 or g["lane"].n_unique() < 2:
        return empty
    ends = g.select(pl.col("item").alias("dep"), pl.col("lane").alias("dep_lane"), "device", pl.col("E").alias("dE"))
    found = slow.sort("S").join_asof(
        ends.sort("dE"), left_on="S", right_on="dE", by="device", strategy="backward", check_sortedness=False
    )
    found = found.filter((pl.col("dep_lane") != pl.col("lane")) & (pl.col("S") - pl.col("dE") <= 5 * TOL_NS)).select(
        "item", "dep", dep_gap=pl.col("S") - pl.col("dE")
    )
    g = g.join(found, on="item", how="left")
    has = pl.col("dep").is_not_null()
    return g.with_columns(
        lat=pl.when(has).then(pl.min_horizontal("xL", pl.lit(lat_cap))).otherwise(pl.col("lat")),
        gap=pl.when(has).then(pl.min_horizontal("xP", pl.lit(gap_cap))).otherwise(pl.col("gap")),
    )


def _barriers(tl: Timeline, nodes: pl.DataFrame, end_of_row: pl.Series, items: pl.DataFrame) -> pl.DataFrame:
    cols = {
        "node": pl.Int64,
        "thread": pl.Int64,
        "type": pl.String,
        "target": pl.Int64,
        "post": pl.Float64,
        "call_row": pl.Int64,
        "reason": pl.String,
        "slice": pl.Int64,
        "last_slice": pl.Int64,
        "wait_ns": pl.Float64,
        "w0": pl.Float64,
        "w1": pl.Float64,
    }
    parts = [_gpu_waits(tl, end_of_row, items), _thread_waits(tl, nodes)]
    parts = [p.select([pl.col(c).cast(t) for c, t in cols.items()]) for p in parts if p.height]
    if not parts:
        return pl.DataFrame(schema=cols)
    return pl.concat(parts).sort("node").unique("node", keep="first", maintain_order=True)


def _gpu_waits(tl: Timeline, end_of_row: pl.Series, items: pl.DataFrame) -> pl.DataFrame:
    """Runtime calls that waited for GPU work, each with the GPU event it waited for (module doc)."""
    # the runtime calls without their names (millions in a long capture): what the names say, as flags
    name = pl.col("name")
    rt = tl.host.filter(pl.col("kind") == "runtime").select(
        "row", "thread", "ts", "end", sync=name.str.contains(SYNC_RE), free=name.str.contains(FREE_RE)
    )
    own = (  # each launch's first GPU event (items are in item order)
        items.select("launch_row", "item", "name")
        .filter(pl.col("launch_row").is_not_null())
        .unique("launch_row", keep="first", maintain_order=True)
        .select("launch_row", own_item="item", own_pageable=pl.col("name").str.contains("(?i)pageable"))
    )
    rt = rt.join(own.rename({"launch_row": "row"}), on="row", how="left")
    reason = (
        pl.when(pl.col("sync"))
        .then(pl.lit("sync"))
        .when(pl.col("free"))
        .then(pl.lit("free"))
        .when(pl.col("own_pageable").fill_null(False))
        .then(pl.lit("pageable"))
    )
    rt = rt.with_columns(reason=reason)
    if tl.waits.height:  # launches overlapping a full launch queue's range waited for room in it
        full = tl.waits.sort("ts")
        hit = (
            rt.filter(pl.col("own_item").is_not_null() & pl.col("reason").is_null())
            .sort("end")
            .join_asof(
                full.rename({"ts": "w_ts", "end": "w_end"}), left_on="end", right_on="w_end", strategy="backward"
            )
        )
        hit = hit.filter(pl.col("w_end") >= pl.col("ts")).select("row", queue=pl.lit(True))
        rt = rt.join(hit, on="row", how="left").with_columns(
            reason=pl.when(pl.col("queue").fill_null(False)).then(pl.lit("queue_full")).otherwise(pl.col("reason"))
        )
    calls = rt.filter(pl.col("reason").is_not_null())
    if calls.height == 0:
        return pl.DataFrame()
    # GPU events by end (and by start) with the start of their launch call (-inf: queued before the profile;
    # a host row's number is its position in the timeline's host frame)
    it = items.with_columns(lts=pl.lit(tl.host["ts"]).gather(pl.col("launch_row")).fill_null(float("-inf")))
    by_end = it.sort("E")
    ends, end_lts = packed(by_end["E"], "d"), packed(by_end["lts"], "d")
    end_items, end_rows = packed(by_end["item"], "q"), packed(by_end["launch_row"].fill_null(-1), "q")
    del by_end
    by_start = it.sort("S")
    starts, start_lts = packed(by_start["S"], "d"), packed(by_start["lts"], "d")
    start_items = packed(by_start["item"], "q")
    del by_start
    out = []
    for row, thread, ts, end, reason, own_item in calls.select(
        "row", "thread", "ts", "end", "reason", "own_item"
    ).iter_rows():
        kind, target, t_target = "gpu_end", None, None
        if reason == "pageable" and own_item is not None and it["E"][own_item] <= end + TOL_NS:
            target, t_target = own_item, it["E"][own_item]
        else:
            j = bisect.bisect_right(ends, end + TOL_NS) - 1
            for _ in range(256):  # the latest-ending work launched before the call (or by it)
                if j < 0 or end_lts[j] < ts or end_rows[j] == row:
                    break
                j -= 1
            if j >= 0:
                target, t_target = end_items[j], ends[j]
            if reason == "queue_full":
                k = bisect.bisect_right(starts, end + TOL_NS) - 1
                while k >= 0 and start_lts[k] >= ts:
                    k -= 1
                if k >= 0 and (t_target is None or starts[k] > t_target):
                    kind, target, t_target = "gpu_start", start_items[k], starts[k]
        if target is None:
            continue
        out.append((row, thread, kind, target, t_target, ts, end, reason))
    if not out:
        return pl.DataFrame()
    w = pl.DataFrame(
        out, schema=["call_row", "thread", "type", "target", "t_target", "ts", "end", "reason"], orient="row"
    )
    w = w.with_columns(waited=pl.col("t_target") > pl.col("ts"), dur=(pl.col("end") - pl.col("ts")).cast(pl.Float64))
    w = w.with_columns(name=pl.lit(tl.host["name"]).gather(pl.col("call_row")))
    # a call's own CPU time: the typical length of the same call where it did not wait
    typical = w.filter(~pl.col("waited")).group_by("name").agg(own=pl.col("dur").quantile(0.1))
    w = w.join(typical, on="name", how="left").with_columns(
        own=pl.min_horizontal(pl.col("own").fill_null(pl.col("dur").min().over("name")), pl.col("dur"))
    )
    post_typ = w.filter(pl.col("waited")).select((pl.col("end") - pl.col("t_target")).median()).item()
    post_typ = float(post_typ) if post_typ is not None else 5_000.0
    w = w.with_columns(
        post=pl.when(pl.col("waited"))
        .then(pl.col("end") - pl.col("t_target"))
        .otherwise(pl.min_horizontal(pl.col("end") - pl.col("t_target"), pl.lit(post_typ))),
        wait_ns=pl.when(pl.col("waited")).then(pl.col("dur") - pl.col("own")).otherwise(0.0),
    )
    return w.with_columns(node=pl.lit(end_of_row).gather(pl.col("call_row"))).with_columns(
        slice=pl.col("node") - 1,
        last_slice=pl.col("node") - 1,
        w0=pl.lit(None, pl.Float64),
        w1=pl.lit(None, pl.Float64),
    )


def packed(values: pl.Series, typecode: str) -> array[Any]:
    """``values`` (no nulls) as a Python :class:`array.array` of ``typecode`` (``d``: float, ``q``: int):
    8 bytes per value where a list holds an object per value; copied from the column's buffer, without a
    Python value per element."""
    out = array(typecode)
    out.frombytes(column_bytes(values, pl.Float64 if typecode == "d" else pl.Int64))
    return out


def _thread_waits(tl: Timeline, nodes: pl.DataFrame) -> pl.DataFrame:
    """Idle gaps of host threads that ended after another thread's activity inside them (module doc); a
    thread other than the main one also waits, before its first node, on the latest activity before it.

    A wait's ``w0``/``w1`` bound the time of the gap that was waiting: for the main thread, from the other
    thread's first activity in the gap to its last (before it, the main thread was still working, e.g.
    in Python calling the backward); the thread resumes at its first node after ``w1``."""
    if len(tl.threads) < 2:
        return pl.DataFrame()
    act_nodes = nodes.filter(pl.col("kind").is_in([*OP_TREE_KINDS, "runtime", "python"])).select(
        pl.col("node").alias("target"), pl.col("thread").alias("t_thread"), pl.col("T").cast(pl.Float64).alias("tT")
    )
    gaps = idle_gaps(nodes)
    firsts = nodes.group_by("thread").agg(pl.col("T").min().cast(pl.Float64))
    firsts = firsts.filter(pl.col("thread") != tl.main_thread).select(
        slice=pl.lit(-1, pl.Int64), last_slice=pl.lit(-1, pl.Int64), thread="thread", g0=pl.lit(float("-inf")), T="T"
    )
    gaps = pl.concat([gaps, firsts], how="vertical_relaxed")
    # a node's index by time on its thread (nodes are in time order within each): where it resumes after a wait
    by_time = nodes.select("thread", rT=pl.col("T").cast(pl.Float64), node="node")
    out = []
    for thread in gaps["thread"].unique().to_list():
        mine = gaps.filter(pl.col("thread") == thread).sort("T")
        other = act_nodes.filter(pl.col("t_thread") != thread).sort("tT")
        if other.height == 0:
            continue
        found = mine.join_asof(other, left_on="T", right_on="tT", strategy="backward")
        first_in = other.select(pl.col("tT").alias("t_first"))
        found = found.sort("g0").join_asof(first_in, left_on="g0", right_on="t_first", strategy="forward")
        ok = (pl.col("tT") > pl.col("g0")) & pl.col("target").is_not_null()
        if thread == tl.main_thread:  # the other thread was busy over most of the gap (a handoff)
            ok = ok & (pl.col("tT") - pl.col("t_first") >= COVER * (pl.col("T") - pl.col("g0")))
            found = found.with_columns(w0=pl.col("t_first"))
        else:  # an idle worker thread waits all through its gap
            found = found.with_columns(w0=pl.col("g0"))
        found = (
            found.filter(ok)
            .sort("tT")
            .join_asof(
                by_time.filter(pl.col("thread") == thread).drop("thread").set_sorted("rT"),
                left_on="tT",
                right_on="rT",
                strategy="forward",
            )
        )
        out.append(found)
    if not out:
        return pl.DataFrame()
    w = pl.concat(out)
    return w.select(
        "node",
        "thread",
        "target",
        "slice",
        "last_slice",
        "w0",
        w1="tT",
        type=pl.lit("thread"),
        post=pl.col("rT") - pl.col("tT"),
        call_row=pl.lit(None, pl.Int64),
        reason=pl.lit("handoff"),
        wait_ns=pl.lit(None, pl.Float64),
    )


def idle_gaps(nodes: pl.DataFrame) -> pl.DataFrame:
    """A graph's idle gaps of its host threads that may be waits on another thread (module doc): runs of
    consecutive slices with nothing open but Python functions, not crossing a range of the thread's own (a
    step, an annotation), lasting at least :data:`GAP_NS`. One row per gap: ``slice`` and ``last_slice``
    (its first and last node), ``thread``, ``g0`` and ``T`` (its start and end time)."""
    idle = nodes.select("node", "thread", "T", "L", "kind", idle=(pl.col("act") == 0) & same_thread(-1))
    boundary = (
        (pl.col("idle") != pl.col("idle").shift(1)) | ~same_thread(1) | pl.col("kind").is_in(["annotation", "step"])
    )
    idle = idle.with_columns(run=boundary.fill_null(True).cum_sum()).filter(pl.col("idle"))
    # a run's nodes are consecutive, in time order: its first starts it, its last's slice (to the next node of
    # its thread, whose times only grow) ends it
    first, last = pl.col("run") != pl.col("run").shift(1), pl.col("run") != pl.col("run").shift(-1)
    return (
        pl.concat(
            [
                idle.filter(first.fill_null(True)).select("thread", slice="node", g0=pl.col("T").cast(pl.Float64)),
                idle.filter(last.fill_null(True)).select(last_slice="node", T=pl.col("T") + pl.col("L")),
            ],
            how="horizontal",
        )
        .filter(pl.col("T") - pl.col("g0") >= GAP_NS)
        .select("slice", "last_slice", "thread", "g0", "T")
    )


def _cpu_time(nodes: pl.DataFrame, barriers: pl.DataFrame) -> pl.DataFrame:
    """``W0``: each slice's CPU time, its recorded length less the waiting in it (a GPU wait's ``wait_ns`` in
    its call's last slice; the part of each slice of a thread wait inside ``w0``..``w1``)."""
    gpu = barriers.filter(pl.col("type") != "thread").select(pl.col("slice").alias("node"), "wait_ns")
    spans = (
        barriers.filter((pl.col("type") == "thread") & (pl.col("slice") >= 0))
        .select(node=pl.int_ranges("slice", pl.col("last_slice") + 1), w0="w0", w1="w1")
        .explode("node")
    )
    spans = spans.join(nodes.select("node", "T", "L"), on="node").select(
        "node",
        wait_ns=(pl.min_horizontal(pl.col("T") + pl.col("L"), "w1") - pl.max_horizontal(pl.col("T"), "w0")).clip(
            lower_bound=0.0
        ),
    )
    waits = pl.concat([gpu, spans], how="vertical_relaxed").group_by("node").agg(pl.col("wait_ns").sum())
    nodes = nodes.join(waits, on="node", how="left").sort("node")
    return nodes.with_columns(W0=(pl.col("L") - pl.col("wait_ns").fill_null(0.0)).clip(lower_bound=0.0)).drop("wait_ns")


def _order(items: pl.DataFrame, barriers: pl.DataFrame, nodes: pl.DataFrame) -> pl.Series:
    """Items (by recorded start) and barriers (by recorded resume time + tolerance), merged: the loop order."""
    T = nodes["T"]
    keyed = [
        items.select(key=pl.col("S"), phase=pl.lit(0), k=pl.col("item"), code=pl.col("item")),
        barriers.with_row_index("b").select(
            key=T.gather(barriers["node"]).cast(pl.Float64) + TOL_NS if barriers.height else pl.lit(0.0),
            phase=pl.lit(1),
            k=pl.col("b").cast(pl.Int64),
            code=-pl.col("b").cast(pl.Int64) - 1,
        ),
    ]
    # ties: items first, then each kind in its own order (a thread's barriers in node order)
    return pl.concat(keyed, how="vertical_relaxed").sort("key", "phase", "k")["code"].cast(pl.Int64)
