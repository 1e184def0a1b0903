"""Steps chosen at report time (``report --steps-from``) are read for that report alone: the store is written
only by ingest, so no second run of the same name appears and later comparisons still find each run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import traceq
from tests.conftest import SAMPLES, raw_trace, run_cli, tree_state

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"


def _host_ranges(path: Path, regex: str) -> int:
    """The host ranges (``user_annotation``) of the raw file whose names match ``regex``."""
    events = raw_trace(path)["traceEvents"]
    return sum(1 for e in events if e.get("cat") == "user_annotation" and re.search(regex, e.get("name", "")))


def test_steps_from_at_report_time_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for path in (FP32, FP16):
        assert run_cli("ingest", "--store", str(store), "-j", "1", str(path)).returncode == 0
    before = tree_state(store)
    name = "kineto_conformer_fp16_b4_2steps"
    for regex in ("Optimizer.step", "Optimizer.step#Adam"):
        done = run_cli("report", name, "--steps-from", regex, "--store", str(store), "--format", "json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["steps"] == _host_ranges(FP16, regex) == 2
        assert regex in report["step_rule"] and report["run"]["name"] == name
        assert "not stored" in done.stderr
        compared = run_cli("report", "--compare", "--steps-from", regex, "--store", str(store), "--format", "json")
        assert compared.returncode == 0, compared.stderr
        assert json.loads(compared.stdout)["new"]["steps"] == 2
    api = traceq.run_report(name, store, steps_from="Optimizer.step")
    assert api.summary.steps == 2
    assert tree_state(store) == before
    assert traceq.runs(store)["name"].sort().to_list() == sorted([name, "kineto_conformer_fp32_b4_2steps"])
    done = run_cli("report", "--compare", "--store", str(store), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["new"]["run"]["name"] == name
