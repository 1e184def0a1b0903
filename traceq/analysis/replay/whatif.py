"""What-if scenarios: the replay with one cause of idle GPU time removed or changed.

Each scenario transforms a base scenario (normally the trace without the profiler's cost), using the
host calls ``_host_marks`` charges to each cause (the same calls ``idle_causes`` names):

``launch_overhead`` / ``python_overhead`` (CUDA graphs: the step captured once, replayed with one launch)
    the host CPU time of ops, runtime calls and Python between the step's first and last op collapses;
    data loading and the waits for the GPU stay.
``host_sync`` (the checks removed, as a user removes ``if bool(t.isfinite().all())``)
    stream, device and event synchronisations and synchronous copies take no time and wait for nothing;
    the op that read a device value through them (``aten::item``, ``aten::is_nonzero``) goes too, with the
    predicate ops just before it that computed the value it read (``isfinite``, ``all``, comparisons).
``cast_overhead`` (O2-style half weights: no autocast, no loss scaler)
    cast-family ops (``_cast_ops``) take no host time and their GPU work is left out; so does the loss
    scaler (``GradScaler``), which half weights trained in bf16, or fp16 with a static scale, do without:
    its check-and-unscale op with the small ops just before it that make the inverse scale and the
    found-inf flag, the read of that flag just after it (a sync), and its update of the scale.
``input_pipeline`` (loading overlapped: workers, pinned memory, non-blocking copies)
    data-loading ranges and ops that copied pageable memory take no host time and do not wait.
``algorithm_search`` (autotuning done once)
    a call that searched (``_search_calls``) keeps only its last ``typical_kernels`` launches and the
    host time from the first of them on; the candidates, their syncs and allocations go.
``allocator`` (no device allocation in the step: a warm caching allocator)
    ``cudaMalloc``/``cudaFree`` calls and the ops that made them take no time; ``cudaFree`` no longer
    synchronises.
``layout_transforms`` (layout transforms removed)
    layout-class kernels (transposes, NCHW/NHWC conversions) are left out, with their launch calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from traceq.analysis.causes import (
    ALGORITHM_SEARCH,
    ALLOCATOR,
    CAST_OVERHEAD,
    CAUSES,
    HOST_SYNC,
    INPUT_PIPELINE,
    LAUNCH_OVERHEAD,
    LAYOUT_TRANSFORMS,
    PYTHON_OVERHEAD,
)
from traceq.analysis.replay.graph import Graph
from traceq.analysis.replay.scenario import Scenario
from traceq.schema import OP_TREE_KINDS


@dataclass
class Change:
    """What a fix changes, independent of the scenario it is applied to: the host slices that take no
    time (``zero``), the waits that no longer wait (``off``, barrier indices), the GPU events left out
    (``drop``), new launch-latency shifts (``lat_shift``, replacing the base's) and a note."""

    zero: pl.Series
    off: list[int] = field(default_factory=list)
    drop: list[int] = field(default_factory=list)
    lat_shift: list[float] | None = None
    note: str = ""

    def apply(self, graph: Graph, base: Scenario | None, name: str) -> Scenario:
        """``base`` (the trace by default) with this change."""
        W = base.W if base is not None and base.W is not None else graph.nodes["W0"]
        on = (
            list(base.barrier_on)
            if base is not None and base.barrier_on is not None
            else [True] * graph.barriers.height
        )
        dropped = list(base.dropped) if base is not None and base.dropped is not None else [False] * graph.items.height
        for b in self.off:
            on[b] = False
        for i in self.drop:
            dropped[i] = True
        lat = self.lat_shift if self.lat_shift is not None else (base.lat_shift if base is not None else None)
        return Scenario(
            name=name,
            W=pl.select(pl.when(self.zero).then(0.0).otherwise(W)).to_series(),
            barrier_on=on,
            dropped=dropped,
            lat_shift=lat,
            notes=[*(base.notes if base is not None else []), self.note],
        )


def _open(graph: Graph, rows: pl.Series) -> pl.Series:
    """For each slice, whether one of the host events ``rows`` (host row numbers) is open over it."""
    inside = graph.nodes["row"].is_in(rows.implode())
    sign = pl.when(graph.nodes["start"]).then(1).otherwise(-1)
    frame = graph.nodes.select("thread").with_columns(d=pl.when(inside).then(sign).otherwise(0))
    # each row's start and end are nodes of its thread, whose nodes come in one block: a count over all of
    # them is back at 0 at every block's end, so it is each thread's own
    return frame.select((pl.col("d").cum_sum() > 0).alias("open")).to_series()


def _rows(graph: Graph, expr: pl.Expr) -> pl.Series:
    return graph.timeline.host.filter(expr)["row"]


def _waits(graph: Graph, reasons: list[str], calls: pl.Series | None = None) -> pl.DataFrame:
    """The GPU waits of ``reasons`` (of ``calls`` only, when given): barrier index ``b`` and ``call_row``."""
    hit = graph.barriers.with_row_index("b").filter(pl.col("reason").is_in(reasons) & pl.col("call_row").is_not_null())
    if calls is not None:
        hit = hit.filter(pl.col("call_row").is_in(calls.implode()))
    return hit.select(pl.col("b").cast(pl.Int64), "call_row")


def _launched_in(graph: Graph, mask: pl.Series) -> list[int]:
    """GPU events whose launch call starts where ``mask`` holds."""
    launch = graph.items["launch_node"]
    hit = mask.gather(launch.fill_null(0)) & launch.is_not_null()
    return graph.items.filter(hit)["item"].to_list()


def _waits_in(graph: Graph, mask: pl.Series) -> list[int]:
    """GPU waits whose waiting slice lies where ``mask`` holds."""
    b = graph.barriers.with_row_index("b").filter((pl.col("type") != "thread") & (pl.col("slice") >= 0))
    return b.filter(mask.gather(b["slice"]))["b"].cast(pl.Int64).to_list()


def cuda_graphs(graph: Graph, name: str = LAUNCH_OVERHEAD.id) -> Change:
    """Host CPU time inside each step, between the step's first and last op on each thread, collapses (the
    data-loading time stays); the GPU runs the captured work back to back."""
    host, nodes = graph.timeline.host, graph.nodes
    inputs = _open(graph, _rows(graph, pl.col("cause") == INPUT_PIPELINE.id))
    ops = host.filter(pl.col("kind").is_in(list(OP_TREE_KINDS)) & pl.col("step").is_not_null())
    spans = ops.group_by("thread", "step").agg(a=pl.col("ts").min(), b=pl.col("end").max()).sort("a")
    frame = nodes.select("node", "thread", "T", "L").sort("T")
    found = frame.join_asof(
        spans.drop("step"), left_on="T", right_on="a", by="thread", strategy="backward", check_sortedness=False
    )
    inside = found.filter(pl.col("T") + pl.col("L") <= pl.col("b"))["node"]
    mask = nodes["node"].is_in(inside.implode()) & ~inputs
    shift = [-(x if x is not None and x > 0 else 0.0) for x in graph.items["lat"].to_list()]
    return Change(mask, lat_shift=shift, note=f"{CAUSES[name].what_if}: {int(mask.sum())} host slices collapsed")


#: Ops that only read a device value on the host: removing a sync removes the read that made it.
READ_OPS = r"^aten::(item|_local_scalar_dense|is_nonzero|equal|tolist)$"
#: Predicates whose value a read tests (a NaN guard, a bound check): removing the check removes them too.
PREDICATE_OPS = (
    r"^aten::(isfinite|isnan|isinf|isneginf|isposinf|all|any|eq|ne|ge|gt|le|lt|logical_and|logical_or|logical_not)$"
)
#: How many predicate ops before a read the check may have (``x.isfinite().all()``: two).
MAX_PREDICATES = 4


def _predicates(host: pl.DataFrame, reads: set[int]) -> set[int]:
    """The predicate ops (host rows) just before each of the read ops ``reads`` on its thread, under the
    same parent: the value the read tested was computed by them and goes with the check."""
    ops = host.filter(pl.col("kind").is_in(list(OP_TREE_KINDS))).select("row", "thread", "parent_id", "ts", "name")
    ops = ops.sort("thread", "parent_id", "ts", nulls_last=True)
    rows, names = ops["row"].to_list(), ops["name"].to_list()
    keys = list(zip(ops["thread"].to_list(), ops["parent_id"].to_list(), strict=True))
    at = {row: i for i, row in enumerate(rows)}
    out: set[int] = set()
    for row in reads:
        i = at.get(row)
        j = (i or 0) - 1
        while i is not None and j >= 0 and i - j <= MAX_PREDICATES and keys[j] == keys[i]:
            if not re.match(PREDICATE_OPS, names[j] or ""):
                break
            out.add(rows[j])
            j -= 1
    return out


def syncs_removed(graph: Graph) -> Change:
    """The synchronising calls take no time and wait for nothing; the op that read a device value through
    them (``aten::item``, ``aten::is_nonzero``: the outermost such op around the call) goes with its GPU work."""
    waits = _waits(graph, ["sync"])
    host = graph.timeline.host
    reads = host.filter(pl.col("kind").is_in(list(OP_TREE_KINDS)) & pl.col("name").str.contains(READ_OPS))
    read_row = dict(zip(reads["event_id"].to_list(), reads["row"].to_list(), strict=True))
    read_parent = dict(zip(reads["event_id"].to_list(), reads["parent_id"].to_list(), strict=True))
    call_parent = host.filter(pl.col("row").is_in(waits["call_row"].implode()))["parent_id"].to_list()
    outer: set[int] = set()
    for ev in call_parent:
        top = None
        while ev is not None and ev in read_row:
            top, ev = read_row[ev], read_parent[ev]
        if top is not None:
            outer.add(top)
    zero = _open(graph, waits["call_row"])
    drop: list[int] = []
    predicates = _predicates(host, outer)
    if outer:
        inside = _open(graph, pl.Series(sorted(outer | predicates), dtype=pl.Int64))
        zero, drop = zero | inside, _launched_in(graph, inside)
    note = (
        f"{HOST_SYNC.what_if}: {waits.height} synchronising calls, {len(outer)} reads of device values, "
        f"{len(predicates)} predicate ops"
    )
    return Change(zero, waits["b"].to_list(), drop, note=note)


#: The loss scaler's check of the gradients (PyTorch ``GradScaler.unscale_``, Paddle's AMP scaler).
UNSCALE_OPS = r"^(aten::_amp_foreach_non_finite_check_and_unscale_|check_finite_and_unscale)$"
#: The loss scaler's update of its scale after the optimizer step.
SCALE_UPDATE_OPS = r"^(aten::_amp_update_scale_|update_loss_scaling_?)$"
#: The small ops a scaler runs just before its check: the inverse scale and the found-inf flag.
SCALER_PREP_OPS = r"^aten::(to|_to_copy|reciprocal|full|fill_|empty|zeros|copy_)$"
#: How many such ops before the check may belong to the scaler (PyTorch's ``unscale_`` runs six).
MAX_SCALER_PREP = 8


def _scaler_spans(graph: Graph) -> list[tuple[int, float, float]]:
    """(thread, start, end) of the host time the loss scaler holds: from the first of the small ops just
    before each check to the end of the check, or of the read of its flag when that is the next top-level
    op of the thread (the scaler's step asks whether to skip the optimizer); and each update of the scale."""
    host = graph.timeline.host
    top = host.filter(pl.col("kind").is_in(list(OP_TREE_KINDS)) & (pl.col("depth") == 0)).sort("thread", "ts")
    name = pl.col("name").fill_null("")
    top = top.select(
        "thread", "ts", "end", prep=name.str.contains(SCALER_PREP_OPS), read=name.str.contains(READ_OPS),
        check=name.str.contains(UNSCALE_OPS), update=name.str.contains(SCALE_UPDATE_OPS),
    ).with_row_index("i")  # fmt: skip
    spans: list[tuple[int, float, float]] = top.filter("update").select("thread", "ts", "end").rows()
    threads, starts, ends = top["thread"], top["ts"], top["end"]
    prep, read = top["prep"], top["read"]
    for i in top.filter("check")["i"].to_list():
        first, last = i, i
        while first > 0 and i - first < MAX_SCALER_PREP and threads[first - 1] == threads[i] and prep[first - 1]:
            first -= 1
        if i + 1 < top.height and threads[i + 1] == threads[i] and read[i + 1]:
            last = i + 1
        spans.append((threads[i], starts[first], ends[last]))
    return spans


def _in_spans(graph: Graph, spans: list[tuple[int, float, float]]) -> pl.Series:
    """For each slice, whether it starts inside one of ``spans`` of its thread."""
    nodes = graph.nodes
    inside = pl.Series([False] * nodes.height)
    for thread, a, b in spans:
        inside = inside | ((nodes["thread"] == thread) & (nodes["T"] >= a) & (nodes["T"] < b))
    return inside


def casts_removed(graph: Graph) -> Change:
    rows = _rows(graph, pl.col("cause") == CAST_OVERHEAD.id)
    spans = _scaler_spans(graph)
    inside = _open(graph, rows) | _in_spans(graph, spans)
    drop = _launched_in(graph, inside)
    note = f"{CAST_OVERHEAD.what_if}: {rows.len()} cast ops, {len(spans)} loss-scaler calls, {len(drop)} GPU events"
    return Change(inside, _waits_in(graph, inside), drop, note=note)


def input_overlapped(graph: Graph) -> Change:
    rows = _rows(graph, pl.col("cause") == INPUT_PIPELINE.id)
    waits = _waits(graph, ["pageable"])
    zero = _open(graph, rows) | _open(graph, waits["call_row"])
    note = f"{INPUT_PIPELINE.what_if}: {rows.len()} loading ranges and copies, {waits.height} blocking copies"
    return Change(zero, waits["b"].to_list(), note=note)


def search_once(graph: Graph) -> Change:
    host, nodes = graph.timeline.host, graph.nodes
    searches = host.filter(pl.col("search")).join(
        graph.timeline.searches.select("event_id", "typical_kernels"), on="event_id", how="left"
    )
    launches = host.select(pl.col("row").alias("launch_row"), pl.col("ts").alias("lts"))
    items = graph.items.join(launches, on="launch_row", how="left")
    cut = pl.Series([False] * nodes.height)
    drop: list[int] = []
    for thread, ts, end, keep in searches.select("thread", "ts", "end", "typical_kernels").iter_rows():
        inside = items.filter((pl.col("launch_thread") == thread) & (pl.col("lts") >= ts) & (pl.col("lts") < end))
        inside = inside.sort("lts")
        k = max(round(keep or 0), 0)
        kept_from = inside["lts"][-k] if 0 < k <= inside.height else end
        drop += inside.filter(pl.col("lts") < kept_from)["item"].to_list()
        cut = cut | ((nodes["thread"] == thread) & (nodes["T"] >= ts) & (nodes["T"] < kept_from))
    note = f"{ALGORITHM_SEARCH.what_if}: {searches.height} searching calls, {len(drop)} candidate launches"
    return Change(cut, _waits_in(graph, cut), drop, note=note)


def allocator_free(graph: Graph) -> Change:
    """Device allocation and release calls, and the ops that made them (for their whole length, as
    ``_host_marks`` charges them), take no time; ``cudaFree`` no longer synchronises."""
    rows = _rows(graph, pl.col("cause") == ALLOCATOR.id)
    waits = _waits(graph, ["free"], calls=rows)
    note = f"{ALLOCATOR.what_if}: {rows.len()} calls and ops ({waits.height} frees)"
    return Change(_open(graph, rows), waits["b"].to_list(), note=note)


def layout_removed(graph: Graph) -> Change:
    layout = graph.items.filter(pl.col("kernel_class") == LAYOUT_TRANSFORMS.kernel_class)
    zero = _open(graph, layout["launch_row"].drop_nulls())
    return Change(zero, drop=layout["item"].to_list(), note=f"{LAYOUT_TRANSFORMS.what_if}: {layout.height} kernels")


#: The change of each cause's fix, in the order the what-if table lists them.
CHANGES: dict[str, Callable[[Graph], Change]] = {
    LAUNCH_OVERHEAD.id: lambda g: cuda_graphs(g, LAUNCH_OVERHEAD.id),
    PYTHON_OVERHEAD.id: lambda g: cuda_graphs(g, PYTHON_OVERHEAD.id),
    HOST_SYNC.id: syncs_removed,
    CAST_OVERHEAD.id: casts_removed,
    INPUT_PIPELINE.id: input_overlapped,
    ALGORITHM_SEARCH.id: search_once,
    ALLOCATOR.id: allocator_free,
    LAYOUT_TRANSFORMS.id: layout_removed,
}
#: What each cause's scenario stands for, in words (the fix it models: the cause's ``what_if``).
FIXES: dict[str, str] = {cause: fix for cause in CHANGES if (fix := CAUSES[cause].what_if)}


def scenario(graph: Graph, cause: str, base: Scenario | None = None) -> Scenario:
    """``base`` (the trace by default) with ``cause``'s fix applied."""
    return CHANGES[cause](graph).apply(graph, base, cause)


#: Each cause's scenario: ``SCENARIOS[cause](graph, base)``.
SCENARIOS: dict[str, Callable[[Graph, Scenario | None], Scenario]] = {
    cause: (lambda g, b, cause=cause: scenario(g, cause, b)) for cause in CHANGES
}
