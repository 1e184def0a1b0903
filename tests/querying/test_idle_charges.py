"""_idle_charges' call for the pieces of causes that hold the host, against a search in Python over every
marked call of the cause on the piece's thread, on real traces with planted synchronisations, allocations,
cuDNN searches and pageable input copies (chrome and nsys): for host_sync and allocator the innermost call
holding the piece's instant, for algorithm_search and input_pipeline the outermost (ties: the first by id)."""

from __future__ import annotations

from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, Ingested

HELD = ("host_sync", "allocator", "algorithm_search", "input_pipeline")

TRACES = [
    SAMPLES / "planted" / "nsys_sync_fp16_3steps.sqlite.gz",
    SAMPLES / "planted" / "nsys_cudnn_var_fp16_4steps.sqlite.gz",
    SAMPLES / "planted" / "cudnn_var_fp16_3steps.json.gz",
    SAMPLES / "planted" / "alloc128_fp32_3steps.json.gz",
    SAMPLES / "planted" / "input8_fp16_3steps.json.gz",
]


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name.split(".")[0])
def test_held_pieces_are_charged_to_the_innermost_or_outermost_call_holding_them(
    ingested: Ingested, trace: Path
) -> None:
    store = ingested.store(trace)
    marks = traceq.sql(
        "-- Requires: _host_marks\nselect pid, tid, cause, event_id, ts_ns, end_ns from _host_marks "
        f"where cause in {HELD}",
        store,
    )
    calls: dict[tuple[int, int, str], list[tuple[int, int, int]]] = {}
    for pid, tid, cause, event_id, ts, end in marks.iter_rows():
        calls.setdefault((pid, tid, cause), []).append((ts, end, event_id))
    pieces = traceq.sql(
        "-- Requires: _idle_charges\nselect pid, tid, cause, coalesce(held_at, piece_start) as x, site_id "
        f"from _idle_charges where cause in {HELD}",
        store,
    )
    causes = set()
    for pid, tid, cause, x, site in pieces.iter_rows():
        holding = [(ts, event_id) for ts, end, event_id in calls.get((pid, tid, cause), []) if ts <= x < end]
        if cause in ("host_sync", "allocator"):
            expected = min(holding, key=lambda c: (-c[0], c[1]), default=None)
        else:
            expected = min(holding, default=None)
        assert site == (expected[1] if expected else None), (pid, tid, cause, x)
        causes.add(cause)
    assert pieces.get_column("site_id").drop_nulls().len() > 0.9 * pieces.height > 0
    assert causes & {"host_sync", "allocator", "algorithm_search", "input_pipeline"}
