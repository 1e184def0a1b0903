"""Users' SQL cannot write anywhere: every way DuckDB has to write, read other files, attach, load or
unlock its configuration fails with one line, through the library and the command, and every file of
the store keeps its bytes. The connection itself can open no file (not only the statement check)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

import traceq
from tests.conftest import SAMPLES, run_cli
from traceq.errors import QueryError
from traceq.querying.engine import connect

KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("read_only") / "store"
    traceq.ingest([KINETO], store=root, jobs=1)
    return root


def _digests(root: Path) -> dict[str, str]:
    """The sha256 of every file under ``root``, by relative path."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def _events_file(store: Path) -> Path:
    return next((store / "runs").glob("run_id=*/rank=0/events.parquet"))


def _writes(store: Path, outside: Path) -> dict[str, str]:
    """Statements that would write into the store or beside it, read files outside it, or unlock DuckDB."""
    events = _events_file(store)
    hostname = Path("/etc/hostname") if Path("/etc/hostname").is_file() else KINETO
    return {
        "explain analyze copy over a store file": (
            f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{events}' (FORMAT parquet)"
        ),
        "explain analyze copy without a temporary file": (
            f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{events}' (FORMAT parquet, USE_TMP_FILE false)"
        ),
        "explain analyze copy outside the store": f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{outside}/out.csv'",
        "copy over a store file": f"COPY (SELECT 1 AS x) TO '{events}' (FORMAT parquet)",
        "export database into the store": f"EXPORT DATABASE '{store}/exported'",
        "explain analyze export database": f"EXPLAIN ANALYZE EXPORT DATABASE '{outside}/exported'",
        "attach a database file in the store": f"ATTACH '{store}/runs/db.duckdb' AS db",
        "create table as in an attached file": (
            f"ATTACH '{store}/runs/db.duckdb' AS db; CREATE TABLE db.t AS SELECT * FROM events"
        ),
        "create table as": "CREATE TABLE t AS SELECT * FROM events",
        "install an extension": "INSTALL httpfs",
        "load an extension": "LOAD httpfs",
        "read_text outside the store": f"SELECT * FROM read_text('{hostname}')",
        "read_csv outside the store": f"SELECT * FROM read_csv('{hostname}')",
        "explain analyze read_text": f"EXPLAIN ANALYZE SELECT * FROM read_text('{hostname}')",
        "sniff_csv outside the store": f"SELECT * FROM sniff_csv('{hostname}')",
        "glob of the file system": "SELECT * FROM glob('/*')",
        "read_parquet of a store file by path": f"SELECT count(*) FROM read_parquet('{events}')",
        "set external access back on": "SET enable_external_access = true",
        "reset external access": "RESET enable_external_access",
        "allow every directory": "SET allowed_directories = ['/']",
        "unlock the configuration": "SET lock_configuration = false",
        "profile into a file": f"SET profiling_output = '{outside}/profile.json'",
    }


CASES = [
    "explain analyze copy over a store file",
    "explain analyze copy without a temporary file",
    "explain analyze copy outside the store",
    "copy over a store file",
    "export database into the store",
    "explain analyze export database",
    "attach a database file in the store",
    "create table as in an attached file",
    "create table as",
    "install an extension",
    "load an extension",
    "read_text outside the store",
    "read_csv outside the store",
    "explain analyze read_text",
    "sniff_csv outside the store",
    "glob of the file system",
    "read_parquet of a store file by path",
    "set external access back on",
    "reset external access",
    "allow every directory",
    "unlock the configuration",
    "profile into a file",
]


@pytest.mark.parametrize("case", CASES)
def test_users_sql_cannot_write_or_reach_outside_the_store(store: Path, tmp_path: Path, case: str) -> None:
    query = _writes(store, tmp_path)[case]
    before = _digests(store)
    with pytest.raises(QueryError) as raised:
        traceq.sql(query, store)
    assert "\n" not in str(raised.value)
    done = run_cli("sql", "--store", str(store), query, cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("traceq: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert _digests(store) == before
    assert not list(tmp_path.iterdir())  # nothing written beside the store either
    assert traceq.sql("SELECT count(*) AS n FROM events", store)["n"][0] == 22_786


@pytest.mark.parametrize("case", CASES)
def test_the_connection_itself_cannot_write_or_reach_outside_the_store(store: Path, tmp_path: Path, case: str) -> None:
    """Without the statement check: the users' connection refuses each statement on its own."""
    query = _writes(store, tmp_path)[case]
    before = _digests(store)
    con = connect(store)
    try:
        if case == "create table as":  # in the connection's own memory: harmless, and it reads no file
            con.execute(query)
        else:
            with pytest.raises(duckdb.Error):
                con.execute(query).fetchall()
        assert con.execute("SELECT count(*) FROM events").fetchone() == (22_786,)
    finally:
        con.close()
    assert _digests(store) == before
    assert not list(tmp_path.iterdir())


def test_a_session_opened_for_users_cannot_write_on_any_of_its_cursors(store: Path, tmp_path: Path) -> None:
    from traceq.querying.engine import Session

    events = _events_file(store)
    before = _digests(store)
    with Session(store) as session:
        session.make(["gpu_busy", "launch_bound"], workers=2)  # on cursors, each with the store's tables
        cursor = session.con.cursor()
        with pytest.raises(duckdb.Error):
            cursor.execute(f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{events}' (FORMAT parquet)")
        with pytest.raises(QueryError):
            session.sql(f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{events}' (FORMAT parquet)")
        assert session.sql("SELECT count(*) AS n FROM gpu_busy")["n"][0] > 0
    assert _digests(store) == before


def test_a_report_connection_reads_the_runs_files_and_no_other(store: Path, tmp_path: Path) -> None:
    """Reports (traceq's own queries) let DuckDB read the runs' Parquet files itself: those and nothing else."""
    con = connect(store, own_queries=True)
    try:
        assert con.execute("SELECT count(*) FROM events").fetchone() == (22_786,)
        for query in (
            f"SELECT * FROM read_text('{store / 'traceq-store.json'}')",
            f"COPY (SELECT 1 AS x) TO '{tmp_path}/out.csv'",
            f"ATTACH '{tmp_path}/db.duckdb'",
            "SET enable_external_access = true",
        ):
            with pytest.raises(duckdb.Error):
                con.execute(query)
    finally:
        con.close()
    assert not list(tmp_path.iterdir())
