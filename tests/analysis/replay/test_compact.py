"""The replay's frames hold no text per host node and no copies of the events' names: a replay needs memory in
proportion to the run, so each of its millions of rows is kept to numbers (and a one-byte kind)."""

from __future__ import annotations

import re
from array import array

import polars as pl

from traceq.analysis.replay.graph import FREE_RE, SYNC_RE, packed
from traceq.analysis.replay.timeline import KIND


def test_host_nodes_hold_numbers_and_their_kind_only(replayers):
    """Two nodes per host range, each with its range's kind (a one-byte enum, as the stored kind says) and
    no text: no name, cause or id of the event."""
    rp = replayers["sync128_fp32_3steps"]
    nodes, host = rp.graph.nodes, rp.timeline.host
    assert nodes.height == 2 * host.height
    assert set(nodes.columns) == {"node", "row", "thread", "kind", "act", "rt", "op", "py", "T", "start", "L", "W0"}
    assert nodes.schema["kind"] == KIND and host.schema["kind"] == KIND
    assert not [c for c, t in nodes.schema.items() if t in (pl.String, pl.Categorical)]
    kinds = dict(zip(host["row"].to_list(), host["kind"].cast(pl.String).to_list(), strict=True))
    assert [kinds[r] for r in nodes["row"].to_list()] == nodes["kind"].cast(pl.String).to_list()
    assert {"pid", "tid"}.isdisjoint(host.columns)  # threads are indexed once: rp.timeline.threads


def test_gpu_items_share_the_timelines_text(replayers):
    """Each GPU item's name, kind, id and class are those of the timeline's event of the same item."""
    rp = replayers["enc_fp16_3steps"]
    text = ["event_id", "kind", "name", "kernel_class"]
    items = rp.graph.items.select("item", *text)
    gpu = rp.timeline.gpu.select("item", *text)
    joined = items.join(gpu, on="item", how="left", suffix="_tl", nulls_equal=True)
    assert joined.height == gpu.height > 100
    for c in text:
        assert joined[c].to_list() == joined[f"{c}_tl"].to_list(), c


def test_waits_are_named_by_their_calls(replayers):
    """The runtime calls found waiting for the device are those whose names say so (read without the
    names: as flags), every one of them on the host rows the replay gives."""
    rp = replayers["sync128_fp32_3steps"]
    names = rp.timeline.host["name"].to_list()
    waits = rp.graph.barriers.filter(pl.col("type") != "thread")
    assert waits.height > 0
    for row, reason in waits.select("call_row", "reason").iter_rows():
        if reason == "sync":
            assert re.search(SYNC_RE, names[row])
        elif reason == "free":
            assert re.search(FREE_RE, names[row]) and not re.search(SYNC_RE, names[row])


def test_packed_values_are_the_series_values():
    """:func:`packed` gives every value in order, of a column in several chunks too."""
    n = 2 * (1 << 16) + 7
    floats = pl.Series([i * 0.5 - 3.25 for i in range(n)])
    ints = pl.Series([(i * 7919) % 1_000_003 - 17 for i in range(n)], dtype=pl.Int64)
    assert packed(floats, "d") == array("d", [i * 0.5 - 3.25 for i in range(n)])
    assert packed(ints, "q").tolist() == [(i * 7919) % 1_000_003 - 17 for i in range(n)]
    assert packed(pl.Series([], dtype=pl.Float64), "d") == array("d")
    chunked = pl.concat([floats.slice(0, 5), floats.slice(5)], rechunk=False)
    assert chunked.n_chunks() == 2 and packed(chunked, "d") == packed(floats, "d")


def test_replayed_times_are_kept_as_floats_of_eight_bytes(replayers):
    rp = replayers["enc_fp16_3steps"]
    out = rp.traced()
    assert isinstance(out.start, array) and isinstance(out.end, array)
    assert out.start.itemsize == out.end.itemsize == 8
    assert len(out.start) == len(out.end) == rp.graph.items.height
