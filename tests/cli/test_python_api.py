"""The Python API the README documents exists and agrees with the trace."""

from __future__ import annotations

import re
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
    assert report.summary["steps"] == steps
