"""Session.fetch: one run's rows of a query fetched in batches, without making its table, are the rows
that its table holds for that run, in a session over two runs."""

from __future__ import annotations

import polars as pl
import pytest

import traceq
from tests.conftest import SAMPLES
from traceq.querying.engine import Session
from traceq.store import Store

TRACES = [SAMPLES / f"kineto_conformer_{p}_b4_2steps.json.gz" for p in ("fp32", "fp16")]
REPLAY = ("replay_host", "replay_gpu", "replay_steps")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, list[str]]:
    root = tmp_path_factory.mktemp("store")
    return Store(root), traceq.ingest(TRACES, store=root, jobs=1)["run_id"].to_list()


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(frame.columns, nulls_last=True)


def _tables(session: Session) -> set[str]:
    return {name for (name,) in session.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


@pytest.mark.parametrize("name", REPLAY)
def test_a_runs_fetched_rows_are_its_rows_of_the_table(two_runs: tuple[Store, list[str]], name: str) -> None:
    store, runs = two_runs
    with Session(store, runs, own_queries=True) as tables, Session(store, runs, own_queries=True) as fetching:
        made = tables.query(name)
        for run_id in runs:
            rank = int(made.filter(pl.col("run_id") == run_id)["rank"].min())  # type: ignore[arg-type]
            expected = made.filter((pl.col("run_id") == run_id) & (pl.col("rank") == rank))
            assert expected.height
            got = fetching.fetch(name, run_id, rank)
            assert got.schema == made.schema
            assert _sorted(got).equals(_sorted(expected))
            assert _sorted(tables.fetch(name, run_id, rank)).equals(_sorted(expected))  # from its table
        assert name not in _tables(fetching)  # never made: its blocks only
        assert fetching.fetch(name, "no such run").height == 0


def test_the_replay_host_query_replays_the_traces_steps_as_steps(two_runs: tuple[Store, list[str]]) -> None:
    store, runs = two_runs
    with Session(store, runs, own_queries=True) as session:
        host = session.fetch("replay_host", runs[0])
    steps = host.filter(pl.col("name").str.starts_with("ProfilerStep#"))
    assert steps.height == 2 and set(steps["kind"]) == {"step"}  # profiler steps stay steps
