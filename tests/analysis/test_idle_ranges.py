"""Idle time in no op is charged to the top-level range of the user's or of a library it falls in (an
annotation: ``Optimizer.step#Adam.step``, an NVTX range that PyTorch did not make), so that Python between
ops and host time not attributed say where they were spent; a launch in no op and no range is charged to the
runtime call it lies in. The ranges and calls are read from the raw files (json, sqlite3); the pieces are
``_idle_pieces``' (the input of the charges under test)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.conftest import SAMPLES, SHARED, Ingested
from traceq.analysis.causes import HOST_UNATTRIBUTED, PYTHON_OVERHEAD
from traceq.querying.engine import Session
from traceq.render.reports import BETWEEN, sites_table
from traceq.store import Store

KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
NVFUSER = SHARED / "nsys" / "nvfuser_report1__nsys2024.6.2.sqlite.gz"


def _charged_by_start(pieces: pl.DataFrame, ranges: list[tuple[int, int, int, int]]) -> int:
    """The idle ns of ``pieces`` that begin inside one of ``ranges`` (pid, tid, start, end) on its thread."""
    total = 0
    for pid, tid, start, end in ranges:
        inside = pieces.filter(
            (pl.col("pid") == pid) & (pl.col("tid") == tid) & (pl.col("piece_start") >= start)
            & (pl.col("piece_start") < end)
        )  # fmt: skip
        total += int(inside["ns"].sum())
    return total


def test_python_between_the_optimizers_ops_is_charged_to_its_step_range(ingested: Ingested) -> None:
    events = json.loads(gzip.decompress(KINETO.read_bytes()))["traceEvents"]
    ranged = [e for e in events if e.get("cat") == "user_annotation" and "dur" in e]
    host = [e for e in ranged if not e["name"].startswith("ProfilerStep#")]  # (the profiler's steps are steps)
    steps = [e for e in host if e["name"] == "Optimizer.step#Adam.step"]
    assert len(steps) == 2
    for e in host:  # each is top-level: no other user range of its thread encloses it
        assert not any(
            o is not e and o["tid"] == e["tid"] and o["ts"] <= e["ts"] and o["ts"] + o["dur"] >= e["ts"] + e["dur"]
            for o in host
        )
    ranges = [(e["pid"], e["tid"], round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in steps]
    store = Store(ingested.store(KINETO))
    (run_id,) = traceq.runs(store)["run_id"]
    with Session(store, [run_id]) as s:
        pieces = s.query("_idle_pieces").filter(pl.col("cause") == PYTHON_OVERHEAD.id)
        sites = s.query("idle_sites").filter(pl.col("cause") == PYTHON_OVERHEAD.id)
    want = _charged_by_start(pieces, ranges)
    assert want > 0.5e6  # half a millisecond over the two steps
    assert sites.filter(pl.col("site") == "Optimizer.step#Adam.step")["idle_ns"].sum() == want
    report = traceq.run_report(run_id, store)
    finding = next(f for f in report.findings if f.id == PYTHON_OVERHEAD.id)
    (named,) = [r for r in finding.evidence["in_ranges"] if r["site"] == "Optimizer.step#Adam.step"]
    assert named["idle_ms_per_step"] == pytest.approx(want / 2 / 1e6) and named["ranges_per_step"] == 1


@pytest.fixture(scope="module")
def nvfuser(tmp_path_factory: pytest.TempPathFactory) -> Path:
    plain = tmp_path_factory.mktemp("nvfuser") / NVFUSER.name.removesuffix(".gz")
    with gzip.open(NVFUSER) as src, plain.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return plain


def test_nvfusers_compile_is_named_where_its_idle_time_lies(nvfuser: Path, ingested: Ingested) -> None:
    """nvFuser's own NVTX ranges are no PyTorch ops (no ``op_id``): the GPU's idle time while it compiles is
    host time not attributed, in the range ``KernelExecutor::compileFusion``, not launch overhead."""
    with sqlite3.connect(f"file:{nvfuser}?mode=ro", uri=True) as db:
        query = "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId"
        texts = [t for (t,) in db.execute(query + " WHERE e.eventType = 59")]
        ((start, end, gtid),) = db.execute(
            "SELECT e.start, e.end, e.globalTid FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
            "WHERE coalesce(e.text, s.value) = 'KernelExecutor::compileFusion'"
        ).fetchall()
        runs = db.execute(
            "SELECT e.globalTid / 16777216 % 16777216, e.globalTid % 16777216, e.start, e.end FROM NVTX_EVENTS e "
            "LEFT JOIN StringIds s ON s.id = e.textId WHERE coalesce(e.text, s.value) = 'KernelExecutor::runFusion'"
        ).fetchall()
    assert texts and not any(", op_id = " in t for t in texts)
    store = Store(ingested.store(NVFUSER))
    (run_id,) = traceq.runs(store)["run_id"]
    with Session(store, [run_id]) as s:
        kinds = s.sql("SELECT DISTINCT kind FROM events WHERE category LIKE 'NVTX domain %'")["kind"].to_list()
        all_pieces = s.query("_idle_pieces")
    pieces = all_pieces.filter(pl.col("cause") == HOST_UNATTRIBUTED.id)
    assert kinds == ["annotation"]
    pid, tid = gtid // 0x1000000 % 0x1000000, gtid % 0x1000000
    want = _charged_by_start(pieces, [(pid, tid, start, end)])
    assert want > 0.5 * (end - start)  # the GPU idles through most of the compile
    report = traceq.run_report(run_id, store)
    assert not any(f.id == "launch_overhead" and f.impact_ms > 100 for f in report.findings)
    finding = next(f for f in report.findings if f.id == HOST_UNATTRIBUTED.id)
    top = finding.evidence["in_ranges"][0]
    assert top["site"] == "KernelExecutor::compileFusion"
    assert top["idle_ms_per_step"] == pytest.approx(want / 1e6)
    # launching from nvFuser's runFusion, in no op: that range is the one the GPU waited on
    launching = _charged_by_start(all_pieces.filter(pl.col("cause") == "launch_overhead"), runs)
    assert launching > 1e6
    waited = next(f for f in report.findings if f.id == "launch_overhead").evidence["ops_the_gpu_waited_on"]
    (named,) = [r for r in waited if r["top_op"] == "KernelExecutor::runFusion"]
    assert named["idle_ms_per_step"] == pytest.approx(launching / 1e6)


def test_launching_in_no_op_is_charged_to_the_runtime_call_it_lies_in(nvfuser: Path, ingested: Ingested) -> None:
    """Launch overhead in no op and no annotation is charged to the runtime call it lies in, and the sites
    table names that call: each such piece begins inside a CUDA runtime call of the export on its thread (read
    with sqlite3); the outermost of them (the first to begin) has the site's name, less the API version the
    reader drops (``cudaGetDeviceProperties_v2_v12000`` is ``cudaGetDeviceProperties_v2``)."""
    with sqlite3.connect(f"file:{nvfuser}?mode=ro", uri=True) as db:
        calls = db.execute(
            "SELECT r.globalTid / 16777216 % 16777216, r.globalTid % 16777216, r.start, r.end, s.value "
            "FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
        ).fetchall()
    store = Store(ingested.store(NVFUSER))
    (run_id,) = traceq.runs(store)["run_id"]
    with Session(store, [run_id]) as s:
        charged = s.query("_idle_charges").filter(pl.col("cause") == "launch_overhead")
        sites = s.sql("SELECT event_id AS site_id, kind, name FROM events WHERE kind = 'runtime'")
    pieces = charged.join(sites, on="site_id")  # those charged to a runtime call
    assert pieces.height > 100 and charged["site_id"].null_count() == 0
    by_thread: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
    for pid, tid, start, end, name in calls:
        by_thread.setdefault((pid, tid), []).append((start, end, re.sub(r"_v\d+$", "", name)))
    for piece in pieces.iter_rows(named=True):
        inside = [c for c in by_thread[(piece["pid"], piece["tid"])] if c[0] <= piece["piece_start"] < c[1]]
        assert inside and min(inside)[2] == piece["name"]
    table = sites_table(traceq.run_report(run_id, store))
    launch = table.filter(pl.col("cause") == "launch_overhead")
    assert BETWEEN not in launch["call"].to_list()
    runtime_names = set(pieces["name"])
    named = launch.filter(pl.col("call").is_in(runtime_names))
    assert named.height > 0 and named["in op"].null_count() == named.height
