"""Bounded output: a trace of many distinct ops, each on its own thread, gives a report whose JSON lists
the ops with the most CPU time (``--all``: every op), not one row per name in the trace."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import traceq
from tests.conftest import SAMPLES, run_cli
from traceq.render import render
from traceq.render.formats import TOP_OPS

#: every case below is counted in the README's reliability tally
CASES: list[str] = []

N_OPS = 3 * TOP_OPS


def _many_ops_trace(tmp_path: Path) -> Path:
    """The FP32 sample with ``N_OPS`` more ops inside its first step, each with its own name and thread."""
    doc = json.loads(gzip.decompress((SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz").read_bytes()))
    events = doc["traceEvents"]
    step = min((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    pid = step["pid"]
    for i in range(N_OPS):
        events.append({"ph": "X", "cat": "cpu_op", "name": f"many_{i:04d}", "pid": pid, "tid": 10_000 + i,
                       "ts": step["ts"] + 1 + i * 0.01, "dur": 1 + i * 0.001, "args": {}})  # fmt: skip
    path = tmp_path / "many_ops.json"
    path.write_text(json.dumps(doc))
    return path


def test_report_json_lists_the_top_ops_and_all_of_them_with_all(tmp_path: Path) -> None:
    trace = _many_ops_trace(tmp_path)
    store = str(tmp_path / "store")
    assert run_cli("ingest", "-q", "--store", store, str(trace)).returncode == 0
    names = {
        e["name"]
        for e in json.loads(trace.read_text())["traceEvents"]
        if e.get("cat") == "cpu_op" and e.get("ph") == "X"
    }
    top = json.loads(run_cli("report", "--store", store, "--format", "json").stdout)
    every = json.loads(run_cli("report", "--all", "--store", store, "--format", "json").stdout)
    assert top["ops_total"] == every["ops_total"] == len(every["ops"])
    assert len(top["ops"]) == TOP_OPS < top["ops_total"]
    assert {o["name"] for o in every["ops"]} >= {f"many_{i:04d}" for i in range(N_OPS)}
    assert {o["name"] for o in every["ops"]} <= names
    # the listed ops are those with the most CPU time per step
    cpu = sorted((o["cpu_incl_ns_per_step"] for o in every["ops"]), reverse=True)
    assert [o["cpu_incl_ns_per_step"] for o in top["ops"]] == cpu[:TOP_OPS]


CASES.append(f"a report of {N_OPS} more distinct ops, each on its own thread (JSON lists {TOP_OPS}; --all every op)")


def test_the_report_carries_every_op_and_render_lists_the_top_ones(tmp_path: Path) -> None:
    """The analysis keeps the whole op table; :func:`~traceq.render.render` cuts it, for a run and for each
    run of a comparison (``top=None``: every op)."""
    trace = _many_ops_trace(tmp_path)
    store = tmp_path / "store"
    report = traceq.run_report(str(trace), store, unprofiled=False)
    assert report.ops.height == report.summary.ops_total > TOP_OPS
    comparison = traceq.compare(str(SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"), str(trace), store,
                                unprofiled=False)  # fmt: skip
    assert comparison.new.ops.height == report.ops.height
    for result, lists in ((report, lambda d: d["ops"]), (comparison, lambda d: d["new"]["ops"])):
        cut, every = io.StringIO(), io.StringIO()
        render(result, "json", cut)
        render(result, "json", every, top=None)
        assert len(lists(json.loads(cut.getvalue()))) == TOP_OPS
        assert len(lists(json.loads(every.getvalue()))) == report.ops.height
