"""Metrics stored at ingest are exactly what the queries compute from the events, and are used only
when they were made by the current query files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.conftest import SAMPLES, shared, to_9_digits
from traceq import queries
from traceq.errors import QueryError
from traceq.ingestion import metrics
from traceq.model import on_disk
from traceq.querying import files, macros
from traceq.querying.engine import Session, stored_metrics
from traceq.querying.files import fingerprint, metric_fingerprint
from traceq.querying.stored import CACHED, DIAGNOSIS, SUMMARY, stored_files
from traceq.render import json_form
from traceq.store import Store


@pytest.fixture(autouse=True)
def store_metrics_of_small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples are small: store their metrics anyway, the diagnosis too (ingest runs in this process
    with jobs=1)."""
    monkeypatch.setattr(metrics, "STORE_MIN_EVENTS", 0)
    monkeypatch.setattr(metrics, "DIAGNOSIS_MIN_EVENTS", 0)


RUNS = {
    "kineto": SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz",
    "paddle_layout": SAMPLES / "paddlefmt_conformer_fp16_b64_2steps.json.gz",
    "hta_triton": SAMPLES / "hta_triton_example.json.gz",
    "cudnn_search": SAMPLES / "planted" / "cudnn_var_fp16_3steps.json.gz",
}
#: Metrics some of these runs have no rows of: casts and precisions (HTA's example has no ops), searches
#: (only the run that autotunes has them), the host calls (syncs, allocations and data loading: not in
#: HTA's example).
MAY_BE_EMPTY = {
    "hta_triton": {"cast_overhead", "precision_coverage", "_search_calls", "search_gpu_time", "host_calls"},
    "kineto": {"_search_calls", "search_gpu_time"},
    "paddle_layout": {"_search_calls", "search_gpu_time"},
}


def _gaps_by_start(frame: pl.DataFrame) -> pl.DataFrame:
    """``_idle_pieces`` numbers its gaps in no particular order (a key, different in each computation): each
    piece's gap named by its GPU and the gap's first instant instead."""
    if "gap_id" not in frame.columns:
        return frame
    return frame.with_columns(gap_id=pl.col("piece_start").min().over("device", "gap_id"))


def _live(store: Store, run_id: str, name: str) -> pl.DataFrame:
    """The metric computed from the events, with the stored results hidden."""
    with Session(store, [run_id], use_stored=False) as session:
        return session.query(name)


@pytest.mark.parametrize("label", sorted(RUNS))
def test_stored_metrics_equal_the_queries_on_the_events(label: str, store_dir: Path) -> None:
    run_id = traceq.ingest([RUNS[label]], store=store_dir, jobs=1)["run_id"][0]
    store = Store(store_dir)
    with Session(store, [run_id]) as session:
        for name in CACHED:
            assert stored_files(store.runs_dir, [run_id], name, metric_fingerprint(name)) is not None
            stored, live = _gaps_by_start(session.query(name)), _gaps_by_start(_live(store, run_id, name))
            assert stored.columns == live.columns, name
            assert stored.height == live.height, name
            assert live.height > 0 or name in MAY_BE_EMPTY.get(label, ()), name
            key = [c for c in stored.columns if stored.schema[c] in (pl.String, pl.Int64, pl.Int32, pl.Boolean)]
            assert stored.sort(key, nulls_last=True).equals(live.cast(stored.schema).sort(key, nulls_last=True)), name


def test_a_multi_rank_run_stores_metrics_per_rank(store_dir: Path) -> None:
    run_id = traceq.ingest([SAMPLES / "ddp" / "fp32"], store=store_dir, name="ddp", jobs=1)["run_id"][0]
    store = Store(store_dir)
    with Session(store, [run_id]) as session:
        stored = session.query("gpu_busy")
    assert sorted(stored["rank"].unique()) == [0, 1]
    assert stored.sort("rank", "step").equals(_live(store, run_id, "gpu_busy").sort("rank", "step"))


def test_results_of_other_query_files_are_not_used(store_dir: Path) -> None:
    run_id = traceq.ingest([RUNS["kineto"]], store=store_dir, jobs=1)["run_id"][0]
    store = Store(store_dir)
    stamp = next((store_dir / "runs").glob("*/rank=0/metrics/fingerprint.txt"))
    stamp.write_text("0" * 16 + "\n")
    assert stored_files(store.runs_dir, [run_id], "gpu_busy", metric_fingerprint("gpu_busy")) is None
    with Session(store, [run_id]) as session:  # computed from the events instead
        assert session.query("gpu_busy")["busy_ns"].sum() == _live(store, run_id, "gpu_busy")["busy_ns"].sum()


def test_a_changed_metric_alone_is_computed_again(store_dir: Path) -> None:
    """A stamp whose line for one metric differs (that metric's query changed) leaves the others' stored
    results in use; the changed one is computed from the events, the same as from scratch."""
    run_id = traceq.ingest([RUNS["kineto"]], store=store_dir, jobs=1)["run_id"][0]
    store = Store(store_dir)
    stamp = next((store_dir / "runs").glob("*/rank=0/metrics/fingerprint.txt"))
    lines = stamp.read_text().splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted(CACHED)
    stamp.write_text("".join(("idle_causes " + "0" * 16 if line.startswith("idle_causes ") else line) + "\n"
                             for line in lines))  # fmt: skip
    assert stored_metrics(store.runs_dir, run_id) == frozenset(CACHED) - {"idle_causes"}
    with Session(store, [run_id]) as session:
        again = session.query("idle_causes")
    live = _live(store, run_id, "idle_causes")
    assert again.height > 0 and again.sort(again.columns).equals(live.sort(live.columns))


def test_a_metric_is_fingerprinted_by_the_query_files_it_is_made_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing the idle pieces' query changes the fingerprints of the metrics made from them, not those
    of the GPU's busy time or the op table."""
    before = {name: files.metric_fingerprint(name) for name in CACHED}
    text = files.query_text
    monkeypatch.setattr(files, "query_text", lambda n: text(n) + ("\n-- changed" if n == "_idle_pieces" else ""))
    files.metric_fingerprint.cache_clear()
    try:
        changed = {name for name in CACHED if files.metric_fingerprint(name) != before[name]}
    finally:
        files.metric_fingerprint.cache_clear()
    assert {"_idle_pieces", "idle_causes", "idle_sites"} <= changed
    assert not {"gpu_busy", "gpu_gaps", "op_summary", "precision_coverage", "_windows"} & changed


def test_the_fingerprint_covers_the_query_files_and_their_macros() -> None:
    """Stored results depend on the query files and on the macros expanded into them: a change to either
    gives another fingerprint (computed here from the files on disk, independently)."""
    digest = hashlib.sha256()
    for path in sorted(Path(queries.__file__).parent.glob("*.sql")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    without_macros = digest.hexdigest()[:16]
    digest.update(b"macros.py\0" + Path(macros.__file__).read_bytes() + b"\0")
    assert fingerprint() == digest.hexdigest()[:16] != without_macros


def test_summary_text_runs_store_no_metrics(store_dir: Path) -> None:
    traceq.ingest([shared("paddle/issue48321_fp32_operator_summary.txt")], store=store_dir, jobs=1)
    assert not list((store_dir / "runs").glob("*/rank=0/metrics"))


def test_the_diagnosis_is_stored_from_its_own_size_on(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below :data:`~traceq.ingestion.metrics.DIAGNOSIS_MIN_EVENTS` a rank stores the summary metrics alone, and
    a report computes the diagnosis from its events: the same report as from a run that stored it."""
    full = traceq.ingest([RUNS["kineto"]], store=store_dir / "full", jobs=1)["run_id"][0]
    monkeypatch.setattr(metrics, "DIAGNOSIS_MIN_EVENTS", 10**12)
    part = traceq.ingest([RUNS["kineto"]], store=store_dir / "part", jobs=1)["run_id"][0]
    assert stored_metrics(Store(store_dir / "full").runs_dir, full) == frozenset(SUMMARY + DIAGNOSIS)
    assert stored_metrics(Store(store_dir / "part").runs_dir, part) == frozenset(SUMMARY)
    runs = ((full, "full"), (part, "part"))
    reports = [to_9_digits(json_form.report(traceq.run_report(r, store_dir / s))) for r, s in runs]
    assert reports[0]["findings"] and reports[0]["step_causes"]
    assert reports[0] == reports[1]


def test_small_runs_store_no_metrics_by_default(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "STORE_MIN_EVENTS", 350_000)
    run_id = traceq.ingest([RUNS["kineto"]], store=store_dir, jobs=1)["run_id"][0]
    assert traceq.runs(store_dir)["n_events"][0] < 350_000
    assert not list((store_dir / "runs").glob("*/rank=0/metrics"))
    assert stored_files(Store(store_dir).runs_dir, [run_id], "gpu_busy", metric_fingerprint("gpu_busy")) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "path", [RUNS["paddle_layout"], shared("nsys/nsys_conformer_fp16_b4.sqlite.gz")], ids=["chrome", "nsys"]
)
def test_a_run_built_on_disk_stores_the_same_events_and_metrics(
    path: Path, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_limits: list[str | None]
) -> None:
    with monkeypatch.context() as m:  # the reference: its metrics are computed from its events below
        m.setattr(metrics, "STORE_MIN_EVENTS", 10**12)
        in_memory = traceq.ingest([path], store=tmp_path / "memory", jobs=1)["run_id"][0]
    monkeypatch.setattr(on_disk, "MIN_EVENTS", 0)
    monkeypatch.setattr(on_disk, "BUCKET_ROWS", 4000)
    monkeypatch.setattr(metrics, "bounded_memory_limit", lambda: 64 * 10**6)
    monkeypatch.setattr(metrics, "STEP_MEMORY_SHARE", 0.0)  # (not the replay's share: see the test below)
    run_id = traceq.ingest([path], store=store_dir, jobs=1)["run_id"][0]
    assert memory_limits == ["64MB"]  # the metrics of a model built on disk keep to the limit
    events = traceq.sql("select * exclude (run_id) from events order by event_id", store=store_dir)
    expected = traceq.sql("select * exclude (run_id) from events order by event_id", store=tmp_path / "memory")
    assert events.height > 5 * on_disk.BUCKET_ROWS
    assert events.equals(expected)
    assert not list((store_dir / "tmp").iterdir())  # the model's files went with the spill folder
    _assert_stored_metrics_are_the_queries(Store(store_dir), run_id, Store(tmp_path / "memory"), in_memory)


def _assert_stored_metrics_are_the_queries(store: Store, run_id: str, reference: Store, reference_id: str) -> None:
    """Each stored metric of ``run_id`` equals the query computed from the events of the same trace
    ingested in memory (``reference_id`` in ``reference``), row for row."""
    with Session(store, [run_id]) as session:
        for name in CACHED:
            stored = _gaps_by_start(session.query(name))
            key = [c for c in stored.columns if stored.schema[c] in (pl.String, pl.Int64, pl.Int32, pl.Boolean)]
            live = _gaps_by_start(_live(reference, reference_id, name).with_columns(pl.lit(run_id).alias("run_id")))
            assert stored.sort(key, nulls_last=True).equals(live.cast(stored.schema).sort(key, nulls_last=True)), name


@pytest.fixture
def memory_limits(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The DuckDB memory limit of every session the ingest opens over its staged ranks."""
    limits: list[str | None] = []
    opened = Session.over_ranks.__func__  # type: ignore[attr-defined]

    def over_ranks(cls: type[Session], *args: object, memory_limit: str | None = None, **kwargs: object) -> Session:
        limits.append(memory_limit)
        return opened(cls, *args, memory_limit=memory_limit, **kwargs)

    monkeypatch.setattr(Session, "over_ranks", classmethod(over_ranks))
    return limits


@pytest.mark.slow
def test_metrics_that_cannot_keep_to_the_limit_are_computed_without_it(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_limits: list[str | None]
) -> None:
    """Not every DuckDB operator spills: under a limit too small for them, each query runs again without
    it, and the stored metrics are still the queries' results (1 MB fails every metric's first try here)."""
    path = RUNS["kineto"]
    in_memory = traceq.ingest([path], store=tmp_path / "memory", jobs=1)["run_id"][0]
    monkeypatch.setattr(on_disk, "MIN_EVENTS", 0)
    monkeypatch.setattr(metrics, "bounded_memory_limit", lambda: 10**6)
    monkeypatch.setattr(metrics, "STEP_MEMORY_SHARE", 0.0)  # (the replay's share would lift it)
    run_id = traceq.ingest([path], store=store_dir, jobs=1)["run_id"][0]
    assert memory_limits == [None, "1MB"]
    _assert_stored_metrics_are_the_queries(Store(store_dir), run_id, Store(tmp_path / "memory"), in_memory)


def test_a_metric_that_fails_leaves_the_run_ingested_without_stored_metrics(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored metrics are a cache: a query that fails at ingest costs them, with a warning, not the run."""
    streamed = Session.stream

    def stream(self: Session, name: str, batch_rows: int = 1 << 16) -> pl.LazyFrame:
        if name == "op_summary":
            raise QueryError("op_summary: Out of Memory Error: could not allocate")
        return streamed(self, name, batch_rows)

    monkeypatch.setattr(Session, "stream", stream)
    result = traceq.ingest([RUNS["kineto"]], store=store_dir, jobs=1)
    assert result["status"].to_list() == ["ingested"]
    assert "report metrics not stored (op_summary: Out of Memory Error" in result["warnings"][0]
    assert not list((store_dir / "runs").glob("*/rank=0/metrics"))
    run_id = result["run_id"][0]
    assert stored_files(Store(store_dir).runs_dir, [run_id], "gpu_busy", metric_fingerprint("gpu_busy")) is None
    assert _live(Store(store_dir), run_id, "op_summary").height > 0


def test_stored_results_are_read_from_their_files_and_the_report_reads_gaps_counted(store_dir: Path) -> None:
    """A report of a run whose results were all stored reads them from their files, with no DuckDB
    connection, and never the per-gap rows (``gpu_gaps`` has a row per gap: 1.7 M on the 61x nsys
    export): it takes the gaps counted and summed per bucket, stored too, which add up to the per-gap
    rows computed from the events."""
    from traceq.analysis.report import run_report

    run_id = traceq.ingest([RUNS["kineto"]], store=store_dir, jobs=1)["run_id"][0]
    store = Store(store_dir)
    with Session(store, [run_id], own_queries=True) as session:
        report = run_report(run_id, store, session, lanes=False)
        assert session._con is None
        assert "gpu_gaps" not in session._frames and "gpu_gap_buckets" in session._frames
    counted = report.frames["gpu_gap_buckets"]
    live = _live(store, run_id, "gpu_gaps")
    assert counted.columns == ["rank", "step", "device", "kind", "bucket", "gaps", "gap_ns"]
    assert counted.height < live.height
    by_kind = counted.group_by("kind").agg(pl.col("gaps").sum(), pl.col("gap_ns").sum()).sort("kind")
    expected = live.group_by("kind").agg(pl.len().alias("gaps"), pl.col("gap_ns").sum()).sort("kind")
    assert by_kind.equals(expected.cast(by_kind.schema))
    assert report.gap_histogram["gaps"].sum() == live.height


def test_the_metrics_before_a_stored_replay_may_take_half_its_memory(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_limits: list[str | None]
) -> None:
    """Where the step estimated without the profiler will be stored with a run built on disk, its replay
    sets the ingest's peak (1 KB per event): the metrics before it keep to half of that instead of the
    limit that would make them spill (1 MB here); where the replay will not run (it would not fit the
    memory available), to that limit."""
    from traceq.analysis.replay import explain
    from traceq.analysis.replay.stored import NUMBERS

    monkeypatch.setattr(on_disk, "MIN_EVENTS", 0)
    monkeypatch.setattr(metrics, "bounded_memory_limit", lambda: 10**6)
    traceq.ingest([RUNS["kineto"]], store=store_dir, jobs=1)
    events = traceq.runs(store_dir)["n_events"][0]
    assert events > 10_000 and memory_limits == [f"{events * 500 // 10**6}MB"]
    assert list((store_dir / "runs").glob(f"*/rank=*/metrics/{NUMBERS}"))  # the replay was stored
    monkeypatch.setattr(explain, "available_memory", lambda: events * 1000)  # 4x what it may take: no replay
    traceq.ingest([RUNS["kineto"]], store=tmp_path / "other", jobs=1)
    assert memory_limits[1:] == ["1MB"] and not list((tmp_path / "other").glob(f"runs/*/rank=*/metrics/{NUMBERS}"))


@pytest.mark.parametrize(
    ("bounded", "step", "limit"),
    [(False, 10**10, None), (True, None, "640MB"), (True, 10**9, "640MB"), (True, 3 * 10**9, "1500MB")],
)
def test_the_metrics_limit_is_the_larger_of_the_bounded_one_and_half_the_steps(
    bounded: bool, step: int | None, limit: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "available_memory", lambda: 24 * 10**9)
    assert metrics.metrics_memory_limit(bounded, step) == limit


@pytest.mark.parametrize(
    ("available", "limit"), [(10**9, 256 * 10**6), (4 * 10**9, 500 * 10**6), (24 * 10**9, 640 * 10**6)]
)
def test_the_limit_of_metrics_built_on_disk_is_sized_from_the_available_memory(
    available: int, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An eighth of what is available, within the bounds that keep the ingest under about 1 GB."""
    monkeypatch.setattr(metrics, "available_memory", lambda: available)
    assert metrics.bounded_memory_limit() == limit


@pytest.mark.parametrize("label", sorted(RUNS))
def test_stored_results_read_from_their_files_are_their_views(label: str, store_dir: Path) -> None:
    """A stored result read without DuckDB is row for row, column for column and type for type what its
    view over the same files gives (``run_id`` and ``rank`` from the folder names first)."""
    run_id = traceq.ingest([RUNS[label]], store=store_dir, jobs=1)["run_id"][0]
    store = Store(store_dir)
    with Session(store, [run_id], own_queries=True) as read, Session(store, [run_id], own_queries=True) as viewed:
        for name in CACHED:
            viewed.make([name])
            frame, view = read.query(name), viewed.sql(f"select * from {name}")
            assert frame.schema == view.schema and frame.equals(view), name
        assert read._con is None  # the session that read the files never connected
