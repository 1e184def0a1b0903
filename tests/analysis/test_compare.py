"""``traceq report --compare``: the waterfall closes, the verdict names the cause, self-compare is silent."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SAMPLES, SHARED, PairStore, run_cli
from tests.raw_casts import raw_conversions
from traceq import compare


@pytest.fixture
def store(kineto_b64: PairStore) -> Path:
    return kineto_b64.path


@pytest.mark.slow
def test_batch_64_amp_is_explained_by_launch_overhead_and_casts(store: Path) -> None:
    """AMP halves GPU compute at batch 64, but launch overhead and casts take it back: the verdict says the
    parts that grew outweigh GPU compute, and the waterfall closes on the step delta."""
    done = run_cli("report", "--compare", "conformer_fp32_b64", "conformer_fp16_b64", "--store", str(store),
                   "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert {"base", "new", "step_time_delta_ms", "explained_ms", "findings", "unexplained_ms", "waterfall"} <= d.keys()
    impact = {f["id"]: f["impact_ms"] for f in d["findings"]}
    assert {"gpu_compute", "launch_overhead", "cast_overhead"} <= impact.keys()
    assert impact["gpu_compute"] < -20  # AMP halves GPU busy time: about 45 -> 21 ms per step
    assert impact["launch_overhead"] > 5 and impact["cast_overhead"] > 5
    assert sum(p["ms_per_step"] for p in d["waterfall"]) == pytest.approx(d["step_time_delta_ms"], abs=1e-6)
    assert abs(d["unexplained_ms"]) <= 0.15 * abs(d["step_time_delta_ms"]) + 0.02 * d["new"]["mean_step_time_ms"]
    assert d["explained_ms"] == pytest.approx(sum(f["impact_ms"] for f in d["findings"]))
    traced = d["verdict"].split("Traced: ", 1)[1]  # the traced steps' sentence, after the estimate's
    assert "slower" in traced.split(":")[0] and "outweigh" in traced and "GPU compute -25" in traced
    lo = next(f for f in d["findings"] if f["id"] == "launch_overhead")
    kernels = lo["evidence"]["kernels_per_step"]
    assert 0.3 < kernels[1] / kernels[0] - 1 < 0.45  # about 36 % more kernels per step
    cast = next(f for f in d["findings"] if f["id"] == "cast_overhead")
    # counted from the raw traces: the dtype conversions, not the host/device copies of aten::to
    per_step = [statistics.mean(raw_conversions(SHARED / "kineto" / f"conformer_{p}_b64.json.gz").values())
                for p in ("fp32", "fp16")]  # fmt: skip
    assert cast["evidence"]["conversions_per_step"] == pytest.approx(per_step, abs=0.05)
    assert any("profiler" in n for n in d["notes"])


def test_a_run_compared_with_itself_blames_nothing(store: Path) -> None:
    result = compare("conformer_fp16_b64", "conformer_fp16_b64", store)
    assert result.step_time_delta_ms == 0
    assert result.findings == [] and result.unexplained_ms == 0
    assert result.verdict.startswith("Estimated without the profiler (replay), NEW and BASE take the same time")
    traced = result.verdict.split("Traced: ", 1)[1]
    assert traced.startswith("NEW takes the same time per step as BASE") and "no part changed" in traced


@pytest.mark.slow
@pytest.mark.parametrize("pair", ["kineto_b4", "nsys_b4", "paddle_b64"])
def test_other_pairs_close_their_waterfall(pair: str, request: pytest.FixtureRequest) -> None:
    runs: PairStore = request.getfixturevalue(pair)
    result = compare(runs.base, runs.new, runs.path)
    assert result.findings and result.waterfall is not None
    assert sum(p.delta_ms for p in result.waterfall.parts) == pytest.approx(result.step_time_delta_ms, abs=1e-6)
    longer = max(result.base.summary.mean_step_time_ms, result.new.summary.mean_step_time_ms)
    assert abs(result.unexplained_ms) <= max(0.15 * abs(result.step_time_delta_ms), 0.02 * longer)
    assert {f.id for f in result.findings} >= {"launch_overhead", "cast_overhead"}
    cast = next(f for f in result.findings if f.id == "cast_overhead")
    assert cast.impact_ms > 0 and cast.evidence["conversions_per_step"][1] > cast.evidence["conversions_per_step"][0]


def test_summary_text_pair_compares_ops(tmp_path: Path) -> None:
    fp32 = SHARED / "paddle" / "cpu_paddle_3.3.1" / "paddle_fp32.summary_default.txt"
    bs16 = SHARED / "paddle" / "cpu_paddle_3.3.1" / "paddle_fp32_bs16.summary_default.txt"
    result = compare(str(fp32), str(bs16), tmp_path / "s")
    assert result.step_time_delta_ms is None and result.unexplained_ms is None
    assert "no timeline" in result.verdict
    assert not result.op_deltas.is_empty()


@pytest.mark.slow
def test_html_markdown_and_ci_gate(store: Path, tmp_path: Path) -> None:
    page = tmp_path / "amp.html"
    """Traced, NEW's step is about 1.4 % longer than BASE's: on the traced steps alone a 0.5 % gate fails and
    a 5 % one passes (the gate on the estimate, which says NEW is faster, is tested end to end)."""
    done = run_cli("report", "--compare", "conformer_fp32_b64", "conformer_fp16_b64", "--store", str(store),
                   "--format", "markdown", "--html", str(page), "--fail-if-slower", "0.5", "--traced-only")  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().endswith("slower per step, traced (limit 0.5%)")
    assert done.stdout.startswith("## traceq:")
    text = page.read_text()
    assert text.startswith("<!doctype html>") and text.count("<svg") >= 4
    assert "http://" not in text and "https://" not in text and "<script" not in text
    ok = run_cli("report", "--compare", "conformer_fp32_b64", "conformer_fp16_b64", "--store", str(store),
                 "--fail-if-slower", "5", "--traced-only")  # fmt: skip
    assert ok.returncode == 0


def test_compare_accepts_sample_files(tmp_path: Path) -> None:
    fp32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
    fp16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
    done = run_cli("report", "--compare", str(fp32), str(fp16), "--store", str(tmp_path / "s"))
    assert done.returncode == 0 and "Waterfall" in done.stdout


@pytest.mark.slow
def test_nsys_pair_shows_conv_cpu_growth(nsys_b4: PairStore) -> None:
    """In the nsys captures (no profiler steps: windows between optimizer steps), FP16's conv1d CPU time
    per step more than doubles, far more than the GPU time it causes grows."""
    result = compare(nsys_b4.base, nsys_b4.new, nsys_b4.path)
    assert "optimizer steps" in result.new.summary.step_rule
    conv = result.op_deltas.filter(name="aten::conv1d").row(0, named=True)
    assert conv["new_cpu_ms"] > 2 * conv["base_cpu_ms"]
    assert conv["gpu_delta_ms"] < 0.1 * conv["cpu_delta_ms"]


def _op_row(path: Path, op: str) -> tuple[int, list[float], list[float]]:
    """An op's calls, CPU and GPU Total/Avg/Max/Min (ms) from the first row of a pasted Operator Summary."""
    line = next(x for x in path.read_text().splitlines() if x.split(" ", 1)[0] == op)
    cells = re.split(r"\s{2,}", line.strip())
    cpu, gpu = ([float(v) for v in c.split(" / ")[:4]] for c in cells[2:4])
    return int(cells[1]), cpu, gpu


def test_summary_texts_of_the_paddle_issue_compare_by_cause(tmp_path: Path) -> None:
    """The FP32 table of Paddle issue 48321 against a pasted excerpt of its AMP table: only matmul_v2_grad is
    in both; the verdict comes from its totals, the other ops are absent (not 0 ms), and its longest call
    (30x its average in AMP, 6.6x in FP32) is named as algorithm search. Numbers from the pasted text."""
    fp32 = SHARED / "paddle" / "issue48321_fp32_operator_summary.txt"
    amp = SHARED / "paddle" / "summaries_from_issues" / "Paddle_issue_48321_amp_slower_fragment1.txt"
    result = compare(str(fp32), str(amp), tmp_path / "s")
    (calls_b, cpu_b, gpu_b), (calls_n, cpu_n, gpu_n) = _op_row(fp32, "matmul_v2_grad"), _op_row(amp, "matmul_v2_grad")
    assert (
        f"CPU time is {cpu_n[0] - cpu_b[0]:+,.0f} ms and its GPU time {gpu_n[0] - gpu_b[0]:+,.0f} ms" in result.verdict
    )
    # +67 ms CPU against -8 ms GPU, but from one op of FP32's 79: too few in common to name a bound side
    op_cpu = [float(ms) for ms in re.findall(r"^\w+(?: \w+)?\s+\d+\s+([\d.]+) /", fp32.read_text(), re.M)]
    assert f"they hold only {cpu_b[0] / sum(op_cpu):.0%} of one table's CPU time" in result.verdict
    assert "CPU-bound" not in result.verdict
    ops = result.op_deltas
    assert ops.filter(pl.col("present") == "both")["name"].to_list() == ["matmul_v2_grad"]
    absent = ops.filter(pl.col("present") == "base")
    assert absent.height > 50 and absent["new_cpu_ms"].null_count() == absent.height  # absent, not 0 ms
    search = next(f for f in result.findings if f.id == "algorithm_search")
    ratio_b, ratio_n = cpu_b[2] / (cpu_b[0] / calls_b), cpu_n[2] / (cpu_n[0] / calls_n)
    assert f"{ratio_n:.1f}" in search.evidence["ops"]["matmul_v2_grad"] and ratio_n > 4 * ratio_b
    assert [f.id for f in result.findings].count("algorithm_search") == 1
    assert not [f for f in result.findings if f.id == "launch_overhead" and "matmul_v2_grad" in f.evidence["ops"]]
