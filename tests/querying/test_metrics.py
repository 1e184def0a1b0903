"""Gaps, launch-bound ratio, casts, coverage and the op table, against independent counts on real traces."""

from __future__ import annotations

import itertools
import re
import statistics
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.conftest import PairStore, raw_trace, shared, window_offsets
from tests.raw_casts import raw_conversions
from traceq.querying.engine import query

STEP = re.compile(r"^ProfilerStep#(\d+)")


@pytest.fixture
def b64(kineto_b64: PairStore) -> Path:
    return kineto_b64.path


def _by_name(frame: pl.DataFrame, store: Path) -> pl.DataFrame:
    return frame.join(traceq.sql("select run_id, name from runs", store), on="run_id")


def test_amp_at_batch_64_is_more_launch_bound(b64: Path) -> None:
    lb = _by_name(query("launch_bound", b64), b64).group_by("name").agg(pl.col("launch_bound_ratio").mean())
    ratio = dict(lb.iter_rows())
    assert ratio["conformer_fp16_b64"] > ratio["conformer_fp32_b64"] + 0.15
    assert 0 < ratio["conformer_fp32_b64"] < 1 and 0 < ratio["conformer_fp16_b64"] < 1


def test_gaps_add_up_to_idle_time(b64: Path) -> None:
    gaps = query("gpu_gaps", b64).group_by("run_id", "step", "device").agg(pl.col("gap_ns").sum())
    busy = query("gpu_busy", b64).select("run_id", "step", "device", "idle_ns")
    joined = busy.join(gaps, on=["run_id", "step", "device"])
    assert joined.height == busy.height
    assert (joined["gap_ns"] == joined["idle_ns"]).all()


def test_host_launch_gaps_match_an_independent_computation(kineto_b4: PairStore) -> None:
    """Merge each step window's GPU work in Python; a gap is host-launch when the launch of the work after
    it started after the gap began."""
    path = shared("kineto/conformer_fp32_b4.json.gz")
    events = [e for e in raw_trace(path)["traceEvents"] if e.get("ph") == "X"]
    base = int(min(e["ts"] for e in events))

    def ns(t: float) -> float:
        return (t - base) * 1000

    launches = {
        e["args"]["correlation"]: ns(e["ts"]) for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
    }
    work = sorted(
        (ns(e["ts"]), ns(e["ts"]) + e["dur"] * 1000, launches.get(e["args"]["correlation"]))
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    want = {}
    windows = window_offsets(kineto_b4.path, kineto_b4.base)
    for e in events:
        m = STEP.match(e.get("name", "")) if e.get("cat") == "user_annotation" else None
        if not m:
            continue
        lo, hi = ns(e["ts"]) + windows[int(m.group(1))][0], ns(e["ts"]) + windows[int(m.group(1))][1]
        host, cur_end = 0.0, lo
        for s, t, launch in ((max(s, lo), min(t, hi), launch) for s, t, launch in work if s < hi and t > lo):
            if s > cur_end:
                if launch is not None and launch > cur_end:
                    host += s - cur_end
                cur_end = t
            else:
                cur_end = max(cur_end, t)
        want[int(m.group(1))] = host
    got = dict(query("launch_bound", kineto_b4.path, kineto_b4.base).select("step", "host_launch_gap_ns").iter_rows())
    assert set(got) == set(want)
    for step, host in want.items():
        assert abs(got[step] - host) <= 50, step  # ns rounding of a few hundred boundaries


@pytest.mark.parametrize("rel", ["kineto/conformer_fp16_b4_shapes.json.gz", "kineto/conformer_fp32_b4.json.gz"])
def test_cast_conversions_equal_raw_to_copy_counts(rel: str) -> None:
    """Conversions are counted from the raw file (:func:`tests.raw_casts.raw_conversions`): every
    ``aten::_to_copy`` but those that only moved a tensor between host and device, and the copies between
    two dtypes outside them."""
    path = shared(rel)
    want = raw_conversions(path)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        traceq.ingest([path], store=tmp)
        casts = query("cast_overhead", tmp)
    assert dict(casts.select("step", "calls").iter_rows()) == want
    assert (casts["cpu_ns"] > 0).all() and (casts["gpu_ns"] > 0).all()
    if "fp16" in rel:
        assert (casts["round_trips"] > 0).all()


def test_amp_raises_precision_and_tensor_core_coverage(b64: Path) -> None:
    cov = {r["name"]: r for r in _by_name(query("precision_coverage", b64), b64).iter_rows(named=True)}
    assert cov["conformer_fp32_b64"]["fp16_coverage"] == 0
    assert cov["conformer_fp16_b64"]["fp16_coverage"] > 0.85
    assert cov["conformer_fp16_b64"]["tensor_core_coverage"] > cov["conformer_fp32_b64"]["tensor_core_coverage"]


def test_op_table_gpu_time_adds_up_to_linked_gpu_work(b64: Path) -> None:
    ops = query("op_summary", b64).group_by("run_id").agg(pl.col("gpu_ns").sum())
    linked = traceq.sql(
        "select e.run_id, sum(e.dur_ns) gpu from events e join steps s using (run_id, rank) "
        "where e.kind in ('kernel','memcpy','memset') and e.op_id is not null "
        "and e.ts_ns >= s.ts_ns and e.ts_ns + e.dur_ns <= s.ts_ns + s.dur_ns group by e.run_id",
        b64,
    )
    joined = ops.join(linked, on="run_id")
    # op_summary counts ops that start inside a window and clips work to windows; nearly all work qualifies
    assert ((joined["gpu_ns"] - joined["gpu"]).abs() / joined["gpu"] < 0.02).all()


@pytest.mark.parametrize(
    "rel",
    [
        "hta/df_index_resolver/df_index_resolver.json.gz",
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    ],
)
def test_stream_host_wait_follows_htas_definition(rel: str, tmp_path: Path) -> None:
    """HTA's idle-time breakdown per stream, re-implemented from its published definition, per step."""
    path = shared(rel)
    events = [e for e in raw_trace(path)["traceEvents"] if e.get("ph") == "X"]
    base = int(min(e["ts"] for e in events))

    def ns(t: float) -> float:
        return (t - base) * 1000

    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    want: dict[tuple[int, int], float] = {}
    for st in (e for e in events if e.get("cat") == "user_annotation" and STEP.match(e["name"])):
        lo, hi = ns(st["ts"]), ns(st["ts"]) + st["dur"] * 1000
        step = int(STEP.match(st["name"]).group(1))
        by_stream: dict[int, list] = {}
        for e in gpu:
            s, t = ns(e["ts"]), ns(e["ts"]) + e["dur"] * 1000
            if s < hi and t > lo:
                by_stream.setdefault(e["args"]["stream"], []).append(
                    (max(s, lo), min(t, hi), launch.get(e["args"]["correlation"]))
                )
        for stream, items in by_stream.items():
            items.sort()
            host = 0.0
            for (_, prev_end, _), (s, _, launch_ts) in itertools.pairwise(items):
                if s - prev_end > 0 and launch_ts is not None and launch_ts >= prev_end:
                    host += s - prev_end
            want[(step, stream)] = host
    traceq.ingest([path], store=tmp_path)
    got = {(r["step"], r["stream"]): r["host_wait_ns"] for r in query("stream_idle", tmp_path).iter_rows(named=True)}
    assert set(got) == set(want)
    assert sum(want.values()) > 0
    for key, host in want.items():
        assert abs(got[key] - host) <= 100, key


@pytest.mark.parametrize(
    "rel",
    [
        "hta/df_index_resolver/df_index_resolver.json.gz",
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    ],
)
def test_queue_depth_and_launch_medians_match_an_independent_computation(rel: str, tmp_path: Path) -> None:
    """Per step and device: replay launches (+1 at the launch call's start) and GPU starts (-1) in time
    order, a start before a launch at the same instant; a launch sees the events queued before it."""
    path = shared(rel)
    events = [e for e in raw_trace(path)["traceEvents"] if e.get("ph") == "X"]
    runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    traceq.ingest([path], store=tmp_path)
    windows = window_offsets(tmp_path)
    want: dict[tuple[int, int], tuple[float, float, float]] = {}
    for st in (e for e in events if e.get("cat") == "user_annotation" and STEP.match(e["name"])):
        off = windows[int(STEP.match(st["name"]).group(1))]
        lo, hi = st["ts"] + off[0] / 1000, st["ts"] + off[1] / 1000
        by_device: dict[int, list[dict]] = {}
        for e in gpu:
            if e["ts"] < hi and e["ts"] + e["dur"] > lo:
                by_device.setdefault(e["args"]["device"], []).append(e)
        for device, work in by_device.items():
            launched = [(e, runtime[e["args"]["correlation"]]) for e in work if e["args"]["correlation"] in runtime]
            moves = sorted([(r["ts"], 1) for _, r in launched] + [(e["ts"], -1) for e, _ in launched])
            depths, depth = [], 0
            for _, delta in moves:
                depth += delta
                if delta == 1:
                    depths.append(depth - 1)
            kernels = [e for e in work if e.get("cat") == "kernel"]
            want[(int(STEP.match(st["name"]).group(1)), device)] = (
                statistics.median(depths),
                statistics.median(e["dur"] for e in kernels) * 1000,  # whole, not clipped to the window
                statistics.median(r["dur"] for e, r in launched if e.get("cat") == "kernel") * 1000,
            )
    got = {
        (r["step"], r["device"]): (r["median_queue_depth"], r["median_kernel_ns"], r["median_launch_ns"])
        for r in query("launch_bound", tmp_path).iter_rows(named=True)
    }
    assert set(got) == set(want)
    assert any(depth >= 2 for depth, _, _ in want.values())  # queues that a wrong count would show
    for key, (depth, kernel_ns, launch_ns) in want.items():
        assert got[key][0] == depth, key
        assert got[key][1] == pytest.approx(kernel_ns, abs=1), key
        assert got[key][2] == pytest.approx(launch_ns, abs=1), key
