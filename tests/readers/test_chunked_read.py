"""Reading a chrome trace chunk by chunk with its chunks spilled to disk gives the same tables."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.conftest import SAMPLES, shared
from traceq.model import nesting, on_disk
from traceq.readers import chunks, read_trace
from traceq.readers.chrome import decoder


@pytest.mark.parametrize(
    "name", ["kineto_conformer_fp16_b4_2steps.json.gz", "paddlefmt_conformer_fp16_b64_2steps.json.gz"]
)
def test_a_spilled_read_in_small_chunks_equals_the_whole_read(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = read_trace(SAMPLES / name)
    assert len(decoder.read_chrome_trace(SAMPLES / name).chunks) == 1
    monkeypatch.setattr(decoder, "CHUNK", 1 << 16)  # 64 KB of JSON decoded at a time
    monkeypatch.setattr(chunks, "CHUNK_ROWS", 2000)
    spill = tmp_path / "spill"
    result = read_trace(SAMPLES / name, spill_dir=spill)
    assert len(list(spill.glob("chunk-*.arrow"))) > 5  # the decoded chunks wait on disk
    assert isinstance(result.tables.events, pl.LazyFrame)
    events = result.tables.collect().events
    # rows in the trace's order, each joined back to its own derived columns across chunk borders
    assert_frame_equal(events, whole.tables.events)
    # and independently of traceq: the file's timed complete and instant events, in its order
    with gzip.open(SAMPLES / name) as f:
        listed = [e for e in json.load(f)["traceEvents"] if e.get("ph") in ("X", "i", "I") and "ts" in e]
    assert events.height == len(listed) > 10 * chunks.CHUNK_ROWS
    assert events["dur_ns"].to_list() == [max(0, round(e.get("dur", 0) * 1000)) for e in listed]
    assert_frame_equal(result.tables.steps, whole.tables.steps)
    assert_frame_equal(result.tables.threads, whole.tables.threads)
    assert result.overview == whole.overview
    assert result.tables.kernel_classes.sort("name").equals(whole.tables.kernel_classes.sort("name"))
    assert result.warnings == whole.warnings


def test_a_spilled_read_streams_the_events_into_parquet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
    whole = read_trace(path).tables.events
    monkeypatch.setattr(chunks, "CHUNK_ROWS", 2000)
    result = read_trace(path, spill_dir=tmp_path / "spill")
    out = tmp_path / "events.parquet"
    result.tables.events.sink_parquet(out)
    assert_frame_equal(pl.read_parquet(out), whole)


@pytest.mark.parametrize(
    "path",
    [
        SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz",
        SAMPLES / "paddlefmt_conformer_fp32_b64_2steps.json.gz",
        SAMPLES / "paddle331_cpu_fp32_noshapes.paddle_trace.json.gz",
        shared("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"),
    ],
    ids=lambda p: p.name,
)
def test_a_model_built_on_disk_in_small_batches_equals_the_one_built_in_memory(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = read_trace(path)
    monkeypatch.setattr(on_disk, "MIN_EVENTS", 0)
    monkeypatch.setattr(on_disk, "BUCKET_ROWS", 1500)  # many buckets of start times, each cutting open ops
    walked: list[int] = []
    nest = nesting.nest_with_open_ranges

    def counted(events: pl.DataFrame, tolerance_ns: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
        nested, still_open = nest(events, tolerance_ns)
        walked.append(still_open.height)
        return nested, still_open

    monkeypatch.setattr(on_disk, "nest_with_open_ranges", counted)
    spill = tmp_path / "spill"
    result = read_trace(path, spill_dir=spill)
    assert (spill / "model").is_dir()
    assert len(walked) > 5 and max(walked) > 1  # batches ended inside nested ops
    events = result.tables.events
    assert isinstance(events, pl.LazyFrame)
    assert_frame_equal(events.collect(), whole.tables.events)
    assert_frame_equal(events.collect(), whole.tables.events)  # again: the model's rows stay until the spill goes
    assert_frame_equal(result.tables.steps, whole.tables.steps)
    assert result.overview == whole.overview
    assert result.warnings == whole.warnings


def test_a_model_built_on_disk_writes_the_key_columns_as_read_with_negative_durations_as_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The on-disk model keeps only what it derives: times, threads and correlations are read again from
    the chunks, durations clipped there as in the model."""
    with gzip.open(SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz") as f:
        trace = json.load(f)
    timed = [e for e in trace["traceEvents"] if e.get("ph") == "X" and "ts" in e]
    for e in timed[::97]:  # a few calls, ops and kernels of every kind end before they start
        e["dur"] = -e.get("dur", 1) - 1
    path = tmp_path / "negative.json"
    path.write_text(json.dumps(trace))
    whole = read_trace(path)
    monkeypatch.setattr(on_disk, "MIN_EVENTS", 0)
    monkeypatch.setattr(on_disk, "BUCKET_ROWS", 5000)
    spill = tmp_path / "spill"
    result = read_trace(path, spill_dir=spill)
    assert not {"ts_ns", "dur_ns", "tid", "correlation"} & set(
        pl.read_ipc_stream(next((spill / "model").glob("rows-*"))).columns
    )
    events = result.tables.collect().events
    assert_frame_equal(events, whole.tables.events)
    negative = {(e["pid"], e["tid"], round(e["ts"] * 1000)) for e in timed[::97]}
    clipped = events.filter(
        pl.struct("pid", "tid", "ts_ns").is_in([{"pid": p, "tid": t, "ts_ns": ts} for p, t, ts in negative])
    )
    assert clipped.height >= len(negative) and set(clipped["dur_ns"]) == {0}
    assert result.warnings == whole.warnings and any(
        f"{len(negative)} events had negative" in w for w in result.warnings
    )


@pytest.mark.parametrize("on_disk_build", [False, True], ids=["in memory", "on disk"])
def test_the_events_per_kind_are_the_events_kinds_with_ranges_made_steps(
    on_disk_build: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the catalog says of a run's events per kind is counted from the events as stored: the user's
    ``train_step`` ranges of an Nsight Systems capture, read as NVTX op ranges, are steps there (the
    counts as read said ``op`` for them: 3 more ops, no step)."""
    capture = SAMPLES / "planted" / "leaseO" / "nsys_user_conformer_fp32_b4_3steps.sqlite.gz"
    if on_disk_build:
        monkeypatch.setattr(on_disk, "MIN_EVENTS", 0)
        monkeypatch.setattr(on_disk, "BUCKET_ROWS", 5000)
    result = read_trace(capture, spill_dir=tmp_path / "spill")
    assert result.model_on_disk == on_disk_build
    events = result.tables.collect().events
    assert result.overview.by_kind == dict(events.group_by("kind").len().iter_rows())
    steps = events.filter(pl.col("kind") == "step")
    assert sorted(steps["name"].to_list()) == [f"train_step {i}" for i in (4, 5, 6)]
    assert result.overview.n_events == events.height
