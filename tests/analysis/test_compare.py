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
def test_batch_64_amp_is_explained_as_launch_bound(store: Path) -> None:
    done = run_cli("report", "--compare", "conformer_fp32_b64", "conformer_fp16_b64", "--store", str(store),
                   "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert {"base", "new", "step_time_delta_ms", "explained_ms", "findings", "unexplained_ms"} <= d.keys()
    ids = [f["id"] for f in d["findings"]]
    assert {"gpu_compute", "launch_bound", "cast_overhead"} <= set(ids)
    impact = {f["id"]: f["impact_ms"] for f in d["findings"]}
    assert impact["gpu_compute"] < -20  # AMP halves GPU busy time: about 45 -> 21 ms per step
    assert impact["launch_bound"] > 10 and impact["cast_overhead"] > 0
    # the findings close the waterfall on the measured step delta within 15 %
    assert abs(d["explained_ms"] - d["step_time_delta_ms"]) <= 0.15 * abs(d["step_time_delta_ms"])
    assert d["explained_ms"] == pytest.approx(sum(f["impact_ms"] for f in d["findings"]))
    assert "not realised" in d["verdict"] and "CPU launching work" in d["verdict"]
    lb = next(f for f in d["findings"] if f["id"] == "launch_bound")
    assert 0.3 < lb["evidence"]["kernels_change"] < 0.45  # about 36 % more kernels per step
    step_b, step_n = d["base"]["step_time_ms"], d["new"]["step_time_ms"]
    assert step_b and step_n
    assert any("profiler" in n for n in d["notes"])


def test_a_run_compared_with_itself_blames_nothing(store: Path) -> None:
    result = compare("conformer_fp16_b64", "conformer_fp16_b64", store)
    assert result.step_time_delta_ms == 0
    assert result.findings == [] and result.unexplained_ms == 0
    assert "nothing to blame" in result.verdict


@pytest.mark.slow
@pytest.mark.parametrize("pair", ["kineto_b4", "nsys_b4", "paddle_b64"])
def test_other_pairs_close_their_waterfall(pair: str, request: pytest.FixtureRequest) -> None:
    runs: PairStore = request.getfixturevalue(pair)
    result = compare(runs.base, runs.new, runs.path)
    assert result.findings
    assert abs(result.unexplained_ms) <= 0.15 * abs(result.step_time_delta_ms)
    assert {f.id for f in result.findings} >= {"launch_bound", "cast_overhead"}


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
def test_nsys_pair_names_conv_cpu_growth(nsys_b4: PairStore) -> None:
    """In the nsys captures (cuDNN autotuning included), FP16 conv1d CPU time grows about 6x."""
    result = compare(nsys_b4.base, nsys_b4.new, nsys_b4.path)
    growth = {f.evidence["op"]: f for f in result.findings if f.id == "op_cpu_growth"}
    assert "aten::conv1d" in growth
    before, after = growth["aten::conv1d"].evidence["cpu_ms_per_step"]
    assert after > 4 * before
