"""The Python API the README documents exists and agrees with the trace."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import traceq
from tests.conftest import ROOT, SAMPLES, raw_trace

KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"


def _readme_api_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python API") :]
    return section[section.index("```python") : section.index("```", section.index("```python") + 3)]


def test_every_documented_and_exported_name_exists() -> None:
    documented = set(re.findall(r"\btraceq\.(\w+)\(", _readme_api_block()))
    assert {"ingest", "runs", "sql", "query", "run_report", "compare", "read_trace"} <= documented
    for name in documented | set(traceq.__all__):
        assert callable(getattr(traceq, name)) or name == "__version__", name


def test_query_and_run_report_from_the_library(tmp_path: Path) -> None:
    store = tmp_path / "store"
    traceq.ingest([KINETO], store=store)
    run = traceq.runs(store)["run_id"][0]
    names = {str(e.get("name", "")) for e in raw_trace(KINETO)["traceEvents"]}
    steps = sum(1 for n in names if n.startswith("ProfilerStep#"))  # CPU and GPU annotations share a name
    busy = traceq.query("gpu_busy", store, run)
    assert busy.filter(busy["step"].is_not_null()).height == steps == 2
    report = traceq.run_report(run, store)
    assert report.summary.steps == steps


def test_ingest_of_a_small_trace_does_not_load_the_sql_engine(tmp_path: Path) -> None:
    """Small ranks store no metrics, so their ingest never needs DuckDB (82 ms and 30 MB to load)."""
    code = (
        "import sys, traceq; "
        f"traceq.ingest([{str(KINETO)!r}], store={str(tmp_path / 'store')!r}, jobs=1); "
        "assert 'duckdb' not in sys.modules, 'duckdb was imported'; "
        f"traceq.sql('select count(*) from events', {str(tmp_path / 'store')!r}); "
        "assert 'duckdb' in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


class _Recorder:
    def __init__(self) -> None:
        self.bytes = 0
        self.stages: list[str] = []

    def __call__(self, n: int) -> None:
        self.bytes += n

    def stage(self, text: str) -> None:
        self.stages.append(text)


def test_progress_hears_every_byte_then_each_later_stage(tmp_path: Path, monkeypatch) -> None:
    from traceq.ingestion import metrics
    from traceq.querying.stored import SUMMARY

    monkeypatch.setattr(metrics, "STORE_MIN_EVENTS", 0)  # so that this small trace stores metrics (not the diagnosis)
    bars: dict[str, _Recorder] = {}

    def factory(label: str, size: int) -> _Recorder:
        bars[label] = _Recorder()
        return bars[label]

    traceq.ingest([KINETO], store=tmp_path / "store", jobs=1, progress=factory)
    (bar,) = bars.values()
    assert bar.bytes == KINETO.stat().st_size
    assert bar.stages[:4] == [
        "building the model",
        "classifying kernels",
        "writing Parquet",
        "storing the report metrics: 0 of 9 stored",
    ]
    made = [re.fullmatch(r"storing the report metrics: (\d) of 9 stored \((\w+)\)", s) for s in bar.stages[4:]]
    assert [int(m[1]) for m in made] == list(range(1, 10))  # each metric once, in the order they were made
    assert sorted(m[2] for m in made) == sorted(SUMMARY)
    assert len(SUMMARY) == 9


def test_progress_says_when_the_model_is_built_on_disk(tmp_path: Path, monkeypatch) -> None:
    from traceq.model import on_disk

    monkeypatch.setattr(on_disk, "MIN_EVENTS", 0)
    bars: dict[str, _Recorder] = {}

    def factory(label: str, size: int) -> _Recorder:
        bars[label] = _Recorder()
        return bars[label]

    rows = traceq.ingest([KINETO], store=tmp_path / "store", jobs=1, progress=factory)
    (bar,) = bars.values()
    decoded = len([e for e in raw_trace(KINETO)["traceEvents"] if e.get("ph") in ("X", "i", "I")])
    assert bar.stages[:2] == ["building the model", f"building the model on disk ({decoded:,} events)"]
    assert rows["events"][0] == decoded
