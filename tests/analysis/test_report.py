"""``traceq report``: the JSON contract, findings with evidence, summary-text runs, files on the fly."""

from __future__ import annotations

import gzip
import json
import statistics
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, SHARED, PairStore, run_cli, to_9_digits
from traceq import run_report

KEYS = {
    "run", "steps", "step_time_ms", "gpu_busy_ms", "gpu_idle_ms", "gpu_idle_ratio", "launch_bound_ratio",
    "fp16_coverage", "tensor_core_coverage", "cast_overhead", "ops", "findings",
}  # fmt: skip


@pytest.fixture(scope="module")
def amp_b64(kineto_b64: PairStore) -> dict:
    done = run_cli("report", kineto_b64.new, "--store", str(kineto_b64.path), "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_report_json_has_the_documented_keys(amp_b64: dict) -> None:
    assert amp_b64.keys() >= KEYS
    assert set(amp_b64["cast_overhead"]) >= {"calls", "cpu_ms", "gpu_ms"}
    assert amp_b64["steps"] == 10
    assert amp_b64["gpu_busy_ms"] + amp_b64["gpu_idle_ms"] == pytest.approx(
        amp_b64["gpu_busy_ms"] / (1 - amp_b64["gpu_idle_ratio"]), rel=0.05
    )
    for f in amp_b64["findings"]:
        assert {"id", "title", "impact_ms", "evidence"} <= f.keys()


def test_amp_b64_is_explained_as_launch_overhead_with_cast_overhead(amp_b64: dict) -> None:
    """The largest cause of FP16's step at batch 64 is the CPU launching work; casts come next. Both are
    parts of the host-launch gap time (the launch-bound ratio's numerator), which they cannot exceed."""
    ids = [f["id"] for f in amp_b64["findings"]]
    assert ids[0] == "launch_overhead"
    assert "cast_overhead" in ids
    impact = {f["id"]: f["impact_ms"] for f in amp_b64["findings"]}
    host_launch_ms = amp_b64["launch_bound_ratio"] * amp_b64["mean_step_time_ms"]
    assert 0.4 * host_launch_ms < impact["launch_overhead"] + impact["cast_overhead"] <= host_launch_ms * 1.001
    split = amp_b64["step_split_ms"]
    assert sum(split["busy"].values()) + sum(split["idle"].values()) == pytest.approx(amp_b64["mean_step_time_ms"])
    assert 18 < amp_b64["gpu_busy_ms"] < 25
    assert amp_b64["fp16_coverage"] > 0.85


def test_report_on_summary_text_gives_op_level_results(tmp_path: Path) -> None:
    report = run_report(str(SHARED / "paddle" / "issue48321_fp32_operator_summary.txt"), tmp_path / "s")
    assert report.summary.gpu_idle_ratio is None and report.summary.launch_bound_ratio is None
    assert report.summary.fp16_coverage == 0  # the FP32 table: sgemm / scudnn kernels only
    names = report.ops["name"].to_list()
    assert names[0] == "matmul_v2_grad" and "conv2d_grad" in names
    assert any("needs a trace" in n or "need a" in n for n in report.notes)


def test_report_terminal_and_markdown(tmp_path: Path) -> None:
    sample = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
    term = run_cli("report", str(sample), "--store", str(tmp_path / "s"))
    assert term.returncode == 0 and "launch-bound ratio" in term.stdout and "Findings" in term.stdout
    md = run_cli("report", "kineto_conformer_fp16_b4_2steps", "--store", str(tmp_path / "s"), "--format", "markdown")
    assert md.returncode == 0 and md.stdout.startswith("## traceq report")


def test_report_of_an_unknown_run_is_a_one_line_error(tmp_path: Path) -> None:
    run_report(str(SHARED / "paddle" / "issue48321_fp32_operator_summary.txt"), tmp_path / "s")  # a store
    done = run_cli("report", "no_such_run", "--store", str(tmp_path / "s"))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1 and "no such run" in done.stderr
    missing = run_cli("report", "no_such_run", "--store", str(tmp_path / "nothing"))
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "no such store" in missing.stderr


def test_a_cpu_only_trace_gets_its_host_step_times(tmp_path: Path) -> None:
    """A Paddle CPU run has no GPU work: its steps are the host's ProfileStep ranges, whose median the
    report gives as the step time (from the raw file: 31.20 ms of 29.73, 30.56, 31.20, 57.81, 61.74)."""
    path = SHARED / "paddle" / "cpu_paddle_3.3.1" / "paddle_fp32.paddle_trace.json.gz"
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("cat") == "ProfileStep"]
    durations = sorted(e["dur"] / 1e3 for e in events)
    report = run_report(str(path), tmp_path / "s")
    assert report.summary.steps == len(durations) == 5
    assert report.summary.step_time_ms == pytest.approx(statistics.median(durations), abs=1e-3)
    # the windows tile the run (each starts where the step before ended): their mean spans first to last
    span_ms = (max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)) / 1e3
    assert report.summary.mean_step_time_ms == pytest.approx(span_ms / len(events), abs=1e-3)
    assert report.summary.gpu_busy_ms is None
    assert any("No GPU work" in n for n in report.notes)


def test_a_run_of_two_gpus_splits_each_gpu_s_step(tmp_path: Path) -> None:
    """An nsys capture of one process on two H100s: the split is the mean of the two GPUs' steps (each
    adds up to the window), and cast kernels stay within the GPUs' busy time (a copy in `aten::to` to
    the device is a memory copy, not a cast)."""
    report = run_report(str(SHARED / "nsys" / "nsysai_h100_2gpu_1s__nsys2026.2.1.sqlite.gz"), tmp_path / "s")
    s = report.split
    assert s is not None
    assert sum(s.busy.values()) + sum(s.idle.values()) == pytest.approx(s.window_ms)
    assert s.busy_ms == pytest.approx(report.summary.gpu_busy_ms)  # the mean over the two GPUs
    assert report.summary.cast_overhead.gpu_ms <= 2 * report.summary.gpu_busy_ms
    assert s.busy["memory_copies"] > 0.9 * s.busy_ms  # the capture is dominated by its copies


def test_a_run_without_profiler_steps_gets_a_report(tmp_path: Path) -> None:
    """HTA's critical-path AlexNet trace has no ProfilerStep: the report explains its one window, the span of
    its GPU work, which GPU busy and idle time tile; its allocator calls are counted in that window (from
    the raw file: the span, the union of GPU work and the cudaMalloc/cudaFree/cudaHostAlloc calls)."""
    path = SHARED / "hta" / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    assert not any(str(e.get("name", "")).startswith("ProfilerStep") for e in events)
    gpu = ("kernel", "gpu_memcpy", "gpu_memset")
    work = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in gpu)
    span_ms = (max(end for _, end in work) - work[0][0]) / 1e3
    union, (start, end) = 0.0, work[0]
    for a, b in work[1:]:
        if a > end:
            union, start, end = union + end - start, a, b
        else:
            end = max(end, b)
    busy_ms = (union + end - start) / 1e3
    alloc = {"cudaMalloc", "cudaFree", "cudaHostAlloc"}
    allocs = Counter(e["name"] for e in events if e.get("cat") == "cuda_runtime" and e["name"] in alloc)
    done = run_cli("report", str(path), "--store", str(tmp_path / "s"), "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["steps"] == 0
    assert report["step_time_ms"] == pytest.approx(span_ms, abs=1e-3)
    assert report["gpu_busy_ms"] == pytest.approx(busy_ms, abs=1e-3)
    split = report["step_split_ms"]
    assert sum(split["busy"].values()) + sum(split["idle"].values()) == pytest.approx(span_ms, abs=1e-3)
    found = {f["id"]: f for f in report["findings"]}
    assert found["allocator"]["evidence"]["allocator_calls_per_step"] == {k: float(n) for k, n in allocs.items()}


def test_a_report_without_lanes_is_the_same_report_without_making_them(kineto_b4: PairStore) -> None:
    """The representative step's lanes are the HTML page's alone: a report without them (the CLI's, but
    for the page) leaves their queries unmade and is the same report otherwise; the page still draws them."""
    from traceq.analysis.report import run_report as compute
    from traceq.querying.engine import Session
    from traceq.render import json_form
    from traceq.store import Store

    store = Store(kineto_b4.path)
    run_id = store.resolve(kineto_b4.new)
    with Session(store, [run_id], own_queries=True) as session:
        without = compute(run_id, store, session, lanes=False)
        assert not session._made & {"_typical_step", "_step_gpu_lanes", "_step_idle_lanes", "_step_host_lanes"}
    full = compute(run_id, store)
    assert without.timeline is None and full.timeline is not None and full.timeline.gpu.height > 0
    assert to_9_digits(json_form.report(without)) == to_9_digits(json_form.report(full))
    page = run_cli("report", kineto_b4.new, "--store", str(kineto_b4.path), "--format", "html")
    assert page.returncode == 0, page.stderr
    assert 'aria-label="timeline"' in page.stdout


def test_a_comparison_without_lanes_is_the_same_comparison_without_making_them(kineto_b4: PairStore) -> None:
    """A comparison the terminal shows (and the Perfetto export's findings) leaves the lanes of both runs
    unmade and is the same comparison otherwise; the HTML page still draws both."""
    from traceq.analysis.compare import compare
    from traceq.querying.engine import Session
    from traceq.render import json_form
    from traceq.store import Store

    store = Store(kineto_b4.path)
    ids = [store.resolve(kineto_b4.base), store.resolve(kineto_b4.new)]
    with Session(store, ids, own_queries=True) as session:
        without = compare(ids[0], ids[1], store, session=session, lanes=False)
        assert not session._made & {"_typical_step", "_step_gpu_lanes", "_step_idle_lanes", "_step_host_lanes"}
    full = compare(ids[0], ids[1], store)
    assert without.base.timeline is None and without.new.timeline is None
    assert full.base.timeline is not None and full.new.timeline is not None
    assert to_9_digits(json_form.comparison(without)) == to_9_digits(json_form.comparison(full))
    page = run_cli("report", "--compare", kineto_b4.base, kineto_b4.new, "--store", str(kineto_b4.path),
                   "--format", "html")  # fmt: skip
    assert page.returncode == 0, page.stderr
    assert 'aria-label="timeline"' in page.stdout
    assert f">BASE {kineto_b4.base}</text>" in page.stdout and f">NEW {kineto_b4.new}</text>" in page.stdout
