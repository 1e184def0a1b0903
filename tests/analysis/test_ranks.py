"""Cross-rank metrics on real 2-rank DDP traces (H200, rank 1 sleeps 15 ms before each step).

The reference numbers are computed here from the raw JSON with the standard library: each step's window
placed from its CPU ``ProfilerStep#N`` range by traceq's window offsets (a window ends when the step is
done on the host and on the GPU), GPU work from the kernel/memcpy/memset events, communication kernels
by their NCCL names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, raw_trace, window_offsets
from traceq.analysis.compare import compare
from traceq.analysis.report import run_report
from traceq.querying.engine import query
from traceq.render import json_form

DDP = SAMPLES / "ddp"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def _reference(path: Path, store: Path, run: str, rank: int) -> dict[int, dict[str, float]]:
    """Per step: window, busy and exposed communication time in ns, from the raw trace."""
    offsets = window_offsets(store, run, rank)
    events = raw_trace(path)["traceEvents"]
    steps = {
        int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")
    }
    gpu = [(e["ts"], e["ts"] + e["dur"], "nccl" in e["name"].lower()) for e in events if e.get("cat") in GPU_CATS]
    out = {}
    for step, (host_start, _) in steps.items():
        ws, we = host_start + offsets[step][0] / 1e3, host_start + offsets[step][1] / 1e3
        clipped = [(max(s, ws), min(e, we), comm) for s, e, comm in gpu if s < we and e > ws]
        busy = _union([(s, e) for s, e, _ in clipped])
        not_comm = _union([(s, e) for s, e, comm in clipped if not comm])
        out[step] = {"window": (we - ws) * 1e3, "busy": busy * 1e3, "exposed_comm": (busy - not_comm) * 1e3}
    return out


@pytest.fixture(scope="module")
def ddp_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("ddp") / "store"
    traceq.ingest([DDP / "fp32"], store=store, name="ddp32", jobs=1)
    traceq.ingest([DDP / "fp16"], store=store, name="ddp16", jobs=1)
    return store


def test_exposed_communication_matches_an_independent_interval_union(ddp_store: Path) -> None:
    balance = query("rank_balance", ddp_store, "ddp32")
    for rank in (0, 1):
        ref = _reference(DDP / "fp32" / f"ddp_fp32_rank{rank}.json.gz", ddp_store, "ddp32", rank)
        rows = balance.filter(balance["rank"] == rank)
        assert sorted(rows["step"].to_list()) == sorted(ref)
        for row in rows.iter_rows(named=True):
            expected = ref[row["step"]]
            assert row["window_ns"] == pytest.approx(expected["window"], abs=2)
            assert row["busy_ns"] == pytest.approx(expected["busy"], abs=50)
            assert row["exposed_comm_ns"] == pytest.approx(expected["exposed_comm"], abs=50)
            assert row["work_ns"] == row["window_ns"] - row["exposed_comm_ns"]


def test_the_sleeping_rank_is_the_straggler_of_every_step(ddp_store: Path) -> None:
    runs = json.loads((DDP / "ddp_runs.json").read_text())
    straggler = runs["straggler_rank"]
    for name in ("ddp32", "ddp16"):
        balance = query("rank_balance", ddp_store, name)
        assert set(balance.filter(balance["is_straggler"])["rank"]) == {straggler}
        waiting = balance.filter(~balance["is_straggler"])
        # the other rank waits at least the injected sleep in collectives, every step
        assert (waiting["wait_ns"] >= runs["straggle_ms"] * 1e6).all()


def test_report_names_the_straggler_and_the_spread(ddp_store: Path) -> None:
    report = run_report("ddp32", ddp_store)
    assert report.ranks["rank"].to_list() == [0, 1]
    assert report.ranks["straggler_steps"].to_list() == [0, 3]
    finding = next(f for f in report.findings if f.id == "straggler")
    assert finding.evidence["straggler_rank"] == 1
    ref0 = _reference(DDP / "fp32" / "ddp_fp32_rank0.json.gz", ddp_store, "ddp32", 0)
    ref1 = _reference(DDP / "fp32" / "ddp_fp32_rank1.json.gz", ddp_store, "ddp32", 1)
    waits = [
        (ref1[s]["window"] - ref1[s]["exposed_comm"]) - (ref0[s]["window"] - ref0[s]["exposed_comm"]) for s in ref0
    ]
    assert finding.impact_ms == pytest.approx(sum(waits) / len(waits) / 1e6, abs=1e-3)
    assert "launch work" in finding.evidence["cause"]  # the sleep is host time, not GPU work
    spread = report.summary.rank_spread
    assert spread["launch_bound_ratio"]["max_rank"] == 1
    assert json_form.report(report)["stragglers"][0]["straggler"] == 1


def test_compare_is_rank_aligned(ddp_store: Path) -> None:
    result = compare("ddp32", "ddp16", ddp_store)
    ranks = result.ranks
    assert ranks["rank"].to_list() == [0, 1]
    for rank in (0, 1):
        base = _reference(DDP / "fp32" / f"ddp_fp32_rank{rank}.json.gz", ddp_store, "ddp32", rank)
        new = _reference(DDP / "fp16" / f"ddp_fp16_rank{rank}.json.gz", ddp_store, "ddp16", rank)
        mean = lambda ref: sum(v["window"] for v in ref.values()) / len(ref) / 1e6  # noqa: E731
        row = ranks.filter(ranks["rank"] == rank).row(0, named=True)
        assert row["step_delta"] == pytest.approx(mean(new) - mean(base), abs=1e-5)
    parts = {row["part"]: row["ms_per_step"] for row in json_form.waterfall(result.waterfall)}
    assert sum(parts.values()) == pytest.approx(result.step_time_delta_ms, abs=0.01)
    assert "communication" in parts


def test_compare_of_a_one_rank_run_with_a_two_rank_run_aligns_rank_0(ddp_store: Path) -> None:
    single = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
    traceq.ingest([single], store=ddp_store, jobs=1)
    result = compare("kineto_conformer_fp16_b4_2steps", "ddp16", ddp_store)
    ranks = result.ranks.sort("rank")
    assert ranks["rank"].to_list() == [0, 1]
    windows = window_offsets(ddp_store, "kineto_conformer_fp16_b4_2steps").values()
    assert ranks["base_step_ms"][0] == pytest.approx(sum(hi - lo for lo, hi in windows) / len(windows) / 1e6, abs=1e-5)
    assert ranks["base_step_ms"][1] is None
    assert any("different ranks (BASE 1, NEW 2)" in n for n in result.notes)
