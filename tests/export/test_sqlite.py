"""The SQLite export: every table and metric with the store's rows, keys, indexes and docs; Datasette serves it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import sqlite_utils

import traceq
from tests.conftest import run_cli
from tests.export.conftest import TRACES, run_id
from traceq.export.sqlite import SqliteExport, write_sqlite
from traceq.querying.engine import Session
from traceq.querying.files import doc, list_queries, query_text
from traceq.schema import EVENTS, RANK_TABLES


@pytest.fixture(scope="module")
def exported(export_store: Path, tmp_path_factory: pytest.TempPathFactory) -> SqliteExport:
    return write_sqlite(traceq.Store(export_store), tmp_path_factory.mktemp("sqlite") / "traces.db")


def _tables(db: sqlite_utils.Database) -> set[str]:
    return {t for t in db.table_names() if not t.startswith("sqlite_")}  # sqlite_stat1: ANALYZE's statistics


def test_every_table_has_the_stores_rows(exported: SqliteExport, export_store: Path) -> None:
    db = sqlite_utils.Database(exported.path)
    metrics = list_queries()["name"].to_list()
    assert exported.failed == {}
    assert _tables(db) == set(exported.tables)
    assert {"kinds", "runs", "events", "steps", "threads", "kernel_classes", "sources", "op_stats"} <= _tables(db)
    assert set(metrics) <= _tables(db)
    assert db["runs"].count == len(TRACES)
    with Session(export_store, own_queries=True) as session:  # one session: the metrics share their blocks
        for table in [t.name for t in RANK_TABLES] + metrics:
            requires = f"-- Requires: {table}\n" if table in metrics else ""
            expected = session.sql(f"{requires}select count(*) from {table}").item()
            got = db[table].count if table in db.table_names() else 0
            assert got == expected == exported.tables.get(table, 0), table
    # as the command counts them
    done = run_cli("sql", "select count(*) as n from events", "--store", str(export_store), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"n": db["events"].count}]


def test_a_metric_and_the_events_equal_the_stores(exported: SqliteExport, export_store: Path) -> None:
    db = sqlite_utils.Database(exported.path)
    key = ["run_id", "rank", "step", "device"]
    busy = pl.DataFrame(list(db.query("select run_id, rank, step, device, busy_ns, idle_ns from gpu_busy")))
    # the metric as the command computes it
    query = "-- Requires: gpu_busy\nselect * from gpu_busy"
    done = run_cli("sql", "--store", str(export_store), "--format", "json", "--", query)
    assert done.returncode == 0, done.stderr
    expected = pl.DataFrame(json.loads(done.stdout)).select(*key, "busy_ns", "idle_ns")
    assert busy.height == expected.height > 0
    assert busy.sort(key).equals(expected.sort(key).cast(busy.schema))
    kernels = "select run_id, kind, count(*) n, sum(dur_ns) dur from events group by run_id, kind order by run_id, kind"
    assert pl.DataFrame(list(db.query(kernels))).equals(traceq.sql(kernels, export_store))
    op = db.execute("select input_dtypes, args from events where input_dtypes is not null limit 1").fetchone()
    assert op is None or isinstance(json.loads(op[0]), list)
    (ingested,) = db.execute("select ingested_at from runs limit 1").fetchone()
    assert "T" in ingested and ingested.endswith("+00:00")


def test_keys_indexes_and_column_docs(exported: SqliteExport) -> None:
    db = sqlite_utils.Database(exported.path)
    assert db["runs"].pks == ["run_id"] and db["kinds"].pks == ["kind"]
    for name in _tables(db) - {"runs", "kinds"}:
        keys = {(f.column, f.other_table, f.other_column) for f in db[name].foreign_keys}
        assert ("run_id", "runs", "run_id") in keys, name
    assert any(f.column == "kind" and f.other_table == "kinds" for f in db["events"].foreign_keys)
    indexes = {tuple(i.columns): i.unique for i in db["events"].indexes}
    assert indexes[("run_id", "rank", "event_id")] and ("run_id", "step") in indexes and ("name",) in indexes
    assert ("run_id", "step") in {tuple(i.columns) for i in db["gpu_busy"].indexes}
    assert ("name",) in {tuple(i.columns) for i in db["kernel_classes"].indexes}
    meta = json.loads(exported.metadata_path.read_text())
    tables = meta["databases"]["traces"]["tables"]
    assert set(tables) == _tables(db)
    assert set(tables["events"]["columns"]) == {"run_id", "rank", *(c.name for c in EVENTS.columns)}
    documented = {c: d for c, (_, d) in doc(query_text("gpu_busy"))["columns"].items()}
    assert tables["gpu_busy"]["columns"] == {c: documented[c] for c in db["gpu_busy"].columns_dict}
    assert tables["gpu_busy"]["description"].startswith("Metric `gpu_busy` (queries/gpu_busy.sql): GPU busy and idle")
    # the same docs are comments in the schema, which every SQLite tool keeps
    assert "-- union of GPU work, ns" in db["gpu_busy"].schema
    assert f"-- {EVENTS.doc}" in db["events"].schema


def test_datasette_serves_the_file_with_its_docs(exported: SqliteExport) -> None:
    def get(path: str, metadata: bool = True) -> str:
        extra = ["--metadata", str(exported.metadata_path)] if metadata else []
        done = subprocess.run(
            [sys.executable, "-m", "datasette", str(exported.path), *extra, "--get", path],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert json.loads(get("/-/metadata.json")) == json.loads(exported.metadata_path.read_text())
    rows = json.loads(get("/traces/gpu_busy.json?_shape=array&_size=max"))
    assert len(rows) == exported.tables["gpu_busy"]
    assert "union of GPU work, ns" in get("/traces/gpu_busy")
    labelled = json.loads(get("/traces/events.json?_shape=array&_size=1&_labels=on", metadata=False))
    assert labelled[0]["run_id"]["label"] in TRACES  # the foreign key shows the run's name
    done = subprocess.run([sys.executable, "-m", "datasette", "inspect", str(exported.path)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert json.loads(done.stdout)["traces"]["tables"]["events"]["count"] == exported.tables["events"]


def test_a_session_exports_only_the_runs_asked_for(export_store: Path, tmp_path: Path) -> None:
    names = ["kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps"]
    ids = [run_id(export_store, n) for n in names]
    with Session(export_store, ids, use_stored=False) as session:
        result = write_sqlite(session, tmp_path / "pair.sqlite", run_ids=ids)
    db = sqlite_utils.Database(result.path)
    assert {r["run_id"] for r in db["runs"].rows} == set(ids)
    assert {r["run_id"] for r in db.query("select distinct run_id from events")} == set(ids)
    assert "op_stats" not in db.table_names()  # no summary tables among these runs
    assert result.metadata_path == tmp_path / "pair.sqlite.metadata.json"
    assert not list(tmp_path.glob(".*tmp"))


def test_a_store_written_a_run_at_a_time_holds_what_one_session_writes(
    export_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs are written from a session per group (each group's metrics made, written and freed): with a
    group per run, every table holds the rows a single session over all runs writes."""
    import traceq.export.sqlite as sqlite_export

    monkeypatch.setattr(sqlite_export, "GROUP_EVENTS", 1)
    assert len(sqlite_export.run_groups(traceq.Store(export_store).catalog())) == len(TRACES)
    grouped = write_sqlite(traceq.Store(export_store), tmp_path / "grouped.db")
    with Session(export_store, own_queries=True) as session:
        whole = write_sqlite(session, tmp_path / "whole.db")
    assert grouped.failed == whole.failed == {}
    assert grouped.tables == {k: whole.tables[k] for k in grouped.tables} and set(grouped.tables) == set(whole.tables)
    a, b = sqlite_utils.Database(grouped.path), sqlite_utils.Database(whole.path)
    for table in ("events", "gpu_busy", "idle_causes", "idle_sites", "launch_bound", "op_stats"):
        columns = ", ".join(f'"{c}"' for c in b[table].columns_dict)
        rows = f"select {columns} from {table} order by {columns}"
        assert list(a.execute(rows).fetchall()) == list(b.execute(rows).fetchall()), table
        assert a[table].schema == b[table].schema


def test_columns_cast_by_arrow_are_written_as_through_polars() -> None:
    """Batches convert only the columns SQLite has no type for through Polars: every column comes out as
    converting the whole batch through Polars gives it."""
    import datetime
    import decimal

    import pyarrow as pa

    from traceq.export.sqlite import _plain, _plain_batch, _sqlite_schema

    batch = pa.RecordBatch.from_pydict(
        {
            "flag": pa.array([True, None, False]),
            "small": pa.array([1, None, -3], pa.int32()),
            "big": pa.array([2**40, 0, None], pa.uint64()),
            "ratio": pa.array([0.5, float("nan"), None], pa.float32()),
            "name": pa.array(["a", None, "é"]),
            "dtypes": pa.array([["float", ""], None, []], pa.list_(pa.string())),
            "shape": pa.array([{"x": 1, "y": "b"}, None, {"x": None, "y": "c"}]),
            "at": pa.array([datetime.datetime(2026, 1, 2, 3, 4, 5, 6), None, datetime.datetime(2026, 1, 1)]),
            "bytes": pa.array([decimal.Decimal("12"), None, decimal.Decimal("3")], pa.decimal128(20, 0)),
            "share": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("0.5")], pa.decimal128(10, 2)),
            "code": pa.array(["x", "y", "x"]).dictionary_encode(),
        }
    )
    schema = _sqlite_schema(batch.schema)
    whole = pl.from_arrow(batch)
    assert isinstance(whole, pl.DataFrame)
    got, expected = _plain_batch(batch).cast(schema), _plain(whole).to_arrow().cast(schema)
    assert got.schema == expected.schema
    assert repr(got.to_pylist()) == repr(expected.to_pylist())  # repr: NaN as NaN


def test_metrics_made_under_a_small_memory_limit_are_the_same(
    exported: SqliteExport, export_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each group's metrics are made under DuckDB's memory limit: where one does not fit, it runs again on
    fewer threads and then without the limit (the session's configuration stays settable for that), and
    every table holds the rows made without a limit."""
    import traceq.export.sqlite as sqlite_export

    retried: list[str] = []
    again = Session._create_within_limit

    def counted(self: Session, statement: str, con) -> None:
        retried.append(statement.split()[2])
        again(self, statement, con)

    monkeypatch.setattr(sqlite_export, "MEMORY_LIMIT", "8MB")
    monkeypatch.setattr(Session, "_create_within_limit", counted)
    small = write_sqlite(traceq.Store(export_store), tmp_path / "small.db")
    assert retried  # the limit was met and the statements ran again
    assert small.failed == exported.failed == {}
    assert small.tables == exported.tables
    a, b = sqlite_utils.Database(small.path), sqlite_utils.Database(exported.path)
    for table in ("events", "gpu_gaps", "idle_causes", "idle_sites", "op_summary", "replay_host"):
        columns = ", ".join(f'"{c}"' for c in b[table].columns_dict)
        rows = f"select {columns} from {table} order by {columns}"
        assert list(a.execute(rows).fetchall()) == list(b.execute(rows).fetchall()), table


def test_a_session_with_a_memory_limit_still_reads_no_other_file(export_store: Path, tmp_path: Path) -> None:
    """Its configuration is left settable for the limit, but DuckDB still opens no file beyond the runs'."""
    import duckdb

    other = tmp_path / "other.csv"
    other.write_text("a\n1\n")
    with Session(export_store, own_queries=True, memory_limit="100MB") as session:
        assert session.con.execute("SELECT current_setting('memory_limit')").fetchall() == [("95.3 MiB",)]
        with pytest.raises(duckdb.Error):
            session.con.sql(f"SELECT * FROM read_csv('{other}')").fetchall()
    with pytest.raises(ValueError):
        Session(export_store, memory_limit="100MB")  # users' sessions: never settable


@pytest.mark.parametrize("fault", ["write", "stop"])
def test_an_export_that_fails_or_stops_leaves_no_file_and_no_writer(
    export_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """Rows are written on a thread of their own: an error there reaches the export (``write``), and an
    export stopped in its main thread (``stop``: Ctrl-C while a metric is made) ends the writer; either way
    neither the file nor its partial copy is left."""
    import threading

    import traceq.export.sqlite as sqlite_export

    if fault == "write":
        real = sqlite_export._Loader._write_rows

        def failing(self) -> None:
            def broken(*args, **kwargs) -> None:
                raise OSError("disk full (simulated)")

            self.cursor.adbc_ingest = broken
            real(self)

        monkeypatch.setattr(sqlite_export._Loader, "_write_rows", failing)
        expected: type[BaseException] = OSError
    else:
        made = Session.make

        def interrupted(self: Session, names, *args, **kwargs) -> None:
            if "idle_causes" in list(names):
                raise KeyboardInterrupt
            made(self, names, *args, **kwargs)

        monkeypatch.setattr(Session, "make", interrupted)
        expected = KeyboardInterrupt
    with pytest.raises(expected):
        write_sqlite(traceq.Store(export_store), tmp_path / "out.db")
    assert list(tmp_path.iterdir()) == []
    assert not any(t.name == "traceq-sqlite-write" and t.is_alive() for t in threading.enumerate())
