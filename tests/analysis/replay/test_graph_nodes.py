"""The graph's host nodes against a plain reference: every start and end of a thread's ranges in time order,
each slice's open counts and length, computed thread by thread in Python from the timeline's rows; the
idle gaps and slice types read from them, the same way; GPU work's launch rows against a join."""

from __future__ import annotations

from collections import defaultdict

import polars as pl
import pytest

from traceq.analysis.replay.graph import GAP_NS, _nodes, idle_gaps
from traceq.analysis.replay.overhead import NO_SLICE, NODE_CLASSES, slice_types
from traceq.analysis.replay.timeline import _positions
from traceq.schema import OP_TREE_KINDS

#: Planted runs and a Conformer sample (an nsys capture's nodes: test_nsys.py).
RUNS = ["enc_fp16_3steps", "resnet18_b4_fp16_3steps", "kineto_conformer_fp16_b4_2steps"]


def reference_nodes(host: pl.DataFrame) -> pl.DataFrame:
    """The nodes as the graph's module doc defines them, by a sort and running counts per thread."""
    by_thread: dict[int, list[tuple]] = defaultdict(list)
    for row, thread, kind, ts, end, event_id in host.select(
        "row", "thread", "kind", "ts", "end", "event_id"
    ).iter_rows():
        # at one instant: ends of ranges with a length, then starts (by id), then ends of zero-length ranges
        by_thread[thread].append((ts, 1, event_id, row, kind, True))
        by_thread[thread].append((end, 0 if end > ts else 2, -event_id, row, kind, False))
    rows = []
    for thread in sorted(by_thread):
        nodes = sorted(by_thread[thread])
        counts = dict.fromkeys(("act", "rt", "op", "py"), 0)
        for k, (t, _, _, row, kind, start) in enumerate(nodes):
            sign = 1 if start else -1
            counts["act"] += sign * (kind in (*OP_TREE_KINDS, "runtime"))
            counts["rt"] += sign * (kind == "runtime")
            counts["op"] += sign * (kind in OP_TREE_KINDS)
            counts["py"] += sign * (kind == "python")
            length = float(nodes[k + 1][0] - t) if k + 1 < len(nodes) else 0.0
            rows.append((row, thread, t, start, *counts.values(), length))
    return pl.DataFrame(
        rows, schema=["row", "thread", "T", "start", "act", "rt", "op", "py", "L"], orient="row"
    ).with_row_index("node")


@pytest.mark.parametrize("name", RUNS)
def test_nodes_match_the_reference(replayers, name):
    host = replayers[name].timeline.host
    nodes = _nodes(host)
    expected = reference_nodes(host)
    assert nodes.height == 2 * host.height
    for column in expected.columns:
        assert nodes[column].cast(expected[column].dtype).to_list() == expected[column].to_list(), column


def test_nodes_of_times_beyond_one_sort_key(replayers):
    """Times too large for the thread and time to share one integer take the four-column sort: the same nodes."""
    host = replayers["resnet18_b4_fp16_3steps"].timeline.host
    far = 1 << 45
    shifted = _nodes(host.with_columns(pl.col("ts") + far, pl.col("end") + far))
    assert shifted.drop("T").equals(_nodes(host).drop("T"))
    assert (shifted["T"] - far).to_list() == _nodes(host)["T"].to_list()


def test_nodes_of_rows_out_of_id_order(replayers):
    """Host rows not in id order (the fast sort's premise) still give nodes in thread, time and id order."""
    host = replayers["enc_fp16_3steps"].timeline.host
    shuffled = host.sample(fraction=1.0, shuffle=True, seed=7)
    assert _nodes(shuffled).equals(_nodes(host))


def test_nodes_at_shared_instants(replayers):
    """On a coarser clock (times to 10 us, as a trace in whole microseconds has many ties) ranges end, start
    and take no time at the same instants: ends before starts before zero-length ranges, as the reference."""
    host = replayers["kineto_conformer_fp16_b4_2steps"].timeline.host
    coarse = host.with_columns((pl.col("ts") // 10_000) * 10_000, (pl.col("end") // 10_000) * 10_000)
    assert coarse.filter(pl.col("end") == pl.col("ts")).height > host.filter(pl.col("end") == pl.col("ts")).height
    nodes, expected = _nodes(coarse), reference_nodes(coarse)
    for column in expected.columns:
        assert nodes[column].cast(expected[column].dtype).to_list() == expected[column].to_list(), column


def reference_gaps(nodes: pl.DataFrame) -> list[tuple]:
    """Idle gaps as the graph's module doc defines them, thread by thread: runs of slices with no op or
    runtime call open, cut at the thread's own steps and annotations, at least ``GAP_NS`` long."""
    gaps, run = [], None
    rows = nodes.select("node", "thread", "T", "L", "kind", "act").rows()
    for k, (node, thread, t, length, kind, act) in enumerate(rows):
        last_of_thread = k + 1 == len(rows) or rows[k + 1][1] != thread
        idle = act == 0 and not last_of_thread
        if run is not None and (not idle or kind in ("annotation", "step") or run[2] != thread):
            gaps.append(run)
            run = None
        if idle:
            run = (run[0], node, thread, run[3], t + length) if run else (node, node, thread, float(t), t + length)
    if run is not None:
        gaps.append(run)
    return [g for g in gaps if g[4] - g[3] >= GAP_NS]


@pytest.mark.parametrize("name", ["resnet18_b4_fp16_3steps", "kineto_conformer_fp16_b4_2steps", "enc_fp16_3steps"])
def test_idle_gaps_match_the_reference(replayers, name):
    nodes = replayers[name].graph.nodes
    expected = reference_gaps(nodes)
    assert idle_gaps(nodes).rows() == expected
    assert expected  # every run has gaps worth looking at


@pytest.mark.parametrize("name", ["kineto_conformer_fp16_b4_2steps", "enc_fp16_3steps"])
def test_slice_types_match_the_reference(replayers, name):
    """Each slice's transition type from the node before it and the node after it on its thread."""
    graph = replayers[name].graph
    launches = set(graph.items["launch_row"].drop_nulls().to_list())

    def code(kind: str, row: int, start: bool) -> int:
        if kind in (*OP_TREE_KINDS, "annotation"):
            name = "op"
        elif kind == "runtime":
            name = "L" if row in launches else "rt"
        else:
            name = "py" if kind == "python" else "x"
        return 2 * NODE_CLASSES.index(name) + (0 if start else 1)

    rows = graph.nodes.select("thread", "kind", "row", "start").rows()
    codes = [code(kind, row, start) for _, kind, row, start in rows]
    expected = [
        10 * codes[k] + codes[k + 1] if k + 1 < len(rows) and rows[k + 1][0] == rows[k][0] else NO_SLICE
        for k in range(len(rows))
    ]
    assert slice_types(graph).to_list() == expected


@pytest.mark.parametrize("name", ["kineto_conformer_fp16_b4_2steps", "enc_fp16_3steps"])
def test_launch_rows_match_a_join(replayers, name):
    """Each GPU event's launch row, found by a search of the host rows' ids, is the one a join finds; ids
    out of order give the same rows."""
    tl = replayers[name].timeline
    joined = tl.gpu.select("launch_id").join(
        tl.host.select(launch_id="event_id", expected="row"), on="launch_id", how="left", maintain_order="left"
    )
    assert tl.gpu["launch_row"].to_list() == joined["expected"].to_list()
    assert tl.gpu["launch_row"].null_count() < tl.gpu.height
    shuffled = tl.host.sample(fraction=1.0, shuffle=True, seed=3)
    found = _positions(shuffled["event_id"], tl.gpu["launch_id"])
    assert shuffled["row"].gather(found).to_list() == joined["expected"].to_list()
