"""The replay: host threads issue their calls in recorded order, GPU work runs when its constraints allow.

A :class:`Scenario` says how long each host slice's CPU time is (``W``), which waits still wait, which GPU
work is left out and how launch latencies change. The replay then computes, for every host node and GPU
event, its time under the scenario:

- on a thread, a node comes ``W`` of the slice before it after the previous node, or later where the
  thread waits (a barrier): at the awaited GPU event's end (or start) or the other thread's node, plus
  the recorded latency after it. Between barriers a thread's times are a cumulative sum, so each thread
  keeps one offset per barrier and only barriers and GPU events are visited one by one;
- GPU work starts at the latest of its launch node plus its latency, its stream predecessor's end plus
  its gap, and the end of the work it waited for on another stream (plus the recorded gap).

Barriers and GPU events are visited in recorded time order, which is an order the constraints respect
(everything a barrier or a GPU event depends on was recorded before it). The windows of the result are
``_windows``'s: a step ends when its host range has ended and the GPU work it launched is done.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise

import polars as pl

from traceq._utils.column_buffers import column_bytes, float_series
from traceq._utils.native import REPLAY, load
from traceq.analysis.replay.graph import Graph, derived
from traceq.analysis.replay.scenario import Scenario

_NEG = float("-inf")
#: A wait's type as the visit codes it.
_WAIT_TYPES = {"thread": 0, "gpu_end": 1, "gpu_start": 2}
#: The visit's GPU-event and wait columns with their types, in the C visit's order (``_replay_walk.c``).
_I, _F = pl.Int64, pl.Float64
_ITEM_COLUMNS = {"launch_thread": _I, "launch_base": _F, "launch_epoch": _I, "fixed": _F, "lane": _I, "d": _F,
                 "gap": _F, "dep": _I, "dep_gap": _F}  # fmt: skip
_BARRIER_COLUMNS = {"position": _I, "type": _I, "target": _I, "post": _F, "thread": _I, "C": _F, "target_C": _F,
                    "target_thread": _I, "target_epoch": _I}  # fmt: skip
#: The C visit (None where it was not built: the Python loop, :func:`_visit`).
_replay_walk = load(REPLAY)


@dataclass
class Replay:
    """A replay's times (rebased ns like the timeline): ``node_t`` per host node, ``start``/``end`` per GPU
    event (a dropped event has zero length at its predecessor's end; kept as arrays of floats, 8 bytes an
    event), and ``windows`` (``step``, ``win_start``, ``win_end``, ``ms``, ``host_start``, ``host_end``,
    ``device_end``)."""

    scenario: Scenario
    node_t: pl.Series
    start: Sequence[float]
    end: Sequence[float]
    windows: pl.DataFrame

    @property
    def step_ms(self) -> float:
        """Mean window length, ms: the step time."""
        return float(self.windows["ms"].mean()) if self.windows.height else float("nan")


def replay(graph: Graph, scenario: Scenario | None = None, native: bool = True) -> Replay:
    """Replay ``graph`` under ``scenario`` (the trace unchanged by default); ``native=False``: by the Python
    loop, where the C visit was built too."""
    sc = scenario or Scenario()
    nodes, items, barriers = graph.nodes, graph.items, graph.barriers
    W = (sc.W if sc.W is not None else nodes["W0"]).cast(pl.Float64)
    thread = nodes["thread"]
    # C: a node's time from its thread's first node plus the CPU time of the slices before it (each thread's
    # nodes are one block: summed block by block, the same sums as a window over the thread, at a third of its cost)
    bounds = sorted(set(graph.first_node))  # (a thread without nodes has none of its own)
    blocks = [W.slice(a, b - a).cum_sum() for a, b in pairwise(bounds)]
    running = pl.concat(blocks, rechunk=True) if blocks else W
    C = running - W + derived(graph, "thread_start", lambda: _thread_start(graph))
    on = sc.barrier_on if sc.barrier_on is not None else [True] * barriers.height
    active = barriers.with_row_index("b").filter(pl.Series(on, dtype=pl.Boolean)) if barriers.height else barriers
    # enabled barriers in node order: their positions, and the first position of each thread's
    b_node = active["node"] if active.height else pl.Series("node", [], pl.Int64)
    n_threads = len(graph.first_node) - 1
    per_thread = [0] * n_threads
    for t, count in active.group_by("thread").len().iter_rows() if active.height else ():
        per_thread[t] = count
    base = [0, *accumulate(per_thread)]

    def epochs(node_idx: pl.Series) -> pl.Series:
        """For each node, the position after the last enabled barrier of its thread at or before it (or the
        thread's first position: no barrier yet)."""
        return b_node.search_sorted(node_idx, side="right").cast(pl.Int64)

    # GPU events: launch time bases and epochs of their launch nodes (launch thread -1: no captured launch)
    has_launch = items["launch_node"].is_not_null()
    ln = items["launch_node"].fill_null(0)
    lat = items["lat"].fill_null(0.0)
    if sc.lat_shift is not None:
        lat = lat + pl.Series(sc.lat_shift, dtype=pl.Float64)
    item_columns = _typed(
        _ITEM_COLUMNS,
        {
            "launch_thread": pl.select(pl.when(has_launch).then(thread.gather(ln)).otherwise(-1)).to_series(),
            "launch_base": C.gather(ln) + lat,
            "launch_epoch": epochs(ln),
            "fixed": items["fixed"].cast(pl.Float64).fill_null(0.0),
            "lane": items["lane"],
            "d": items["d"],
            "gap": items["gap"].cast(pl.Float64).fill_null(_NEG),
            "dep": items["dep"].fill_null(-1),
            "dep_gap": items["dep_gap"].cast(pl.Float64).fill_null(0.0),
        },
    )
    dropped = sc.dropped if sc.dropped is not None else [False] * items.height
    # waits: their position among the enabled ones (-1: disabled), what they wait for
    kind = barriers["type"].replace_strict(_WAIT_TYPES, return_dtype=pl.Int64)
    on_thread = pl.select(pl.when(kind == _WAIT_TYPES["thread"]).then(barriers["target"]).otherwise(0)).to_series()
    position = pl.repeat(-1, barriers.height, dtype=pl.Int64, eager=True)
    if active.height:
        position = position.scatter(active["b"], pl.int_range(active.height, dtype=pl.Int64, eager=True))
    barrier_columns = _typed(
        _BARRIER_COLUMNS,
        {
            "position": position,
            "type": kind,
            "target": barriers["target"].fill_null(-1),
            "post": barriers["post"].cast(pl.Float64).fill_null(0.0),
            "thread": barriers["thread"],
            "C": C.gather(barriers["node"]),
            "target_C": C.gather(on_thread),
            "target_thread": thread.gather(on_thread),
            "target_epoch": epochs(on_thread),
        },
    )
    if native and _replay_walk is not None:
        start, end, off = _visit_native(graph.order, item_columns, dropped, barrier_columns, base)
    else:
        start, end, off = _visit(
            graph.order.to_list(),
            {name: column.to_list() for name, column in item_columns.items()},
            dropped,
            {name: column.to_list() for name, column in barrier_columns.items()},
            base,
        )

    # every node's time: C plus its thread's offset at its epoch (with every wait enabled, the same epochs
    # for every scenario)
    def node_epochs() -> tuple[pl.Series, pl.Series]:
        return _node_epochs(nodes.height, thread, b_node, base)

    waited, pos = node_epochs() if sc.barrier_on is not None else derived(graph, "node_epochs", node_epochs)
    offs = float_series(off) if len(off) else pl.Series([0.0], dtype=pl.Float64)
    node_t = pl.select(C + pl.when(waited).then(offs.gather(pos)).otherwise(0.0)).to_series()
    windows = _windows(graph, node_t, start, end, dropped)
    return Replay(sc, node_t, start, end, windows)


def _thread_start(graph: Graph) -> pl.Series:
    """Each node's thread's start: its first node's recorded time, or far back for a thread that waits
    before its first node (it starts when that wait says)."""
    nodes = graph.nodes
    first_T = nodes["T"].gather(pl.Series(graph.first_node[:-1])).cast(pl.Float64)
    floating = set(graph.barriers.filter(pl.col("node").is_in(graph.first_node[:-1]))["thread"].to_list())
    if floating:
        early = float(nodes["T"].min()) - 1e12
        first_T = pl.Series([early if t in floating else v for t, v in enumerate(first_T.to_list())])
    return first_T.gather(nodes["thread"])


def _node_epochs(n_nodes: int, thread: pl.Series, b_node: pl.Series, base: list[int]) -> tuple[pl.Series, pl.Series]:
    """For every node, in node order: whether an enabled wait of its thread came at or before it, and the
    position of the last such wait (0 where none): a running count of the waits' nodes, one wait at most
    per node (``b_node``, in node order), against the thread's first position (``base``)."""
    ep_all = pl.zeros(n_nodes, pl.Int64, eager=True)
    if b_node.len():
        ep_all = ep_all.scatter(b_node, 1).cum_sum()
    pos_all = ep_all - 1
    own_first = pl.Series(base[:-1], dtype=pl.Int64).gather(thread)
    return pos_all >= own_first, pos_all.clip(lower_bound=0)


def _typed(kinds: dict[str, type[pl.DataType]], columns: dict[str, pl.Series]) -> dict[str, pl.Series]:
    """``columns`` cast to the types of ``kinds``, in its order: both visits read the same values."""
    return {name: columns[name].cast(kind) for name, kind in kinds.items()}


def _visit(
    order: list[int],
    items: dict[str, list],
    dropped: Sequence[bool],
    barriers: dict[str, list],
    base: list[int],
) -> tuple[array, array, array]:
    """GPU events and waits in loop order (the reference of the C visit, which gives the same times): each
    GPU event's start and end, and each enabled wait's thread offset after it."""
    launch_th, launch_base, launch_ep = items["launch_thread"], items["launch_base"], items["launch_epoch"]
    fixed, lane, d, gap, dep, dep_gap = (items[k] for k in ("fixed", "lane", "d", "gap", "dep", "dep_gap"))
    b_pos, bt, b_target, b_post = barriers["position"], barriers["type"], barriers["target"], barriers["post"]
    b_th, b_C = barriers["thread"], barriers["C"]
    tgt_C, tgt_th, tgt_ep = barriers["target_C"], barriers["target_thread"], barriers["target_epoch"]
    n_items = len(lane)
    start = [0.0] * n_items
    end = [0.0] * n_items
    lane_end = [_NEG] * (max(lane) + 1 if n_items else 0)
    off = [0.0] * base[-1]  # each enabled wait's thread offset after it
    done = [0] * len(base)  # how many of each thread's waits have been visited

    def off_at(t: int, ep: int) -> float:
        k = min(ep, base[t] + done[t]) - 1
        return off[k] if k >= base[t] else 0.0

    for code in order:
        if code >= 0:
            i = code
            if dropped[i]:
                le = lane_end[lane[i]]
                start[i] = end[i] = le if le != _NEG else fixed[i]
                continue
            a = launch_base[i] + off_at(launch_th[i], launch_ep[i]) if launch_th[i] >= 0 else fixed[i]
            m = dep[i]
            if m >= 0 and end[m] + dep_gap[i] > a:
                a = end[m] + dep_gap[i]
            le = lane_end[lane[i]] + gap[i]
            s = a if a > le else le
            start[i] = s
            end[i] = e = s + d[i]
            lane_end[lane[i]] = e
            continue
        b = -code - 1
        pos = b_pos[b]
        if pos < 0:
            continue
        t = b_th[b]
        if bt[b] == _WAIT_TYPES["thread"]:
            B = tgt_C[b] + off_at(tgt_th[b], tgt_ep[b]) + b_post[b]
        elif bt[b] == _WAIT_TYPES["gpu_end"]:
            B = end[b_target[b]] + b_post[b]
        else:
            B = start[b_target[b]] + b_post[b]
        prev = off[pos - 1] if pos > base[t] else 0.0
        cand = B - b_C[b]
        off[pos] = cand if cand > prev else prev
        done[t] += 1
    return array("d", start), array("d", end), array("d", off)


def _visit_native(
    order: pl.Series,
    items: dict[str, pl.Series],
    dropped: Sequence[bool],
    barriers: dict[str, pl.Series],
    base: list[int],
) -> tuple[array, array, array]:
    """:func:`_visit` in C (:mod:`traceq.analysis.replay._replay_walk`), over the columns' own buffers."""
    assert _replay_walk is not None
    n = len(dropped)
    start, end, off = array("d", bytes(8 * n)), array("d", bytes(8 * n)), array("d", bytes(8 * base[-1]))
    _replay_walk.walk(
        column_bytes(order),
        (*(column_bytes(c, c.dtype) for c in items.values()), bytes(dropped)),
        tuple(column_bytes(c, c.dtype) for c in barriers.values()),
        array("q", base),
        (start, end, off),
    )
    return start, end, off


def _windows(graph: Graph, node_t: pl.Series, start: array, end: array, dropped: Sequence[bool]) -> pl.DataFrame:
    """``_windows`` on replayed times: each step ends when its host range and the GPU work it launched are
    done; the first starts at its host start or when the work queued before the profile is done."""
    steps = graph.step_nodes
    items = graph.items
    if steps.height == 0:
        live = [i for i in range(items.height) if not dropped[i]]
        if not live:
            return pl.DataFrame(
                schema={"step": pl.Int32, "win_start": pl.Float64, "win_end": pl.Float64, "ms": pl.Float64}
            )
        ws, we = min(start[i] for i in live), max(end[i] for i in live)
        return pl.DataFrame(
            {"step": [None], "win_start": [ws], "win_end": [we], "ms": [(we - ws) / 1e6]},
            schema_overrides={"step": pl.Int32},
        )
    g = items.select("step", "launch_node").with_columns(
        s=float_series(start),
        e=float_series(end),
        live=~pl.Series(dropped, dtype=pl.Boolean),
    )
    launched = g.filter(pl.col("launch_node").is_not_null() & pl.col("live") & pl.col("step").is_not_null())
    dev = launched.group_by("step").agg(device_end=pl.col("e").max(), device_start=pl.col("s").min())
    w = (
        steps.select(
            "step",
            host_start=pl.when(steps["start_node"].is_null())
            .then(steps["ts"].cast(pl.Float64))
            .otherwise(node_t.gather(steps["start_node"].fill_null(0))),
            host_end=pl.when(steps["end_node"].is_null())
            .then(steps["end"].cast(pl.Float64))
            .otherwise(node_t.gather(steps["end_node"].fill_null(0))),
        )
        .join(dev, on="step", how="left")
        .sort("host_start")
    )
    w = w.with_columns(
        complete=pl.max_horizontal("host_end", pl.col("device_end").fill_null(pl.col("host_end"))).cum_max()
    )
    first = w.row(0, named=True)
    limit = first["device_start"] if first["device_start"] is not None else first["host_end"]
    backlog = g.filter(pl.col("launch_node").is_null() & pl.col("live"))
    backlog = backlog.filter((pl.col("e") > first["host_start"]) & (pl.col("s") < limit))
    first_start = first["host_start"]
    if backlog.height:
        b_end = backlog.select(pl.min_horizontal("e", pl.lit(limit)).max()).item()
        first_start = max(first["host_start"], min(b_end, first["complete"]))
    w = w.with_columns(win_start=pl.col("complete").shift(1).fill_null(first_start), win_end=pl.col("complete"))
    return w.select(
        "step",
        "win_start",
        "win_end",
        ms=(pl.col("win_end") - pl.col("win_start")) / 1e6,
        host_start="host_start",
        host_end="host_end",
        device_end="device_end",
    )
