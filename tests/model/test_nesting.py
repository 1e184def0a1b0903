"""The op tree and launch placement on tiny hand-made threads (edge cases real traces rarely show)."""

from __future__ import annotations

import polars as pl

from traceq.model.build import build_run_tables


def _events(rows: list[tuple[str, str, int, int, int]]) -> pl.DataFrame:
    """rows: (kind, name, ts_ns, dur_ns, tid), all on pid 1."""
    kinds, names, ts, dur, tid = zip(*rows, strict=True)
    return pl.DataFrame({"kind": kinds, "name": names, "ts_ns": ts, "dur_ns": dur, "tid": tid, "pid": [1] * len(rows)})


def _by_name(frame: pl.DataFrame) -> dict[str, dict]:
    ids = dict(zip(frame["event_id"], frame["name"], strict=True))
    out = {}
    for r in frame.iter_rows(named=True):
        r = dict(r)
        for col in ("parent_id", "op_id", "top_op_id"):
            r[col] = ids.get(r[col])
        out[r["name"]] = r
    return out


def test_nested_touching_and_inner_stages() -> None:
    ev = _events(
        [
            ("op", "outer", 0, 100, 1),
            ("op", "child", 10, 30, 1),
            ("op_inner", "compute", 12, 20, 1),
            ("runtime", "launch1", 15, 2, 1),
            ("op", "touching", 40, 60, 1),  # starts where child ends: a sibling, not a child
            ("runtime", "launch2", 50, 1, 1),
            ("runtime", "outside", 200, 1, 1),
            ("op", "other_thread", 0, 1000, 2),
        ]
    )
    got = _by_name(build_run_tables(ev).events)
    assert (got["child"]["parent_id"], got["child"]["depth"]) == ("outer", 1)
    assert (got["compute"]["parent_id"], got["compute"]["op_id"], got["compute"]["top_op_id"]) == (
        "child",
        "child",
        "outer",
    )
    assert (got["launch1"]["parent_id"], got["launch1"]["op_id"], got["launch1"]["depth"]) == ("compute", "child", 3)
    assert got["touching"]["parent_id"] == "outer"
    assert (got["launch2"]["op_id"], got["launch2"]["top_op_id"]) == ("touching", "outer")
    assert got["outside"]["op_id"] is None and got["outside"]["depth"] == 0
    assert got["other_thread"]["parent_id"] is None


def test_tolerance_keeps_a_rounded_child_inside_its_parent() -> None:
    rows = [("op", "parent", 0, 10_000, 1), ("op", "child", 9_000, 1_500, 1), ("runtime", "call", 9_100, 50, 1)]
    strict = _by_name(build_run_tables(_events(rows)).events)
    assert strict["child"]["parent_id"] is None
    tolerant = _by_name(build_run_tables(_events(rows), tolerance_ns=1_000).events)
    assert tolerant["child"]["parent_id"] == "parent"
    assert tolerant["call"]["op_id"] == "child"


def test_annotation_owns_launches_outside_any_op() -> None:
    ev = _events(
        [
            ("annotation", "Optimizer.step", 0, 100, 1),
            ("runtime", "fused_launch", 10, 5, 1),
            ("op", "aten::add_", 50, 20, 1),
            ("runtime", "op_launch", 55, 5, 1),
        ]
    )
    got = _by_name(build_run_tables(ev).events)
    assert got["fused_launch"]["op_id"] == "Optimizer.step"
    assert got["op_launch"]["op_id"] == "aten::add_"
    assert got["aten::add_"]["parent_id"] is None  # annotations are not part of the op tree


def test_ids_follow_time_while_rows_keep_the_input_order() -> None:
    """Event ids number events by start (longest first on equal starts, then input order); the rows
    stay in the order they came in, and nesting, links and steps refer to the ids."""
    ev = _events(
        [
            ("runtime", "launch", 15, 2, 1),
            ("op", "inner", 10, 30, 1),
            ("step", "ProfilerStep#3", 0, 100, 1),
            ("op", "outer", 10, 50, 1),  # same start as inner, longer: it comes first in time
            ("op", "same_start_listed_first", 60, 5, 1),
            ("op", "same_start_listed_second", 60, 5, 1),  # equal start and length: input order
        ]
    )
    events = build_run_tables(ev).events
    assert events["name"].to_list() == ev["name"].to_list()
    assert events["event_id"].to_list() == [3, 2, 0, 1, 4, 5]
    got = _by_name(events)
    assert (got["launch"]["parent_id"], got["launch"]["top_op_id"]) == ("inner", "outer")
    assert got["inner"]["parent_id"] == "outer"
    assert {r["step"] for r in got.values()} == {3}
