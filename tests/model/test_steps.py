"""Each event's step, and the ranges chosen as steps, on real traces, against plain Python over their events."""

from __future__ import annotations

import bisect
from pathlib import Path

import polars as pl
import pytest

from traceq.model.steps import as_step_kind, assign_steps
from traceq.readers import read_trace

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _window_of(times: list[int | None], windows: list[tuple[int, int, int]]) -> list[int | None]:
    """Per time, the step of the window (start, end, step) starting last at or before it, if the time is
    before that window's end (windows sorted by start, no two starting together)."""
    starts = [w[0] for w in windows]
    out: list[int | None] = []
    for t in times:
        i = bisect.bisect_right(starts, t) - 1 if t is not None else -1
        out.append(windows[i][2] if i >= 0 and t < windows[i][1] else None)
    return out


@pytest.mark.parametrize(
    "trace",
    ["kineto_conformer_fp16_b4_2steps.json.gz", "planted/nsys_cudnn_var_fp16_4steps.sqlite.gz"],
)
def test_each_event_s_step_is_the_window_containing_its_start(trace: str) -> None:
    tables = read_trace(SAMPLES / trace).tables
    events, steps = tables.events, tables.steps
    windows = sorted((s, s + d, n) for s, d, n in steps.select("ts_ns", "dur_ns", "step").iter_rows())
    assert len({w[0] for w in windows}) == len(windows) >= 2
    # times inside, before, between and after the windows: every start and end, and one ns either side
    edges = [t + d for s, e, _ in windows for t in (s, e) for d in (-1, 0, 1)]
    probe = pl.DataFrame({"ts_ns": [*events["ts_ns"].to_list(), *edges, None]}, schema={"ts_ns": pl.Int64})
    got = assign_steps(probe, steps).to_list()
    assert got == _window_of(probe["ts_ns"].to_list(), windows)
    assert any(s is None for s in got) and len({s for s in got if s is not None}) == len(windows)


def test_ranges_chosen_as_steps_become_steps_and_no_other_event_changes() -> None:
    """The planted nsys capture's steps are its ``train_step N`` ranges: exactly those events (matched by
    name, start and length) become of kind ``step``."""
    tables = read_trace(SAMPLES / "planted/nsys_cudnn_var_fp16_4steps.sqlite.gz").tables
    steps = tables.steps
    # the events as read, before the ranges were chosen: NVTX ranges are annotations
    raw = tables.events.with_columns(
        pl.when(pl.col("kind") == "step").then(pl.lit("annotation")).otherwise("kind").alias("kind")
    )
    chosen = {(n, s, d) for n, s, d in steps.select("name", "ts_ns", "dur_ns").iter_rows()}
    marked = as_step_kind(raw, steps)
    rows = raw.select("name", "ts_ns", "dur_ns", "kind").iter_rows()
    expected = ["step" if (n, s, d) in chosen else kind for n, s, d, kind in rows]
    assert marked["kind"].to_list() == expected
    assert expected.count("step") == steps.height == 4
