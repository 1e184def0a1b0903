"""Every real chrome trace ingests, and its counts match an independent count of the raw JSON."""

from __future__ import annotations

import bisect
import itertools
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import chrome_traces, raw_trace
from traceq.readers import read_trace
from traceq.readers.chrome.decoder import read_chrome_trace

#: The model's kinds for the categories these traces use, stated independently of traceq's table.
EXPECTED_KIND = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "CudaRuntime": "runtime",
    "cpu_op": "op",
    "Operator": "op",
    "OperatorInner": "op_inner",
    "DygraphKernelLaunch": "op_inner",
    "StaticKernelLaunch": "op_inner",
}
STEP = re.compile(r"^Profiler?Step#\d+")
GPU = {"kernel", "memcpy", "memset"}


def _expected(path: Path) -> dict:
    events = [e for e in raw_trace(path)["traceEvents"] if e.get("ph") == "X"]
    kinds = Counter(EXPECTED_KIND[e["cat"]] for e in events if e.get("cat") in EXPECTED_KIND)
    steps = sum(
        1 for e in events if e.get("cat") in ("user_annotation", "ProfileStep") and STEP.match(e.get("name", ""))
    )
    kernels = [e for e in events if EXPECTED_KIND.get(e.get("cat")) == "kernel"]
    return {
        "kinds": kinds,
        "steps": steps,
        "kernel_ns": sum(e["dur"] * 1000 for e in kernels),
        "n_kernels": len(kernels),
    }


def _corr(e: dict) -> int | None:
    a = e.get("args") or {}
    return a.get("correlation", a.get("correlation id"))


@pytest.fixture(scope="module", params=chrome_traces(), ids=lambda p: p.name)
def trace(request: pytest.FixtureRequest) -> tuple[Path, pl.DataFrame, pl.DataFrame]:
    result = read_trace(request.param)
    return request.param, result.tables.events, result.tables.steps


def test_counts_by_kind_match_raw_json(trace: tuple[Path, pl.DataFrame, pl.DataFrame]) -> None:
    path, events, steps = trace
    expected = _expected(path)
    got = dict(events.group_by("kind").len().iter_rows())
    for kind, n in expected["kinds"].items():
        assert got.get(kind, 0) == n, kind
    assert steps.height == expected["steps"]
    assert got.get("step", 0) == expected["steps"]


def test_total_kernel_time_matches_raw_json(trace: tuple[Path, pl.DataFrame, pl.DataFrame]) -> None:
    path, events, _ = trace
    expected = _expected(path)
    kernels = events.filter(pl.col("kind") == "kernel")
    assert kernels.height == expected["n_kernels"]
    # each duration is rounded to a whole ns once: at most 0.5 ns apart per kernel
    assert abs(kernels["dur_ns"].sum() - expected["kernel_ns"]) <= 0.5 * max(1, kernels.height)


def test_every_gpu_event_has_its_launch_and_op(trace: tuple[Path, pl.DataFrame, pl.DataFrame]) -> None:
    path, events, _ = trace
    raw = [e for e in raw_trace(path)["traceEvents"] if e.get("ph") == "X"]
    calls = {_corr(e) for e in raw if EXPECTED_KIND.get(e.get("cat")) == "runtime"}
    raw_gpu = [e for e in raw if EXPECTED_KIND.get(e.get("cat")) in GPU]
    unlaunched = sum(1 for e in raw_gpu if _corr(e) not in calls)  # the call was not captured
    gpu = events.filter(pl.col("kind").is_in(GPU))
    assert gpu.height == len(raw_gpu)
    assert gpu["launch_id"].null_count() == unlaunched
    gpu = gpu.filter(pl.col("launch_id").is_not_null())
    assert gpu["op_id"].null_count() == 0
    launches = gpu.join(events, left_on="launch_id", right_on="event_id", suffix="_launch")
    assert (launches["kind_launch"] == "runtime").all()
    assert (launches["correlation"] == launches["correlation_launch"]).all()
    # the op encloses the launch call in time, on the launching thread
    ops = launches.join(events, left_on="op_id", right_on="event_id", suffix="_op")
    # an op, or where no op encloses the launch (fused optimizers called from Python) an annotation
    assert ops["kind_op"].is_in(["op", "annotation"]).all()
    assert ops.is_empty() or (ops["kind_op"] == "op").mean() > 0.99
    assert ((ops["pid_op"] == ops["pid_launch"]) & (ops["tid_op"] == ops["tid_launch"])).all()
    slack = 1000  # whole-microsecond sources
    assert (ops["ts_ns_op"] <= ops["ts_ns_launch"] + slack).all()
    assert (ops["ts_ns_op"] + ops["dur_ns_op"] + slack >= ops["ts_ns_launch"] + ops["dur_ns_launch"]).all()


def test_event_ids_are_dense_and_number_events_in_time_order(trace: tuple[Path, pl.DataFrame, pl.DataFrame]) -> None:
    """Ids 0..n-1 follow start time, longest first on equal starts (rows keep the trace's order)."""
    _, events, _ = trace
    assert sorted(events["event_id"].to_list()) == list(range(events.height))
    by_id = events.sort("event_id")
    assert by_id["ts_ns"].is_sorted()
    tie = by_id["ts_ns"] == by_id["ts_ns"].shift(1)
    assert (by_id["dur_ns"].filter(tie) <= by_id["dur_ns"].shift(1).filter(tie)).all()
    assert events["dur_ns"].min() >= 0


@pytest.mark.parametrize(
    "rel",
    [
        "kineto/conformer_fp16_b4.json.gz",
        "kineto/conformer_fp32_b4_shapes.json.gz",
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    ],
)
def test_kineto_launching_op_agrees_with_external_id(rel: str) -> None:
    """Newer Kineto gives kernels the External id of the op that launched them: an independent link."""
    from tests.conftest import shared

    events = read_trace(shared(rel)).tables.events
    kernels = events.filter(pl.col("kind") == "kernel").join(
        events.select(pl.col("event_id").alias("op_id"), pl.col("external_id").alias("op_external_id")),
        on="op_id",
    )
    assert kernels.height > 1000
    assert (kernels["external_id"] == kernels["op_external_id"]).all()


def test_launches_outside_any_op_are_attributed_to_their_annotation() -> None:
    """HTA's A100 trace runs FusedAdam from Python: its kernels have no cpu_op, only an annotation."""
    from tests.conftest import shared

    path = shared("hta/trace_diff/control/control.json.gz")
    raw = [e for e in raw_trace(path)["traceEvents"] if e.get("ph") == "X"]
    ops: dict[object, list[tuple[float, float]]] = {}
    for e in raw:
        if e.get("cat") == "cpu_op":
            ops.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    # per thread, the ops by start and the latest end of those starting so far: a call lies inside some
    # op exactly when an op starting at or before it ends at or after it
    starts = {tid: [a for a, _ in sorted(spans)] for tid, spans in ops.items()}
    reach = {tid: list(itertools.accumulate((b for _, b in sorted(spans)), max)) for tid, spans in ops.items()}

    def inside_an_op(r: dict) -> bool:
        k = bisect.bisect_right(starts.get(r["tid"], []), r["ts"])
        return k > 0 and reach[r["tid"]][k - 1] >= r["ts"] + r["dur"]

    runtime = {e["args"]["correlation"]: e for e in raw if e.get("cat") == "cuda_runtime"}
    orphans = 0
    for k in (e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")):
        if not inside_an_op(runtime[k["args"]["correlation"]]):
            orphans += 1
    events = read_trace(path).tables.events
    owners = events.filter(pl.col("kind").is_in(GPU)).join(
        events.select(
            pl.col("event_id").alias("op_id"), pl.col("kind").alias("owner_kind"), pl.col("name").alias("owner")
        ),
        on="op_id",
    )
    by_annotation = owners.filter(pl.col("owner_kind") == "annotation")
    assert orphans > 0
    assert by_annotation.height == orphans
    assert set(by_annotation["owner"]) == {"Optimizer.step#FusedAdam.step"}


def test_the_real_traces_are_all_here() -> None:
    """The parametrised tests above run on the shared traces: fail loudly if they are missing."""
    names = {p.name for p in chrome_traces()}
    assert len(names) >= 24
    assert {"conformer_fp16_b64.json.gz", "df_index_resolver.json.gz", "paddlefmt_conformer_fp16_b64.json.gz"} <= names


@pytest.mark.parametrize("path", chrome_traces(), ids=lambda p: p.name)
def test_ids_parsed_once_per_distinct_value_equal_the_per_event_parse(path: Path) -> None:
    from traceq.readers.chrome.common import id_ints, leading_int, leading_int_of

    raw = read_chrome_trace(path).events
    for col in ("pid_raw", "tid_raw"):
        ints = id_ints(raw.get_column(col).unique().drop_nulls())
        assert raw.select(leading_int_of(col, ints)).equals(raw.select(leading_int(col)))
