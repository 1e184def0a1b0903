"""Reading a chrome trace chunk by chunk with its chunks spilled to disk gives the same tables."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.conftest import SAMPLES
from traceq.readers import chrome_json, chunks, read_trace


@pytest.mark.parametrize(
    "name", ["kineto_conformer_fp16_b4_2steps.json.gz", "paddlefmt_conformer_fp16_b64_2steps.json.gz"]
)
def test_a_spilled_read_in_small_chunks_equals_the_whole_read(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = read_trace(SAMPLES / name)
    assert len(chrome_json.read_chrome_trace(SAMPLES / name).chunks) == 1
    monkeypatch.setattr(chrome_json, "CHUNK", 1 << 16)  # 64 KB of JSON decoded at a time
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
    assert_frame_equal(result.overview, whole.overview)
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
