"""An Nsight Systems capture without profiler steps: its steps are its NVTX ``train_step N`` ranges, the
unchanged replay reproduces them, and the estimate without nsys is close to the measured step time; real
captures whose steps are the stretches between optimizer steps, or one window."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from itertools import pairwise
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.analysis.replay.conftest import PLANTED
from tests.analysis.replay.test_graph_nodes import reference_nodes
from tests.conftest import SHARED
from traceq.analysis.replay import Replayer
from traceq.analysis.replay.graph import _nodes
from traceq.querying.engine import Session
from traceq.store import Store

CAPTURE = "nsys_sync_fp16_3steps"


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Replayer, dict, Path]:
    work = tmp_path_factory.mktemp("nsys")
    path = PLANTED / f"{CAPTURE}.sqlite.gz"
    traceq.ingest([path], store=work / "store", jobs=1)
    store = Store(work / "store")
    run_id = store.resolve(CAPTURE)
    with Session(store, [run_id], use_stored=False) as s:
        replayer = Replayer.load(s, run_id)
    manifest = json.loads((PLANTED / "manifest.json").read_text())["captures"][f"{CAPTURE}.sqlite.gz"]
    db = work / "capture.sqlite"
    with gzip.open(path) as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return replayer, manifest, db


def _nvtx_steps(db: Path) -> list[tuple[int, int]]:
    """(step number, duration ns) of the capture's ``train_step N`` ranges, read from the export itself."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            """SELECT coalesce(e.text, s.value), e."end" - e.start FROM NVTX_EVENTS e
            LEFT JOIN StringIds s ON s.id = e.textId WHERE e."end" IS NOT NULL ORDER BY e.start"""
        ).fetchall()
    finally:
        con.close()
    return [(int(text.split()[1]), dur) for text, dur in rows if text and text.startswith("train_step ")]


def test_the_steps_are_the_nvtx_step_ranges(capture):
    replayer, _, db = capture
    steps = replayer.timeline.steps
    expected = _nvtx_steps(db)
    assert len(expected) == 3
    assert list(zip(steps["step"], steps["end"] - steps["ts"], strict=True)) == expected


def test_the_unchanged_replay_reproduces_each_step(capture):
    replayer, _, _ = capture
    out = replayer.reproduce()
    assert out.height == 3 and out["diff_ms"].abs().max() < 1e-6


def test_the_estimate_without_nsys_is_close_to_the_measured_step(capture):
    replayer, manifest, _ = capture
    est = replayer.unprofiled()
    assert est.step_ms == pytest.approx(manifest["step_ms"], rel=0.15)
    assert est.low_ms <= est.step_ms <= est.high_ms < est.traced_ms
    assert any("its NVTX op ranges without shapes and traced CUDA calls" in n for n in est.notes)


def test_the_nvtx_step_ranges_are_replayed_as_annotations(capture):
    """Not as ops: the training loop's thread, inside its open step range, waits for the backward that runs
    on another thread (the replay finds one such wait per step, after ``aten::ones_like``, the gradient's
    seed, that lasts as long as the other thread's work in it)."""
    replayer, _, db = capture
    host = replayer.timeline.host.filter(pl.col("name").str.starts_with("train_step "))
    assert host.height == len(_nvtx_steps(db)) and set(host["kind"]) == {"annotation"}
    graph = replayer.graph
    main = replayer.timeline.main_thread
    waits = graph.barriers.filter((pl.col("type") == "thread") & (pl.col("thread") == main))
    before = graph.nodes["row"].gather(waits["slice"])
    names = replayer.timeline.host["name"].gather(before).to_list()
    assert names == ["aten::ones_like"] * len(_nvtx_steps(db))


def test_nodes_match_the_reference(capture):
    """The capture's host nodes (its threads in blocks, each in time order) as the plain reference has them."""
    host = capture[0].timeline.host
    nodes, expected = _nodes(host), reference_nodes(host)
    assert host["thread"].n_unique() > 1
    for column in expected.columns:
        assert nodes[column].cast(expected[column].dtype).to_list() == expected[column].to_list(), column


def _optimizer_ends(path: Path, work: Path) -> list[int]:
    """The ends (ns) of a gzipped export's ``Optimizer.step`` ranges in time order, read from the export itself."""
    db = work / "export.sqlite"
    with gzip.open(path) as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            """SELECT e."end" FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
            WHERE e."end" IS NOT NULL AND coalesce(e.text, s.value) LIKE 'Optimizer.step#%' ORDER BY e.start"""
        ).fetchall()
    finally:
        con.close()
    return [end for (end,) in rows]


def _shared_replayer(tmp_path: Path, export: str) -> Replayer:
    path = SHARED / "nsys" / f"{export}.sqlite.gz"
    traceq.ingest([path], store=tmp_path / "store", jobs=1)
    store = Store(tmp_path / "store")
    run_id = store.resolve(export)
    with Session(store, [run_id], use_stored=False) as s:
        return Replayer.load(s, run_id)


def test_steps_between_optimizer_steps_run_between_their_ends_as_replayed(tmp_path: Path) -> None:
    """A real capture whose steps are the stretches between optimizer steps (as many as its
    ``Optimizer.step`` ranges less one): each is bounded by the ends of the two optimizer ranges around it,
    the unchanged replay reproduces it, and without the profiler the replay can shorten it."""
    export = "nsys_conformer_fp16_b4"
    ends = _optimizer_ends(SHARED / "nsys" / f"{export}.sqlite.gz", tmp_path)
    steps = len(ends) - 1
    replayer = _shared_replayer(tmp_path, export)
    tl = replayer.timeline
    assert tl.steps.height == steps and tl.steps["row"].is_null().all() and tl.between_ranges
    bounds = [(a + tl.t0_ns, b + tl.t0_ns) for a, b in tl.steps.sort("ts").select("ts", "end").iter_rows()]
    assert bounds == list(pairwise(ends))  # nsys and traceq share the session's clock: the export's own times
    host = tl.host.select("row", "name", anchor_end="end")
    for side, bound in (("after_row", "ts"), ("until_row", "end")):
        anchors = tl.steps.join(host, left_on=side, right_on="row", how="left")
        assert anchors["name"].str.starts_with("Optimizer.step#").all(), side
        assert (anchors["anchor_end"] == anchors[bound]).all(), side
    assert replayer.reproduce()["diff_ms"].abs().max() < 1e-6
    est = replayer.unprofiled()
    assert est.step_ms < est.traced_ms * 0.9
    note = f"the {steps} steps are the stretches between optimizer steps"
    assert sum(n.startswith(note) for n in est.notes) == 1


def test_a_whole_capture_window_is_kept_as_traced_and_the_note_says_so(tmp_path: Path) -> None:
    """A real capture with no steps at all: its one window is the capture's span, which the replay keeps,
    so the estimate is not below the traced step, and its note says why."""
    replayer = _shared_replayer(tmp_path, "rodinia_gaussian_report2__nsys2022.4.2")
    assert replayer.timeline.steps.height == 1 and replayer.timeline.fixed_steps
    est = replayer.unprofiled()
    assert est.step_ms >= est.traced_ms * (1 - 1e-9)
    note = "no steps on the host: the one window is the capture's span"
    assert sum(n.startswith(note) for n in est.notes) == 1
