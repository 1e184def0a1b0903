"""The Perfetto export: valid for Perfetto's JSON importer, the original events survive, the analysis adds up."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import os
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import traceq
from tests.conftest import SHARED
from tests.export.conftest import TIMELINES, TRACES, run_id
from tests.export.trace_format import check_trace
from traceq.export.perfetto import CAUSE_NAMES, write_perfetto
from traceq.querying.engine import Session

_KINDS = (
    "select kind, count(*) n, sum(dur_ns) dur, count(launch_id) launched from events where run_id = '{}' group by kind"
)


@dataclasses.dataclass
class _Export:
    path: Path
    doc: dict[str, Any]
    run_ids: list[str]


def _export(store: Path, names: list[str], path: Path, findings: Any = None) -> _Export:
    ids = [run_id(store, n) for n in names]
    with Session(store, ids, use_stored=False) as session:
        write_perfetto(session, ids, path, findings=findings)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f, parse_float=Decimal)
    return _Export(path, doc, ids)


@pytest.fixture(scope="module", params=list(TRACES), ids=list(TRACES))
def single(request: pytest.FixtureRequest, export_store: Path, tmp_path_factory: pytest.TempPathFactory) -> _Export:
    return _export(export_store, [request.param], tmp_path_factory.mktemp("perfetto") / f"{request.param}.json")


@pytest.fixture(scope="module")
def pair(export_store: Path, tmp_path_factory: pytest.TempPathFactory) -> _Export:
    names = ["kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps"]
    path = tmp_path_factory.mktemp("perfetto") / "compare.json.gz"
    return _export(export_store, names, path)


def _events(doc: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if all(e.get(k) == v for k, v in match.items())]


def _tracks(doc: dict[str, Any]) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in _events(doc, ph="M", name="thread_name")}


def _ns(value: Decimal) -> int:
    return int(value * 1000)


def test_every_export_is_valid_for_perfettos_importer(single: _Export, export_store: Path) -> None:
    check = check_trace(single.doc)
    assert check.errors == []
    assert not check.overlaps, "slices of a track that do not nest"
    assert single.doc["displayTimeUnit"] == "ms"
    assert single.doc["traceq"]["runs"][0]["run_id"] == single.run_ids[0]
    names = check.process_names.values()
    assert any(n.endswith("traceq analysis") for n in names)
    if single.path.stem in TIMELINES:
        assert check.phases["X"] > 1000
    if "cpu" not in single.path.stem and single.path.stem in TIMELINES:  # GPU traces: launches as flows
        launched = traceq.sql(
            f"select count(*) from events where run_id = '{single.run_ids[0]}' "
            "and kind in ('kernel', 'memcpy', 'memset') and launch_id is not null",
            export_store,
        ).item()
        assert check.flows == launched > 10
        assert any(" · GPU " in n for n in names)


def test_the_original_events_read_back_the_same(single: _Export, export_store: Path, tmp_path: Path) -> None:
    """Ingesting the export gives the source run's events: counts, durations and launch links per kind,
    and every kernel, op and runtime call at its time less the run's shift."""
    name = single.path.stem
    if name not in TIMELINES:
        pytest.skip("a summary table has no events to export")
    store = tmp_path / "again"
    traceq.ingest([single.path], store=store, jobs=1)
    again = traceq.runs(store)["run_id"][0]
    source = traceq.sql(_KINDS.format(single.run_ids[0]), export_store).sort("kind")
    back = traceq.sql(_KINDS.format(again), store)
    mine = source["kind"].to_list()
    # the analysis tracks read back as kind 'other'; nsys's one window is no event of its own
    assert back.filter(pl.col("kind").is_in(mine)).sort("kind").equals(source)
    assert set(back["kind"]) - set(mine) <= {"other"}
    shift = int(single.doc["traceq"]["runs"][0]["shift_ns"]["0"])
    timed = "select kind, name, ts_ns, dur_ns from events where run_id = '{}' and kind in ('kernel', 'op', 'runtime')"
    expected = traceq.sql(timed.format(single.run_ids[0]), export_store).with_columns(pl.col("ts_ns") - shift)
    got = traceq.sql(timed.format(again), store)
    assert got.sort(pl.all()).equals(expected.sort(pl.all()))


def test_idle_slices_add_up_to_each_windows_idle_time(single: _Export, export_store: Path) -> None:
    if single.path.stem not in TIMELINES:
        pytest.skip("no timeline")
    busy = traceq.query("gpu_busy", export_store, single.run_ids[0])
    tracks = _tracks(single.doc)
    idle = _events(single.doc, ph="X", cat="traceq.idle")
    if busy.is_empty():
        assert idle == []
        return
    steps = _events(single.doc, ph="X", cat="traceq.step")
    summed: dict[tuple[int, int], int] = {}
    for e in idle:
        device = int(tracks[(e["pid"], e["tid"])].split()[1])
        (step,) = [s["args"]["step"] for s in steps if s["pid"] == e["pid"] and s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        summed[(step, device)] = summed.get((step, device), 0) + _ns(e["dur"])
        assert e["name"] in CAUSE_NAMES.values()
    expected = {(s, d): n for s, d, n in busy.select("step", "device", "idle_ns").iter_rows() if n}
    assert summed == expected
    assert len(steps) == busy["step"].n_unique()
    for s in steps:  # each window's slice carries its busy and idle time and the causes, which add up
        args = s["args"]
        per = [args] if "gpu_idle_ms" in args else list(args.get("gpus", {}).values())
        for p in per:
            assert float(sum(p["idle_by_cause_ms"].values())) == pytest.approx(float(p["gpu_idle_ms"]), abs=1e-5)


def test_comparison_aligns_both_runs_first_windows(pair: _Export) -> None:
    check = check_trace(pair.doc)
    assert check.errors == [] and not check.overlaps
    names = check.process_names
    base = {p for p, n in names.items() if n.startswith("BASE kineto_conformer_fp32_b4_2steps")}
    new = {p for p, n in names.items() if n.startswith("NEW kineto_conformer_fp16_b4_2steps")}
    assert base and new and base | new == set(names) and not base & new
    firsts = {}
    for pids in (base, new):
        steps = [e for e in _events(pair.doc, ph="X", cat="traceq.step") if e["pid"] in pids]
        firsts[min(pids)] = min(_ns(e["ts"]) for e in steps)
        assert len(steps) == 2
    assert list(firsts.values()) == [0, 0]
    shifts = [r["shift_ns"]["0"] for r in pair.doc["traceq"]["runs"]]
    assert [r["label"] for r in pair.doc["traceq"]["runs"]] == ["BASE", "NEW"] and shifts[0] != shifts[1]
    # each run's own GPU work is on its own GPU process
    kernels = _events(pair.doc, ph="X", cat="kernel")
    assert {e["pid"] for e in kernels} & base and {e["pid"] for e in kernels} & new
    assert not list(pair.path.parent.glob(".*.tmp"))  # written under a temporary name, then renamed


@dataclasses.dataclass
class _TypedFinding:
    id: str
    title: str
    impact_ms: float
    evidence: dict[str, Any]
    steps: list[int]


def test_findings_become_marked_ranges_with_their_evidence(export_store: Path, tmp_path: Path) -> None:
    name = "kineto_conformer_fp16_b4_2steps"
    report = traceq.run_report(name, export_store)
    assert report.findings
    typed = _TypedFinding("one_step", "Only the last step", 1.5, {"calls": [1, 2], "nan": float("nan")}, [6])
    exported = _export(export_store, [name], tmp_path / "findings.json", findings=[*report.findings, typed])
    assert check_trace(exported.doc).errors == []
    marked = _events(exported.doc, ph="X", cat="traceq.finding")
    assert [m["name"] for m in marked] == [f.title for f in report.findings] + ["Only the last step"]
    windows = sorted((_ns(s["ts"]), _ns(s["ts"] + s["dur"])) for s in _events(exported.doc, cat="traceq.step"))
    for m, f in zip(marked, report.findings, strict=False):
        assert m["args"]["id"] == f.id and set(m["args"]["evidence"]) == set(f.evidence)
        assert (_ns(m["ts"]), _ns(m["ts"] + m["dur"])) == (windows[0][0], windows[-1][1])
    last = marked[-1]
    assert (_ns(last["ts"]), _ns(last["ts"] + last["dur"])) == windows[-1]
    assert last["args"]["evidence"] == {"calls": [1, 2], "nan": None}
    tracks = _tracks(exported.doc)
    assert tracks[(last["pid"], last["tid"])] == "finding: one_step"


def test_summary_text_gives_a_file_that_says_it_has_no_timeline(export_store: Path, tmp_path: Path) -> None:
    exported = _export(export_store, ["paddle_fp32.summary_default"], tmp_path / "summary.json")
    (note,) = _events(exported.doc, ph="i")
    assert note["name"] == "no timeline" and note["args"]["top_ops"]


def test_casts_track_holds_the_cast_ops(export_store: Path, tmp_path: Path) -> None:
    name = "kineto_conformer_fp16_b4_2steps"
    exported = _export(export_store, [name], tmp_path / "casts.json")
    casts = _events(exported.doc, ph="X", cat="traceq.cast")
    expected = traceq.sql(
        "-- Requires: _cast_ops\nselect count(*) from events e, _cast_ops c "
        f"where e.run_id = '{exported.run_ids[0]}' and e.kind in ('op', 'op_inner') "
        "and regexp_matches(e.name, c.family)",
        export_store,
    ).item()
    assert len(casts) == expected > 100
    assert sum(c["args"]["conversion"] for c in casts) > 0
    assert {n for n in _tracks(exported.doc).values() if n.startswith("casts · ")}


def _trace_processor() -> str | None:
    """Perfetto's ``trace_processor_shell``: $TRACE_PROCESSOR_SHELL, on the PATH, or among the shared tools."""
    candidates = [os.environ.get("TRACE_PROCESSOR_SHELL"), shutil.which("trace_processor_shell"),
                  str(SHARED.parent / "tools" / "trace_processor_shell")]  # fmt: skip
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


@pytest.mark.skipif(_trace_processor() is None, reason="no trace_processor_shell (set TRACE_PROCESSOR_SHELL)")
def test_perfettos_trace_processor_loads_the_comparison(pair: _Export, tmp_path: Path) -> None:
    """Perfetto's own importer reads the file with no error or data loss and keeps every slice."""
    query = tmp_path / "q.sql"
    query.write_text(
        "select (select count(*) from slice) as slices, (select count(*) from stats "
        "where severity in ('error', 'data_loss') and value > 0) as problems;\n"
    )
    done = subprocess.run([_trace_processor(), "-q", str(query), str(pair.path)], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    values = done.stdout.strip().splitlines()[-1].replace('"', "").split(",")
    slices, problems = int(values[0]), int(values[1])
    assert problems == 0
    assert slices == len(_events(pair.doc, ph="X"))


def test_idle_slices_are_the_pieces_merged_where_one_continues_another(single: _Export, export_store: Path) -> None:
    """Pieces of ``_idle_charges`` that follow each other within a gap with the same cause, step, call,
    frame and thread are one slice: the slices are as many as such stretches, merged here in Python,
    and start where they do; their args hold no nulls, no second copy of their length, cause or step,
    and a thread only where no call is named."""
    if single.path.stem not in TIMELINES:
        pytest.skip("no timeline")
    rid = single.run_ids[0]
    pieces = traceq.sql(
        f"-- Requires: _idle_charges\nselect rank, device, gap_id, piece_start, piece_end, cause, step, site_id, "
        f"frame, pid, tid from _idle_charges where run_id = '{rid}' order by rank, device, piece_start, piece_end",
        export_store,
    )
    starts: list[int] = []
    last: tuple[Any, ...] | None = None
    end = None
    for row in pieces.iter_rows():
        key = (row[0], row[1], row[2], *row[5:])
        if key != last or row[3] != end:
            starts.append(row[3])
        last, end = key, row[4]
    idle = _events(single.doc, ph="X", cat="traceq.idle")
    shift = int(single.doc["traceq"]["runs"][0]["shift_ns"]["0"])
    assert len(idle) == len(starts)
    assert sorted(_ns(e["ts"]) for e in idle) == sorted(max(s - shift, 0) for s in starts)
    if single.path.stem.startswith("kineto"):  # some pieces continue each other (nested cast ops, held time)
        assert len(idle) < len(pieces)
    for e in idle:
        assert not {"ms", "cause", "step"} & set(e["args"]) and None not in e["args"].values()
        assert ("call" in e["args"]) != ("thread" in e["args"]) or not e["args"].get("thread")


def _causes_by_name(doc: dict[str, Any]) -> dict[str, str]:
    """The file's own map of idle slice names to causes, checked against the reports' labels."""
    causes = doc["traceq"]["idle_causes"]
    assert causes == {label: cause for cause, label in CAUSE_NAMES.items()}
    return causes


def test_idle_time_per_cause_is_the_unmerged_total(single: _Export, export_store: Path) -> None:
    """The slices' lengths summed per GPU and cause are idle_causes' totals, in whole nanoseconds: merging
    pieces into slices loses no idle time and moves none to another cause."""
    if single.path.stem not in TIMELINES:
        pytest.skip("no timeline")
    expected = traceq.sql(
        "-- Requires: idle_causes\nselect device, cause, sum(idle_ns)::BIGINT as ns from idle_causes "
        f"where run_id = '{single.run_ids[0]}' group by device, cause having sum(idle_ns) > 0",
        export_store,
    )
    causes, tracks = _causes_by_name(single.doc), _tracks(single.doc)
    summed: dict[tuple[int, str], int] = {}
    for e in _events(single.doc, ph="X", cat="traceq.idle"):
        key = (int(tracks[(e["pid"], e["tid"])].split()[1]), causes[e["name"]])
        summed[key] = summed.get(key, 0) + _ns(e["dur"])
    assert summed == {(d, c): n for d, c, n in expected.iter_rows()}
    if single.path.stem.startswith("kineto"):
        assert len({c for _, c in summed}) >= 3


def test_no_two_touching_idle_slices_share_cause_and_call(single: _Export) -> None:
    """Slices of one track that touch have another cause, call or charge, or lie in another step window
    (the steps track's slices): each stretch of one cause and call is one slice."""
    steps = _events(single.doc, ph="X", cat="traceq.step")
    by_track: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in _events(single.doc, ph="X", cat="traceq.idle"):
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)

    def window(e: dict[str, Any]) -> Any:
        return next(s["ts"] for s in steps if s["pid"] == e["pid"] and s["ts"] <= e["ts"] < s["ts"] + s["dur"])

    touching = 0
    for slices in by_track.values():
        slices.sort(key=lambda e: e["ts"])
        for a, b in itertools.pairwise(slices):
            assert a["ts"] + a["dur"] <= b["ts"]  # no overlap on a track
            if a["ts"] + a["dur"] == b["ts"]:
                touching += 1
                assert (a["name"], a["args"]) != (b["name"], b["args"]) or window(a) != window(b)
    if single.path.stem.startswith("kineto"):
        assert touching > 100  # the check met many neighbours
