"""The step estimated without the profiler, stored at ingest with a one-file run's diagnosis, is what the
replay computes from the events, and a report that reads it is the report that replays the run."""

from __future__ import annotations

import io
import json
import statistics
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, raw_trace, to_9_digits
from traceq.analysis.replay import explain
from traceq.analysis.replay.replayer import Replayer
from traceq.analysis.replay.stored import NUMBERS, STEPS, stored_estimate
from traceq.ingestion import metrics
from traceq.ingestion.ingest import ingest as ingest_files
from traceq.ingestion.metrics import WholeRunStep
from traceq.querying.engine import Session
from traceq.render import json_form, render
from traceq.store import Store

RUNS = {
    "kineto": SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz",
    "paddle_layout": SAMPLES / "paddlefmt_conformer_fp16_b64_2steps.json.gz",
    "cudnn_search": SAMPLES / "planted" / "cudnn_var_fp16_3steps.json.gz",
}


@pytest.fixture(autouse=True)
def store_the_diagnosis_of_small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples are small: store their metrics and diagnosis anyway (ingest runs in this process)."""
    monkeypatch.setattr(metrics, "STORE_MIN_EVENTS", 0)
    monkeypatch.setattr(metrics, "DIAGNOSIS_MIN_EVENTS", 0)


def _replayed(store: Store, run_id: str) -> tuple[dict, dict[str, float] | None]:
    """The estimate and idle scale replayed from the events, every stored result hidden."""
    with Session(store, [run_id], use_stored=False, own_queries=True) as session:
        replayer = Replayer.load(session, run_id)
        estimate = replayer.unprofiled()
        return _numbers(estimate), explain.unprofiled_idle_scale(replayer, session)


def _numbers(estimate: object) -> dict:
    keys = ("run_id", "traced_ms", "step_ms", "low_ms", "high_ms", "width", "host_scale", "notes")
    return {k: getattr(estimate, k) for k in keys} | {"per_step": estimate.per_step.to_dicts()}  # type: ignore[attr-defined]


def _terminal(report: traceq.RunReport) -> str:
    out = io.StringIO()
    render(report, "table", out)
    return out.getvalue()


@pytest.mark.parametrize("label", sorted(RUNS))
def test_the_stored_estimate_is_the_replay_of_the_events(label: str, store_dir: Path) -> None:
    run_id = traceq.ingest([RUNS[label]], store=store_dir, jobs=1)["run_id"][0]
    store = Store(store_dir)
    with Session(store, [run_id], own_queries=True) as session:
        stored = stored_estimate(session, run_id)
    assert stored is not None
    estimate, scale = stored
    replayed, replayed_scale = _replayed(store, run_id)
    assert to_9_digits(_numbers(estimate)) == to_9_digits(replayed)
    assert scale is not None and to_9_digits(scale) == to_9_digits(replayed_scale)
    assert 0 < estimate.low_ms <= estimate.step_ms <= estimate.high_ms
    assert estimate.step_ms < estimate.traced_ms  # the profiler's own cost taken out


def test_the_traced_step_the_estimate_starts_from_is_the_trace_s(store_dir: Path) -> None:
    """The stored traced step is the mean of the profiler's steps in the raw trace (the windows reach a
    little past the ``ProfilerStep#`` ranges: to within 1 %)."""
    path = RUNS["kineto"]
    run_id = traceq.ingest([path], store=store_dir, jobs=1)["run_id"][0]
    doc = json.loads(next((store_dir / "runs").glob(f"run_id={run_id}/rank=*/metrics/{NUMBERS}")).read_text())
    steps = [
        e["dur"] / 1e3
        for e in raw_trace(path)["traceEvents"]
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") == "user_annotation"
    ]
    assert len(steps) == 2
    assert doc["traced_ms"] == pytest.approx(statistics.mean(steps), rel=0.01)


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_report_reading_the_stored_estimate_is_the_report_that_replays(
    fmt: str, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = traceq.ingest([RUNS["cudnn_search"]], store=store_dir, jobs=1)["run_id"][0]
    with monkeypatch.context() as m:  # read back: the run is never replayed
        m.setattr(Replayer, "load", lambda *a, **k: pytest.fail("replayed although its estimate is stored"))
        read = traceq.run_report(run_id, store_dir)
    with monkeypatch.context() as m:
        m.setattr(explain, "stored_estimate", lambda *a: None)
        replayed = traceq.run_report(run_id, store_dir)
    assert read.unprofiled is not None and read.unprofiled_split is not None
    if fmt == "table":
        assert _terminal(read) == _terminal(replayed)
    else:
        assert to_9_digits(json_form.report(read)) == to_9_digits(json_form.report(replayed))


def test_an_estimate_made_by_other_code_is_not_used(store_dir: Path) -> None:
    run_id = traceq.ingest([RUNS["kineto"]], store=store_dir, jobs=1)["run_id"][0]
    numbers = next((store_dir / "runs").glob(f"run_id={run_id}/rank=*/metrics/{NUMBERS}"))
    doc = json.loads(numbers.read_text())
    before = _terminal(traceq.run_report(run_id, store_dir))
    numbers.write_text(json.dumps({**doc, "made_by": "0" * len(doc["made_by"])}) + "\n")  # as many bytes as written
    with Session(Store(store_dir), [run_id], own_queries=True) as session:
        assert stored_estimate(session, run_id) is None
    assert _terminal(traceq.run_report(run_id, store_dir)) == before  # replayed instead


def test_only_one_file_runs_with_the_diagnosis_store_it(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of several ranks replays one of them at report time, and a rank without the stored diagnosis
    lacks what the replay reads: neither stores an estimate (their reports replay the run)."""
    traceq.ingest([SAMPLES / "ddp" / "fp32"], store=store_dir / "ddp", name="ddp", jobs=1)
    assert list((store_dir / "ddp" / "runs").glob("*/rank=*/metrics/gpu_busy.parquet"))
    assert not list((store_dir / "ddp" / "runs").glob(f"*/rank=*/metrics/{STEPS}"))
    monkeypatch.setattr(metrics, "DIAGNOSIS_MIN_EVENTS", 10**12)
    traceq.ingest([RUNS["kineto"]], store=store_dir / "summary", jobs=1)
    assert not list((store_dir / "summary" / "runs").glob(f"*/rank=*/metrics/{NUMBERS}"))


def test_an_estimate_whose_replay_would_not_fit_is_left_to_the_report(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay may take a share of the memory available at ingest (REPLAY_BYTES_PER_EVENT for each of
    the run's events); at one byte less the estimate is not stored and the report replays the run, giving
    what the stored one gives."""
    path = RUNS["kineto"]
    traceq.ingest([path], store=store_dir / "probe", jobs=1)
    by_kind = json.loads(traceq.runs(store_dir / "probe")["events_by_kind"][0])
    need = sum(by_kind.values()) * explain.REPLAY_BYTES_PER_EVENT / explain.REPLAY_MEMORY_SHARE
    stored, left = store_dir / "stored", store_dir / "left"
    stages: dict[Path, list[str]] = {stored: [], left: []}

    class Heard:  # a progress that keeps the stages it is told
        def __init__(self, store: Path) -> None:
            self.stage = stages[store].append

        def __call__(self, n_bytes: int) -> None:
            pass

    def ingest(store: Path) -> str:
        return traceq.ingest([path], store=store, jobs=1, progress=lambda label, size: Heard(store))["run_id"][0]

    monkeypatch.setattr(explain, "available_memory", lambda: int(need))
    run_stored = ingest(stored)
    monkeypatch.setattr(explain, "available_memory", lambda: int(need) - 1)
    run_left = ingest(left)
    assert list((stored / "runs").glob(f"*/rank=*/metrics/{NUMBERS}"))
    assert not list((left / "runs").glob(f"*/rank=*/metrics/{NUMBERS}"))
    said = "storing the step estimated without the profiler"
    assert said in stages[stored] and said not in stages[left]  # the progress says so only where it is
    assert list((left / "runs").glob("*/rank=*/metrics/_idle_pieces.parquet"))  # the diagnosis is stored still
    read, replayed = traceq.run_report(run_stored, stored), traceq.run_report(run_left, left)
    assert read.unprofiled is not None and replayed.unprofiled is not None
    assert to_9_digits(_numbers(read.unprofiled)) == to_9_digits(
        _numbers(replayed.unprofiled) | {"run_id": read.unprofiled.run_id}
    )


def test_a_whole_run_step_that_fails_costs_the_run_nothing(store_dir: Path) -> None:
    """Whatever a whole-run step raises (running, or saying what memory it will take), the run is ingested
    with its metrics, what the step wrote is removed, and the ingest's warning names the error."""

    def failing(session: Session, folder: Path, flavour: str, counts: dict[str, int], stage: object) -> None:
        (folder / NUMBERS).write_text("{}")
        raise ValueError("a replay that could not finish")

    def unknown(flavour: str, counts: dict[str, int]) -> int:
        raise RuntimeError("no memory figure")

    step = WholeRunStep(failing, unknown)  # (what it will take unknown too: the metrics keep their limit)
    result = ingest_files([RUNS["kineto"]], store=store_dir, jobs=1, whole_run_step=step)
    assert result["status"][0] == "ingested"
    metrics_dir = next((store_dir / "runs").glob("*/rank=*/metrics"))
    assert (metrics_dir / "_idle_pieces.parquet").is_file() and not (metrics_dir / NUMBERS).exists()
    assert "ValueError: a replay that could not finish" in result["warnings"][0]
