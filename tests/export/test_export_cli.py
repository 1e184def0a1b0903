"""``traceq export``: a Perfetto file and an SQLite file from each format and from a comparison, through the command."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

import traceq
from tests.conftest import run_cli
from tests.export.conftest import TIMELINES, TRACES, run_id
from tests.export.trace_format import check_trace

pytestmark = pytest.mark.slow
PAIR = ("kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps")
#: The metric checked per run where it is not gpu_busy's idle time: runs without GPU work, summary text.
METRICS = {
    "paddle331_cpu_fp32_noshapes": ("op_summary", "cpu_incl_ns"),
    "paddle_fp32.summary_default": ("summary_ops", "cpu_incl_ns"),
}


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal)


def _export(store: Path, *args: str) -> None:
    done = run_cli("export", *args, "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr.startswith("traceq: wrote ")


def _sql(store: Path, query: str) -> list[dict[str, Any]]:
    done = run_cli("sql", "--store", str(store), "--format", "json", "--", query)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", list(TRACES))
def test_a_perfetto_file_of_each_format_holds_the_run_and_its_findings(
    name: str, export_store: Path, tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.json.gz"
    _export(export_store, name, "--to", "perfetto", str(path))
    doc = _load(path)
    check = check_trace(doc)
    assert check.errors == [] and not check.overlaps
    rid = run_id(export_store, name)
    assert [r["run_id"] for r in doc["traceq"]["runs"]] == [rid]
    findings = traceq.run_report(rid, export_store).findings
    marked = [e for e in doc["traceEvents"] if e.get("cat") == "traceq.finding"]
    assert [e["name"] for e in marked] == [f.title for f in findings]
    if name in TIMELINES:  # every event of the run is in the file, with the analysis beside it
        (n,) = _sql(export_store, f"select count(*) as n from events where run_id = '{rid}'")[0].values()
        events = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i") and not e["cat"].startswith("traceq.")]
        assert len(events) == n
        query = f"-- Requires: gpu_busy\nselect sum(idle_ns) as ns from gpu_busy where run_id = '{rid}'"
        idle = _sql(export_store, query)
        slices = [e for e in doc["traceEvents"] if e.get("cat") == "traceq.idle"]
        assert sum(int(e["dur"] * 1000) for e in slices) == (idle[0]["ns"] or 0)


@pytest.mark.parametrize("name", list(TRACES))
def test_an_sqlite_file_of_each_format_holds_the_runs_rows_and_metrics(
    name: str, export_store: Path, tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.db"
    _export(export_store, "--to", "sqlite", str(path), name)
    db = sqlite_utils.Database(path)
    rid = run_id(export_store, name)
    assert [r["run_id"] for r in db["runs"].rows] == [rid]
    for table in ("events", "steps", "threads"):
        (n,) = _sql(export_store, f"select count(*) as n from {table} where run_id = '{rid}'")[0].values()
        assert db[table].count == n, table
    metric, column = METRICS.get(name, ("gpu_busy", "idle_ns"))
    query = f"-- Requires: {metric}\nselect count(*) as n, sum({column}) as s from {metric} where run_id = '{rid}'"
    expected = _sql(export_store, query)[0]
    got = db.execute(f"select count(*), sum({column}) from {metric}").fetchone()
    assert got == (expected["n"], expected["s"]) and expected["n"] > 0


def test_a_comparison_gives_one_perfetto_file_and_one_sqlite_file(export_store: Path, tmp_path: Path) -> None:
    path = tmp_path / "compare.json"
    _export(export_store, "--compare", *PAIR, "--to", "perfetto", str(path))
    doc = _load(path)
    check = check_trace(doc)
    assert check.errors == [] and not check.overlaps
    assert [r["label"] for r in doc["traceq"]["runs"]] == ["BASE", "NEW"]
    comparison = traceq.compare(*PAIR, store=export_store)
    new_pids = {p for p, n in check.process_names.items() if n.startswith(f"NEW {PAIR[1]}")}
    base_pids = {p for p, n in check.process_names.items() if n.startswith(f"BASE {PAIR[0]}")}
    marked = [e for e in doc["traceEvents"] if e.get("cat") == "traceq.finding"]
    assert [e["name"] for e in marked if e["pid"] in new_pids] == [f.title for f in comparison.findings]
    assert [e["name"] for e in marked if e["pid"] in base_pids] == [f.title for f in comparison.base.findings]
    steps = [e for e in doc["traceEvents"] if e.get("cat") == "traceq.step"]
    firsts = {min(e["ts"] for e in steps if e["pid"] in pids) for pids in (base_pids, new_pids)}
    assert firsts == {0}  # both runs' first steps start at one instant
    db_path = tmp_path / "compare.db"
    _export(export_store, "--compare", *PAIR, "--to", "sqlite", str(db_path))
    db = sqlite_utils.Database(db_path)
    ids = {run_id(export_store, n) for n in PAIR}
    assert {r["run_id"] for r in db["runs"].rows} == ids
    quoted = ", ".join(f"'{r}'" for r in sorted(ids))
    (n,) = _sql(export_store, f"select count(*) as n from events where run_id in ({quoted})")[0].values()
    assert db["events"].count == n


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((PAIR[0],), "say what to write: --to perfetto FILE or --to sqlite FILE"),
        ((*PAIR, "--to", "perfetto", "x.json"), "a Perfetto export takes one RUN, or --compare BASE NEW"),
        ((PAIR[0], "--to", "perfetto", "no/such/dir/x.json"), "no/such/dir/x.json: no such directory no/such/dir"),
        (("nope", "--to", "perfetto", "x.json"), "nope"),
        ((PAIR[0], "--to", "csv", "x.csv"), "say what to write: --to perfetto FILE or --to sqlite FILE"),
    ],
)
def test_bad_requests_are_one_line_errors(
    args: tuple[str, ...], message: str, export_store: Path, tmp_path: Path
) -> None:
    done = run_cli("export", *args, "--store", str(export_store), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("traceq: error: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())
