"""_search_calls' counts inside each searching call against a computation in Python over the events of
real traces with planted cuDNN algorithm searches (chrome and nsys): per thread, the runtime calls that
launched GPU work, and those that wait for the device, found by bisection in time-sorted lists."""

from __future__ import annotations

import bisect
import re
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.conftest import SAMPLES, Ingested, shared
from traceq.querying.engine import Session
from traceq.querying.files import query_text

_EVENTS = (
    "select event_id, kind, name, pid, tid, ts_ns, dur_ns, launch_id from events "
    "where kind = 'runtime' or launch_id is not null"
)


def _inside(times: list[int], start: int, end: int) -> int:
    """How many of ``times`` (sorted) lie in [start, end)."""
    return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)


def _counts(store: Path) -> tuple[dict[tuple[int, int], list[int]], dict[tuple[int, int], list[int]]]:
    """Per thread, the sorted starts of the runtime calls that launched GPU work and of those that wait."""
    causes = traceq.sql("-- Requires: _call_causes\nselect name, cause from _call_causes where kind = 'runtime'", store)
    waiting = {name for name, cause in causes.iter_rows() if cause == "host_sync" or "MemGetInfo" in name}
    events = traceq.sql(_EVENTS, store)
    launching = set(events.get_column("launch_id").drop_nulls().to_list())
    launches: dict[tuple[int, int], list[int]] = {}
    waits: dict[tuple[int, int], list[int]] = {}
    for event_id, kind, name, pid, tid, ts in events.select(
        "event_id", "kind", "name", "pid", "tid", "ts_ns"
    ).iter_rows():
        if kind != "runtime" or pid is None or tid is None:
            continue
        if event_id in launching:
            launches.setdefault((pid, tid), []).append(ts)
        if name in waiting:
            waits.setdefault((pid, tid), []).append(ts)
    for lists in (launches, waits):
        for times in lists.values():
            times.sort()
    return launches, waits


def _searches(store: Path, columns: str) -> pl.DataFrame:
    """``columns`` of each call ``_search_calls`` keeps (``s``) and of its event (``e``); at least 18 of them,
    a search per convolution shape of the planted cuDNN runs."""
    found = traceq.sql(
        f"-- Requires: _search_calls\nselect {columns} "
        "from _search_calls s join events e using (run_id, rank, event_id)",
        store,
    )
    assert found.height >= 18
    return found


@pytest.mark.parametrize("trace", ["cudnn_var_fp16_3steps.json.gz", "nsys_cudnn_var_fp16_4steps.sqlite.gz"])
def test_kernels_and_waits_inside_each_search_are_counted_over_the_whole_thread(ingested: Ingested, trace: str) -> None:
    store = ingested.store(SAMPLES / "planted" / trace)
    found = _searches(store, "s.event_id, s.kernels, s.syncs, e.pid, e.tid, e.ts_ns, e.dur_ns")
    launches, waits = _counts(store)
    first = min(min(times) for times in launches.values())
    assert (
        found.get_column("ts_ns").min() > first
    )  # launches before the first search: the counts start inside the thread
    for _, kernels, syncs, pid, tid, ts, dur in found.iter_rows():
        assert kernels == _inside(launches.get((pid, tid), []), ts, ts + dur)
        assert syncs == _inside(waits.get((pid, tid), []), ts, ts + dur)
        assert syncs > 0


@pytest.mark.parametrize("session", ["report", "ingest"])
def test_the_counts_are_looked_up_by_asof_joins_not_nested_loops(ingested: Ingested, session: str) -> None:
    """Over the real nsys export DuckDB expects few slow calls and would turn both as-of lookups into nested
    loops (every call against every count of its thread: 22 s instead of 0.2 s): no session of traceq's
    own queries, a report's or the one ingest stores metrics from, plans one."""
    store = ingested.store(shared("nsys/nsys_conformer_fp16_b4.sqlite.gz"))
    if session == "report":
        opened = Session(store, own_queries=True, use_stored=False)
    else:
        (rank_dir,) = store.glob("runs/run_id=*/rank=*")
        opened = Session.over_ranks({0: rank_dir})
    with opened:
        opened.make(["_call_causes"])
        ((_, plan),) = opened.con.execute("EXPLAIN (FORMAT JSON) " + query_text("_search_calls")).fetchall()
    operators = re.findall(r'"name": "([A-Z_]+)"', plan)
    assert operators.count("ASOF_JOIN") == 2
    assert "NESTED_LOOP_JOIN" not in operators


@pytest.mark.parametrize("trace", ["cudnn_var_fp16_3steps.json.gz", "nsys_cudnn_var_fp16_4steps.sqlite.gz"])
def test_of_nested_searching_calls_only_the_innermost_is_kept(ingested: Ingested, trace: str) -> None:
    """aten::conv1d > aten::convolution > ... > aten::cudnn_convolution all search when the innermost does:
    no call kept may enclose another kept call of its thread, checked pair by pair over the events' spans
    (DuckDB 1 once planned the query's anti join on the ``<>`` alone and kept every level)."""
    store = ingested.store(SAMPLES / "planted" / trace)
    found = _searches(store, "e.event_id, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns as end_ns")
    calls = list(found.iter_rows())
    enclosing = [
        (outer[0], inner[0])
        for outer in calls
        for inner in calls
        if outer[0] != inner[0] and outer[1:3] == inner[1:3] and outer[3] <= inner[3] and inner[4] <= outer[4]
    ]
    assert enclosing == []
