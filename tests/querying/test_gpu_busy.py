"""gpu_busy against an independent interval-union computation on real traces, and on tiny edge cases."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.conftest import PairStore, raw_trace, shared, window_offsets
from traceq.ingestion.ingest import run_name
from traceq.model.build import build_run_tables
from traceq.querying.engine import query
from traceq.store import Store

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
STEP = re.compile(r"^Profiler?Step#(\d+)")


def _union_ns(intervals: list[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0.0)


def _independent_busy(path: Path, windows: dict[int, tuple[int, int]], kernels_only: bool = False) -> dict[int, float]:
    """Busy ns per step from the raw JSON with plain Python: clip to the step's window (``windows``: its
    offsets from the step's start), merge, sum."""
    events = [e for e in raw_trace(path)["traceEvents"] if e.get("ph") == "X"]
    base = int(min(e["ts"] for e in events))  # us since the epoch need 61 bits as ns: subtract first

    def start(e: dict) -> float:  # Paddle: the relative start_time is finer than its floored ts
        rel = (e.get("args") or {}).get("start_time")
        return float(rel.removesuffix(" us")) * 1000 if rel else (e["ts"] - base) * 1000

    steps = {
        int(STEP.match(e["name"]).group(1)): (start(e), start(e) + e["dur"] * 1000)
        for e in events
        if e.get("cat") in ("user_annotation", "ProfileStep") and STEP.match(e["name"])
    }
    cats = {"kernel", "Kernel"} if kernels_only else GPU_CATS
    work = [(start(e), start(e) + e["dur"] * 1000) for e in events if e.get("cat") in cats]
    out = {}
    for step, (step_start, _) in steps.items():
        lo, hi = step_start + windows[step][0], step_start + windows[step][1]
        clipped = [(max(s, lo), min(e, hi)) for s, e in work if s < hi and e > lo]
        out[step] = _union_ns(clipped)
    return out


@pytest.mark.parametrize(
    ("rel", "pair"),
    [
        ("kineto/conformer_fp16_b64.json.gz", "kineto_b64"),
        ("kineto/conformer_fp32_b4.json.gz", "kineto_b4"),
        ("paddle-gpu-layout/paddlefmt_conformer_fp32_b64.json.gz", "paddle_b64"),
        ("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", None),
    ],
    ids=lambda v: v if v is None or "/" not in v else Path(v).name.split(".")[0],
)
def test_busy_equals_an_independent_interval_union(
    rel: str, pair: str | None, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """On its own store, or on the session's store of the pair it belongs to (this run only)."""
    path = shared(rel)
    if pair is None:
        traceq.ingest([path], store=tmp_path / "s")
        got, windows = query("gpu_busy", tmp_path / "s"), window_offsets(tmp_path / "s")
    else:
        pairs: PairStore = request.getfixturevalue(pair)
        got = query("gpu_busy", pairs.path, run_name(path))
        windows = window_offsets(pairs.path, run_name(path))
    assert got["device"].n_unique() == 1
    busy = dict(zip(got["step"], got["busy_ns"], strict=True))
    kernel_busy = dict(zip(got["step"], got["kernel_busy_ns"], strict=True))
    want, want_k = _independent_busy(path, windows), _independent_busy(path, windows, kernels_only=True)
    assert set(busy) == set(want)
    for step in want:  # each side rounds microseconds to ns on its own: a few ns apart at most
        assert abs(busy[step] - want[step]) <= 4, step
        assert abs(kernel_busy[step] - want_k[step]) <= 4, step
    assert (got["busy_ns"] <= got["window_ns"]).all()
    assert ((got["idle_ns"] + got["busy_ns"]) == got["window_ns"]).all()


def test_amp_halves_busy_time_at_batch_64(kineto_b64: PairStore) -> None:
    store = kineto_b64.path
    names = traceq.sql("select run_id, name from runs", store)
    busy = query("gpu_busy", store).join(names, on="run_id").group_by("name").agg(pl.col("busy_ns").mean() / 1e6)
    ms = dict(busy.iter_rows())
    assert 40 < ms["conformer_fp32_b64"] < 50 and 18 < ms["conformer_fp16_b64"] < 25


def _tiny_run(store: Path, rows: list[tuple[str, int, int, int]]) -> None:
    """rows: (kind, ts_ns, dur_ns, stream) on device 0, inside one step [0, 1000)."""
    events = pl.DataFrame(
        {
            "kind": ["step"] + [r[0] for r in rows],
            "name": ["ProfilerStep#1"] + [f"k{i}" for i in range(len(rows))],
            "ts_ns": [0] + [r[1] for r in rows],
            "dur_ns": [1000] + [r[2] for r in rows],
            "stream": [None] + [r[3] for r in rows],
            "device": [None] + [0] * len(rows),
            "pid": [1] * (len(rows) + 1),
            "tid": [1] + [r[3] for r in rows],
        },
        schema_overrides={"stream": pl.Int64, "device": pl.Int32},
    )
    tables = build_run_tables(events)
    row = pl.DataFrame({"name": ["tiny"], "source_hash": ["x"]})
    Store(store).write_run("rtiny00000000", row, {0: tables})


def test_touching_nested_overlapping_and_clipped_intervals(tmp_path: Path) -> None:
    _tiny_run(
        tmp_path,
        [
            ("kernel", 100, 100, 7),  # [100, 200)
            ("kernel", 150, 20, 8),  # nested on another stream
            ("kernel", 200, 50, 7),  # touches: merged -> [100, 250)
            ("memcpy", 240, 60, 9),  # overlaps -> [100, 300) for all work, kernels stop at 250
            ("kernel", 900, 300, 7),  # runs past the step end: clipped to [900, 1000)
        ],
    )
    row = query("gpu_busy", tmp_path).row(0, named=True)
    assert (row["window_ns"], row["busy_ns"], row["kernel_busy_ns"], row["idle_ns"]) == (1000, 300, 250, 700)
    assert row["idle_ratio"] == pytest.approx(0.7)
