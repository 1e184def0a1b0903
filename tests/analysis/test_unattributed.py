"""A cause is named only on its own evidence: GPU idle time while the host is in no recorded call, outside
its step's framework ops, is host time not attributed (``host_unattributed``), not data loading or Python.
The expected times are computed from the raw files (json, sqlite3) as the GPU's idle time that no host call
covers."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, SHARED
from traceq import run_report

DATA_LOADING = re.compile(r"(?i)dataloader|__getitem__|collate|_next_data|dataset\.py")


def _union(intervals: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _uncovered(window: tuple[float, float], covered: list[tuple[float, float]]) -> float:
    """The part of ``window`` that no interval of ``covered`` overlaps."""
    lo, hi = window
    inside = sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in _union(covered))
    return hi - lo - inside


def _nsys_rows(path: Path, tmp_path: Path, table: str) -> list[tuple[int, int]]:
    plain = tmp_path / path.name.removesuffix(".gz")
    if not plain.exists():
        with gzip.open(path) as src, plain.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    with sqlite3.connect(plain) as db:
        names = {r[0] for r in db.execute("select name from sqlite_master where type = 'table'")}
        assert not {n for n in names if "NVTX" in n}, "the capture has NVTX ranges"
        return db.execute(f"select start, end from {table}").fetchall() if table in names else []


def test_the_triton_example_s_idle_step_is_not_called_data_loading(tmp_path: Path) -> None:
    """The Triton example's one 13.3 s step has three ops in its first 1.5 ms and no data-loading range or
    pageable copy: the idle time after them is not attributed, and no DataLoader advice is given."""
    path = SAMPLES / "hta_triton_example.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    step = next(e for e in events if str(e.get("name", "")).startswith("ProfilerStep"))
    assert not any(DATA_LOADING.search(str(e.get("name", ""))) for e in events)
    assert not any("Pageable" in str(e.get("name", "")) for e in events if e.get("cat") == "gpu_memcpy")
    host_and_gpu = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset")
    ]
    expected_ms = _uncovered((step["ts"], step["ts"] + step["dur"]), host_and_gpu) / 1e3
    report = run_report(str(path), tmp_path / "s")
    idle = report.split.idle
    assert idle["input_pipeline"] == 0
    assert idle["host_unattributed"] == pytest.approx(expected_ms, rel=1e-4)
    ids = [f.id for f in report.findings]
    assert ids[0] == "host_unattributed" and "input_pipeline" not in ids and "python_overhead" not in ids
    assert "not attributed" in report.findings[0].title
    assert "DataLoader" not in report.findings[0].next_step


@pytest.mark.parametrize(
    "name", ["rodinia_gaussian_report2__nsys2022.4.2.sqlite.gz", "nsysai_mock__nsys2026.1.1.sqlite.gz"]
)
def test_a_program_without_framework_ops_gets_no_python_overhead(name: str, tmp_path: Path) -> None:
    """A C++ CUDA program (Rodinia's gaussian) and the nsys mock capture have no NVTX ranges, so no framework
    ops: the GPU's idle time outside their runtime calls is not attributed, not Python between ops, except
    in a gap that began while a call held the host (Rodinia's `cudaThreadSynchronize` after each kernel): such
    a gap is that call's cause whole. (The capture is one window, from its first event to its last.)"""
    path = SHARED / "nsys" / name
    gpu = [r for t in ("KERNEL", "MEMCPY", "MEMSET") for r in _nsys_rows(path, tmp_path, f"CUPTI_ACTIVITY_KIND_{t}")]
    runtime = _nsys_rows(path, tmp_path, "CUPTI_ACTIVITY_KIND_RUNTIME")
    window = (min(a for a, _ in gpu + runtime), max(b for _, b in gpu + runtime))
    expected_ms = _uncovered(window, gpu + runtime) / 1e6
    report = run_report(str(path), tmp_path / "s")
    idle = report.split.idle
    assert report.split.window_ms == pytest.approx((window[1] - window[0]) / 1e6, rel=1e-6)
    assert idle["python_overhead"] == 0 and idle["input_pipeline"] == 0
    held = idle["host_sync"] + idle["allocator"]
    assert 0 < idle["host_unattributed"] <= expected_ms * 1.01
    assert idle["host_unattributed"] + held >= expected_ms * 0.99
    if held == 0:
        assert idle["host_unattributed"] == pytest.approx(expected_ms, rel=0.01)
    assert not {"python_overhead", "input_pipeline"} & {f.id for f in report.findings}


def test_a_thread_synchronise_holds_the_host(tmp_path: Path) -> None:
    """``cudaThreadSynchronize`` (CUDA's old name for a device synchronise, which Rodinia's gaussian calls after
    each kernel) holds the host: the gaps it drains are host_sync, charged to it, not launch overhead."""
    path = SHARED / "nsys" / "rodinia_gaussian_report2__nsys2022.4.2.sqlite.gz"
    _nsys_rows(path, tmp_path, "CUPTI_ACTIVITY_KIND_RUNTIME")  # the export, decompressed beside the test
    with sqlite3.connect(tmp_path / path.name.removesuffix(".gz")) as db:
        (syncs,) = db.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
            "WHERE s.value LIKE 'cudaThreadSynchronize%'"
        ).fetchone()
    report = run_report(str(path), tmp_path / "s")
    sites = report.sites.filter(cause="host_sync", site="cudaThreadSynchronize")
    assert syncs > 8000 and sites.height == 1
    assert 0.9 * syncs <= sites["calls_per_step"][0] <= syncs
    assert report.sites.filter(cause="launch_overhead", site="cudaThreadSynchronize").height == 0
    assert report.split.idle["host_sync"] > report.split.idle["launch_overhead"]


def test_input_pipeline_time_is_only_that_of_its_calls(tmp_path: Path) -> None:
    """The FP16 sample has no data-loading range; its input-pipeline time is that of the ops that copied
    pageable memory (``Memcpy HtoD (Pageable -> Device)`` in the raw file), each a site: none is outside
    any call. The host time at the step boundary is not attributed."""
    path = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    assert not any(DATA_LOADING.search(str(e.get("name", ""))) for e in events)
    assert any(e["name"] == "Memcpy HtoD (Pageable -> Device)" for e in events if e.get("cat") == "gpu_memcpy")
    report = run_report(str(path), tmp_path / "s")
    sites = report.sites.filter(cause="input_pipeline")
    assert sites.height and sites["site"].null_count() == 0
    assert sites["ms_per_step"].sum() == pytest.approx(report.split.idle["input_pipeline"])
    assert report.split.idle["host_unattributed"] > 0
