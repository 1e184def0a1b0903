"""``traceq report --compare``: the waterfall closes, the verdict names the cause, self-compare is silent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, SHARED, PairStore, run_cli
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
    assert "slower" in d["verdict"].split(":")[0] and "outweigh" in d["verdict"] and "GPU compute -25" in d["verdict"]
    lo = next(f for f in d["findings"] if f["id"] == "launch_overhead")
    kernels = lo["evidence"]["kernels_per_step"]
    assert 0.3 < kernels[1] / kernels[0] - 1 < 0.45  # about 36 % more kernels per step
    cast = next(f for f in d["findings"] if f["id"] == "cast_overhead")
    assert cast["evidence"]["conversions_per_step"] == [17, 340]  # counted from the raw trace in test_metrics
    assert any("profiler" in n for n in d["notes"])


def test_a_run_compared_with_itself_blames_nothing(store: Path) -> None:
    result = compare("conformer_fp16_b64", "conformer_fp16_b64", store)
    assert result.step_time_delta_ms == 0
    assert result.findings == [] and result.unexplained_ms == 0
    assert result.verdict.startswith("NEW takes the same time per step as BASE") and "no part changed" in result.verdict


@pytest.mark.slow
@pytest.mark.parametrize("pair", ["kineto_b4", "nsys_b4", "paddle_b64"])
def test_other_pairs_close_their_waterfall(pair: str, request: pytest.FixtureRequest) -> None:
    runs: PairStore = request.getfixturevalue(pair)
    result = compare(runs.base, runs.new, runs.path)
    assert result.findings and result.waterfall is not None
    assert sum(p.delta_ms for p in result.waterfall.parts) == pytest.approx(result.step_time_delta_ms, abs=1e-6)
    longer = max(result.base.summary["mean_step_time_ms"], result.new.summary["mean_step_time_ms"])
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
    done = run_cli("report", "--compare", "conformer_fp32_b64", "conformer_fp16_b64", "--store", str(store),
                   "--format", "markdown", "--html", str(page), "--fail-if-slower", "0.5")  # fmt: skip
    assert done.returncode == 3  # NEW is about 1.4 % slower per step than BASE
    assert done.stdout.startswith("## traceq:")
    text = page.read_text()
    assert text.startswith("<!doctype html>") and text.count("<svg") >= 4
    assert "http://" not in text and "https://" not in text and "<script" not in text
    ok = run_cli("report", "--compare", "conformer_fp32_b64", "conformer_fp16_b64", "--store", str(store),
                 "--fail-if-slower", "5")  # fmt: skip
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
    assert "optimizer steps" in result.new.summary["step_rule"]
    conv = result.op_deltas.filter(name="aten::conv1d").row(0, named=True)
    assert conv["new_cpu_ms"] > 2 * conv["base_cpu_ms"]
    assert conv["gpu_delta_ms"] < 0.1 * conv["cpu_delta_ms"]
