"""_device_copies (cast-family ops that moved a tensor between host and device) against a computation in
Python over the events of real traces: per thread, the launches of memory copies and the converting
``aten::copy_`` ops found by bisection in time-sorted lists."""

from __future__ import annotations

import bisect
import re
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, Ingested, PairStore

_EVENTS = (
    "select run_id, rank, event_id, kind, name, pid, tid, ts_ns, dur_ns, launch_id, input_dtypes from events "
    "where ts_ns is not null"
)

Thread = tuple[str, int, int, int]


def _within(times: dict[Thread, list[int]], thread: Thread, start: int, end: int) -> bool:
    """Whether ``times`` of ``thread`` (sorted) hold one in [start, end)."""
    ts = times.get(thread, [])
    k = bisect.bisect_left(ts, start)
    return k < len(ts) and ts[k] < end


def _expected(store: Path) -> set[tuple[str, int, int]]:
    family = re.compile(traceq.sql("-- Requires: _cast_ops\nselect family from _cast_ops", store).item())
    events = traceq.sql(_EVENTS, store)
    ops = events.filter(events["kind"].is_in(["op", "op_inner"]))
    by_id = {(r, k, e): (p, t, ts) for r, k, e, p, t, ts in events.select(
        "run_id", "rank", "event_id", "pid", "tid", "ts_ns").iter_rows()}  # fmt: skip
    launches: dict[Thread, list[int]] = {}
    copies = events.filter(events["kind"] == "memcpy").select("run_id", "rank", "launch_id")
    for run, rank, launch in copies.iter_rows():
        call = by_id.get((run, rank, launch))
        if call is not None and call[0] is not None and call[1] is not None:
            launches.setdefault((run, rank, call[0], call[1]), []).append(call[2])
    converting: dict[Thread, list[int]] = {}
    for run, rank, pid, tid, ts, dtypes in ops.filter(ops["name"] == "aten::copy_").select(
        "run_id", "rank", "pid", "tid", "ts_ns", "input_dtypes"
    ).iter_rows():  # fmt: skip
        if len({d for d in dtypes or [] if d}) > 1:
            converting.setdefault((run, rank, pid, tid), []).append(ts)
    for times in (*launches.values(), *converting.values()):
        times.sort()
    found = set()
    for run, rank, event, name, pid, tid, ts, dur in ops.select(
        "run_id", "rank", "event_id", "name", "pid", "tid", "ts_ns", "dur_ns"
    ).iter_rows():  # fmt: skip
        if dur is None or not family.search(name):
            continue
        thread = (run, rank, pid, tid)
        if _within(launches, thread, ts, ts + dur) and not _within(converting, thread, ts, ts + dur):
            found.add((run, rank, event))
    return found


def _check(store: Path) -> int:
    got = traceq.sql("-- Requires: _device_copies\nselect run_id, rank, event_id from _device_copies", store)
    assert got.height == got.unique().height  # each op once
    expected = _expected(store)
    assert set(got.iter_rows()) == expected
    return len(expected)


@pytest.mark.parametrize("fixture", ["kineto_b4", "nsys_b4", "paddle_b64"])
def test_device_copies_match_a_bisection_over_each_thread(fixture: str, request: pytest.FixtureRequest) -> None:
    pair: PairStore = request.getfixturevalue(fixture)
    found = _check(pair.path)
    if fixture == "kineto_b4":
        assert found > 0  # the Conformer's `.to(device)` calls


def test_device_copies_of_the_bundled_and_planted_traces(ingested: Ingested) -> None:
    """Every bundled Kineto trace and the planted runs: some have converting copies inside cast ops,
    which are left out."""
    paths = [*sorted(SAMPLES.glob("kineto_*.json.gz")), *sorted((SAMPLES / "planted").glob("*_3steps.json.gz"))]
    assert _check(ingested.store(*paths)) > 0
