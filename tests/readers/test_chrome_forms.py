"""Chrome-trace forms and damage: bare arrays, truncation, Paddle quirks."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SAMPLES, raw_trace, shared
from traceq.errors import InputError
from traceq.readers import read_trace

KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
PADDLE_GPU = SAMPLES / "paddlefmt_conformer_fp16_b64_2steps.json.gz"
KEPT_PHASES = {"X", "i", "I"}


def _text(path: Path) -> str:
    return gzip.open(path, "rt").read()


def _kept(events: list[dict]) -> int:
    return sum(1 for e in events if e.get("ph") in KEPT_PHASES)


def test_bare_array_reads_like_the_object_form(tmp_path: Path) -> None:
    events = raw_trace(KINETO)["traceEvents"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(events))
    got = read_trace(bare).tables.events
    want = read_trace(KINETO).tables.events
    assert got.height == _kept(events) == want.height
    assert got.select("kind", "name", "ts_ns", "dur_ns").equals(want.select("kind", "name", "ts_ns", "dur_ns"))


def test_plain_json_reads_like_gzip(tmp_path: Path) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(_text(PADDLE_GPU))
    assert read_trace(plain).tables.events.equals(read_trace(PADDLE_GPU).tables.events)


@pytest.mark.parametrize("fraction", [0.13, 0.5, 0.77, 0.999])
@pytest.mark.parametrize("sample", [KINETO, PADDLE_GPU], ids=["kineto", "paddle"])
def test_truncated_file_keeps_every_complete_event(tmp_path: Path, sample: Path, fraction: float) -> None:
    text = _text(sample)
    cut = int(len(text) * fraction)
    cut_path = tmp_path / "cut.json"
    cut_path.write_text(text[:cut])
    # independent count: the samples hold one event per line; a line is complete if it ends before the cut
    start = text.index('"traceEvents"')
    complete = 0
    for line in text[start:cut].split("\n")[1:-1]:
        stripped = line.strip().rstrip(",")
        if stripped.startswith("{") and stripped.endswith("}"):
            event = json.loads(stripped)
            complete += event.get("ph") in KEPT_PHASES
    result = read_trace(cut_path)
    assert result.tables.events.height == complete
    assert any("truncated" in w for w in result.warnings)


def test_gzip_cut_short_keeps_what_was_decompressed(tmp_path: Path) -> None:
    data = KINETO.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    result = read_trace(cut)
    assert 1000 < result.tables.events.height < read_trace(KINETO).tables.events.height
    assert any("gzip stream ends early" in w for w in result.warnings)


def test_paddle_names_lose_their_duration_suffix() -> None:
    events = read_trace(PADDLE_GPU).tables.events
    assert not events["name"].str.contains(r"\[[0-9.]+ (ms|us)\]$").any()
    raw_names = {e["name"] for e in raw_trace(PADDLE_GPU)["traceEvents"] if e.get("cat") == "ProfileStep"}
    assert raw_names and all(n.startswith("ProfileStep#") and n.endswith(" ms]") for n in raw_names)
    assert set(events.filter(pl.col("kind") == "step")["name"]) == {n.split("[")[0] for n in raw_names}


def test_paddle_times_stay_within_a_microsecond_of_ts() -> None:
    """Paddle's ts is floored to whole us; traceq's ns times come from the finer relative times."""
    path = shared("paddle/cpu_paddle_3.3.1/paddle_fp32.paddle_trace.json.gz")
    raw = sorted(e["ts"] for e in raw_trace(path)["traceEvents"] if e.get("ph") == "X")
    got = sorted(read_trace(path).tables.events.filter(pl.col("dur_ns") > 0)["ts_ns"].to_list())
    assert len(raw) == len(got)
    assert max(abs(g / 1000 - r) for g, r in zip(got, raw, strict=True)) <= 1.0


def test_paddle_host_tids_are_os_threads_and_gpu_events_get_device_and_stream() -> None:
    events = read_trace(PADDLE_GPU).tables.events
    raw = [e for e in raw_trace(PADDLE_GPU)["traceEvents"] if e.get("cat") == "Operator"]
    assert set(events.filter(pl.col("kind") == "op")["tid"]) == {int(e["tid"].split("(")[0]) for e in raw}
    gpu = events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert gpu["device"].null_count() == 0 and gpu["stream"].null_count() == 0
    memcpy_bytes = sum(e["args"]["bytes"] for e in raw_trace(PADDLE_GPU)["traceEvents"] if e.get("cat") == "Memcpy")
    assert events.filter(pl.col("kind") == "memcpy")["bytes"].sum() == memcpy_bytes


def test_paddle_unescaped_quote_in_a_name_is_repaired(tmp_path: Path) -> None:
    text = _text(PADDLE_GPU)
    target = '"name": "aten::addmm['
    assert target in text
    broken = text.replace(target, '"name": "aten::addmm "fused" x[', 1)
    path = tmp_path / "broken.paddle_trace.json"
    path.write_text(broken)
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken)
    result = read_trace(path)
    assert 'aten::addmm "fused" x' in set(result.tables.events["name"])
    assert result.tables.events.height == read_trace(PADDLE_GPU).tables.events.height
    assert any("repaired" in w for w in result.warnings)


def test_kineto_input_dtypes_and_shapes_are_kept() -> None:
    path = shared("kineto/conformer_fp16_b4_shapes.json.gz")
    raw = [e for e in raw_trace(path)["traceEvents"] if e.get("cat") == "cpu_op" and "Input type" in e["args"]]
    ops = read_trace(path).tables.events.filter((pl.col("kind") == "op") & pl.col("input_dtypes").is_not_null())
    assert ops.height == len(raw)
    half = sum(1 for e in raw if "c10::Half" in e["args"]["Input type"])
    assert ops.filter(pl.col("input_dtypes").list.contains("c10::Half")).height == half > 0
    assert ops["input_shapes"].null_count() == 0


def test_unknown_args_are_kept_as_json() -> None:
    events = read_trace(KINETO).tables.events
    kernel = events.filter(pl.col("kind") == "kernel").row(0, named=True)
    args = json.loads(kernel["args"])
    assert {"grid", "block", "registers per thread"} <= args.keys()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"hello, not json", "not a trace"),
        (b'{"a": 1, "b": [1, 2]}', "without a traceEvents array"),
        (b'{"traceEvents": []}', "no events"),
        (b"   \n", "only whitespace"),
        (b'{"traceEvents": [ {"ph": "X", "name"', "no events"),
    ],
)
def test_bad_content_is_a_one_line_input_error(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        read_trace(path)
    assert problem in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "path", [PADDLE_GPU, shared("paddle/cpu_paddle_3.3.1/paddle_fp32.paddle_trace.json.gz")], ids=lambda p: p.name
)
def test_paddle_relative_times_are_anchored_at_the_median_offset_to_ts(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The anchor is the exact median over every event, though it is found from counts chunk by chunk."""
    from traceq.readers import chunks
    from traceq.readers.chrome import decoder, paddle

    timed = [e for e in raw_trace(path)["traceEvents"] if e.get("ph") in ("X", "i", "I") and "ts" in e]
    base = int(min(e["ts"] for e in timed))
    offsets = [
        round((e["ts"] - base) * 1000) + base * 1000 + 500 - round(float(str(rel).split()[0]) * 1000)
        for e in timed
        if (rel := (e.get("args") or {}).get("start_time")) is not None
    ]
    monkeypatch.setattr(decoder, "CHUNK", 1 << 16)  # 64 KB of JSON decoded at a time
    monkeypatch.setattr(chunks, "CHUNK_ROWS", 1000)
    trace = decoder.read_chrome_trace(path)
    assert len(trace.chunks) > 3
    assert paddle.params(trace).origin_ns == int(statistics.median(offsets))
