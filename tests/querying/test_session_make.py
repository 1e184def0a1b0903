"""A session makes queries on several connections at once: the same tables as one at a time, each after
the blocks it requires, independent ones truly at the same time."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import polars as pl
import pytest

import traceq
from tests.conftest import SAMPLES
from traceq.errors import QueryError
from traceq.querying import engine
from traceq.querying.engine import Session
from traceq.querying.files import query_text, requires
from traceq.querying.stored import CACHED
from traceq.store import Store

KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"


@pytest.fixture(scope="module")
def kineto_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, str]:
    root = tmp_path_factory.mktemp("store")
    run_id = traceq.ingest([KINETO], store=root, jobs=1)["run_id"][0]
    return Store(root), run_id


def _blocks(names: tuple[str, ...]) -> set[str]:
    """Every query ``names`` need, read from the files' Requires lines (not from the session)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += requires(query_text(name))
    return seen


def test_queries_made_on_several_connections_equal_those_made_one_at_a_time(kineto_store: tuple[Store, str]) -> None:
    store, run_id = kineto_store
    heard: list[str] = []
    with Session(store, [run_id], use_stored=False) as one, Session(store, [run_id], use_stored=False) as three:
        one.make(CACHED)
        three.make(CACHED, workers=3, made=heard.append)
        assert sorted(heard) == sorted(CACHED)  # each metric heard once, blocks not
        for name in sorted(_blocks(CACHED)):
            a, b = one.sql(f"SELECT * FROM {name}"), three.sql(f"SELECT * FROM {name}")
            key = [c for c in a.columns if a.schema[c] in (pl.String, pl.Int64, pl.Int32, pl.Boolean)]
            assert a.height == b.height, name
            assert a.sort(key, nulls_last=True).equals(b.sort(key, nulls_last=True)), name


def test_each_query_starts_after_the_blocks_it_requires_and_independent_ones_run_at_once(
    kineto_store: tuple[Store, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_windows`` and ``_cast_ops`` require nothing: both are in flight before either is made (a
    barrier for two that a one-at-a-time session would never pass)."""
    store, run_id = kineto_store
    events: list[tuple[str, str]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(2, timeout=30)
    created = Session._create

    def create(self: Session, name: str, statement: str, con: object) -> None:
        with lock:
            events.append(("start", name))
        if name in ("_windows", "_cast_ops"):
            barrier.wait()
        created(self, name, statement, con)  # type: ignore[arg-type]
        with lock:
            events.append(("end", name))

    monkeypatch.setattr(Session, "_create", create)
    with Session(store, [run_id], use_stored=False) as session:
        session.make(CACHED, workers=2)
    assert {name for kind, name in events if kind == "end"} == _blocks(CACHED)
    for k, (kind, name) in enumerate(events):
        if kind == "start":
            ended_before = {n for t, n in events[:k] if t == "end"}
            assert set(requires(query_text(name))) <= ended_before, name


def test_a_failing_query_ends_the_plan_with_its_name(
    kineto_store: tuple[Store, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run_id = kineto_store
    text = query_text

    def broken(name: str) -> str:
        return "SELECT no_such_column FROM events" if name == "_gpu_work" else text(name)

    monkeypatch.setattr(engine, "query_text", broken)
    with Session(store, [run_id], use_stored=False) as session, pytest.raises(QueryError, match=r"^_gpu_work: "):
        session.make(CACHED, workers=2)


def test_a_session_with_a_memory_limit_makes_one_query_at_a_time(
    tmp_path: Path, kineto_store: tuple[Store, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit is the database's: lifting it for one query would lift it for the others."""
    store, run_id = kineto_store
    rank_dir = next((store.runs_dir / f"run_id={run_id}").glob("rank=*"))
    threads: set[str] = set()
    created = Session._create

    def create(self: Session, name: str, statement: str, con: object) -> None:
        threads.add(threading.current_thread().name)
        created(self, name, statement, con)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "_create", create)
    with Session.over_ranks({0: rank_dir}, memory_limit="256MB") as session:
        session.make(CACHED, workers=2)
    assert threads == {threading.current_thread().name}


class _Tight:
    """A session's connection on which making a table under the memory limit ``limit`` runs out of
    memory on more than ``fits`` DuckDB threads (as a query does whose threads each hold buffers of their
    own); it records each attempt's threads and memory limit."""

    def __init__(self, con: duckdb.DuckDBPyConnection, fits: int, limit: str) -> None:
        self.con, self.fits, self.limit, self.tries = con, fits, limit, []

    def execute(self, statement: str) -> duckdb.DuckDBPyConnection:
        if statement.startswith("CREATE"):
            ((threads, limit),) = self.con.execute(
                "SELECT current_setting('threads'), current_setting('memory_limit')"
            ).fetchall()
            self.tries.append((int(threads), limit))
            if int(threads) > self.fits and limit == self.limit:
                raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")
        return self.con.execute(statement)


@pytest.mark.parametrize(("fits", "threads_tried"), [(2, [8, 4, 2]), (0, [8, 4, 2, 1, 8])])
def test_out_of_memory_under_the_limit_runs_again_on_fewer_threads_before_the_limit_is_lifted(
    kineto_store: tuple[Store, str], fits: int, threads_tried: list[int]
) -> None:
    store, run_id = kineto_store
    rank_dir = next((store.runs_dir / f"run_id={run_id}").glob("rank=*"))
    with Session.over_ranks({0: rank_dir}, memory_limit="256MB") as session:
        session.con.execute("SET threads = 8")
        ((limit,),) = session.con.execute("SELECT current_setting('memory_limit')").fetchall()
        tight = _Tight(session.con, fits, limit)
        session._create("_windows", "CREATE TABLE _windows AS " + query_text("_windows").strip().rstrip(";"), tight)
        assert [t for t, _ in tight.tries] == threads_tried
        lifted = [lim for _, lim in tight.tries if lim != limit]
        assert len(lifted) == (0 if fits else 1)  # the limit is lifted only once one thread did not fit
        assert session.con.execute("SELECT current_setting('threads'), current_setting('memory_limit')").fetchall() == [
            (8, limit)
        ]
        assert session.sql("SELECT count(*) AS n FROM _windows")["n"][0] > 0


@pytest.mark.parametrize("own", [False, True])
def test_with_the_limit_lifted_a_query_gets_the_default_memory(kineto_store: tuple[Store, str], own: bool) -> None:
    """Inside :meth:`Session.memory_limit_lifted` a query needing more than the session's limit runs (DuckDB
    1 reported its default after ``RESET memory_limit`` but kept to the old limit), and the limit is back
    after it; for a session over ranks (``own=False``) and one of traceq's own queries over a store."""
    store, run_id = kineto_store
    rank_dir = next((store.runs_dir / f"run_id={run_id}").glob("rank=*"))
    opened = (
        Session(store, [run_id], own_queries=True, memory_limit="2MB")
        if own
        else Session.over_ranks({0: rank_dir}, memory_limit="2MB")
    )
    big = "SELECT count(*) AS n FROM (SELECT range % 100000 AS k, count(*) FROM range(3000000) GROUP BY 1)"
    with opened as session:
        with pytest.raises(QueryError, match="Out of Memory"):
            session.sql(big)
        with session.memory_limit_lifted():
            with session.memory_limit_lifted():  # a lift inside another (a table dropped) leaves it lifted
                pass
            assert session.sql(big)["n"][0] == 100_000
        ((limit,),) = session.con.execute("SELECT current_setting('memory_limit')").fetchall()
        assert limit == "1.9 MiB"


def test_keep_only_frees_every_other_table_made_and_a_query_makes_a_freed_one_again(
    kineto_store: tuple[Store, str],
) -> None:
    store, run_id = kineto_store
    with Session(store, [run_id], use_stored=False) as session:
        session.make(["idle_causes", "gpu_busy"])
        tables = "SELECT table_name FROM duckdb_tables() WHERE NOT internal"
        made = {name for (name,) in session.con.execute(tables).fetchall()}
        assert _blocks(("idle_causes", "gpu_busy")) <= made
        causes = session.query("idle_causes")
        session.keep_only(["_idle_pieces", "gpu_busy"])
        assert {name for (name,) in session.con.execute(tables).fetchall()} == {"_idle_pieces", "gpu_busy"}
        assert session.query("idle_causes").equals(causes)  # made again from its blocks
