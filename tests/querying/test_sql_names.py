"""Users' SQL names every metric of ``queries/`` as a table (bound as a view only when named), takes
``--run``, names a column two joined tables share after its table, documents columns in
``information_schema`` and says which tables there are when one is missing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, raw_trace, run_cli, window_offsets
from tests.querying.test_gpu_busy import _independent_busy
from traceq.querying.engine import sql
from traceq.schema import TABLES

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
QUERIES = Path(__file__).resolve().parents[2] / "queries"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql_names") / "store"
    traceq.ingest([FP32, FP16], store=path, jobs=1)
    return path


def _ids(store: Path) -> dict[str, str]:
    return dict(traceq.runs(store).select("name", "run_id").iter_rows())


def test_a_metric_is_a_table_by_its_name(store: Path) -> None:
    """``select * from gpu_busy`` with no header: the busy time per step of an independent interval union."""
    done = run_cli("sql", "select step, busy_ns from gpu_busy order by step", "--run", FP16.name.split(".")[0],
                   "--store", str(store), "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = {r["step"]: r["busy_ns"] for r in json.loads(done.stdout)}
    want = _independent_busy(FP16, window_offsets(store, FP16.name.split(".")[0]))
    assert set(got) == set(want) and all(abs(got[s] - want[s]) <= 4 for s in want)


def test_every_metric_file_is_a_name_a_query_can_use(store: Path) -> None:
    metrics = sorted(p.stem for p in QUERIES.glob("*.sql") if not p.name.startswith("_"))
    assert len(metrics) > 20
    for name in metrics:
        assert sql(f"select count(*) n from {name}", store).columns == ["n"], name


def test_only_the_metrics_a_query_names_are_bound(store: Path) -> None:
    """The views there while a query naming gpu_gaps runs: the tables, gpu_gaps and what its file's
    Requires lines name, transitively (read here from the files), and no other metric."""

    def needs(name: str) -> set[str]:
        text = (QUERIES / f"{name}.sql").read_text()
        direct = {n.strip() for m in re.finditer(r"^--\s*Requires:\s*(.+)$", text, re.M) for n in m.group(1).split(",")}
        return {name}.union(*(needs(n) for n in direct if n))

    bound = sql("select table_name from information_schema.tables", store)
    assert set(bound["table_name"]) == set(TABLES)  # no metric named: none bound
    bound = sql("select table_name, (select count(*) from gpu_gaps) n from information_schema.tables", store)
    assert set(bound["table_name"]) == set(TABLES) | needs("gpu_gaps")


def test_a_statement_gets_only_the_tables_and_macros_it_names(store: Path) -> None:
    """A connection for users' SQL holds the tables (views) and the model's macros a statement names, no
    other: `select 1` none (each costs the command's start 0.5 ms); what it names reads the same rows."""
    import pyarrow.parquet as pq

    from traceq.querying.engine import close, connect
    from traceq.querying.macros import NAMES

    def held(read: set[str]) -> tuple[set[str], set[str]]:
        con = connect(store, read=read)
        try:
            views = {n for (n,) in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
            macros = {n for (n,) in con.execute(
                "select function_name from duckdb_functions() where function_type like '%macro' and not internal"
            ).fetchall()}  # fmt: skip
        finally:
            close(con)
        return views, macros

    assert held(set()) == (set(), set())
    assert held({"events", "steps", "kind"}) == ({"events", "steps"}, set())
    assert {"is_profiler_step", "gpu_work_kinds", "is_gpu_work", "holds_host"} <= NAMES
    assert held({"is_gpu_work"}) == (set(), set(NAMES))
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in store.glob("runs/run_id=*/rank=*/events.parquet"))
    got = sql("select count(*) n, count(*) filter (where is_gpu_work(kind)) gpu from events", store)
    kinds = pq.read_table(list(store.glob("runs/run_id=*/rank=*/events.parquet")), columns=["kind"])["kind"]
    assert got.row(0) == (rows, sum(k in ("kernel", "memcpy", "memset") for k in kinds.to_pylist()))
    assert sql("select 1 one", store).row(0) == (1,)


def test_run_restricts_the_query_to_those_runs(store: Path) -> None:
    ids, name = _ids(store), FP32.name.split(".")[0]
    done = run_cli("sql", "select run_id, count(*) n from steps group by run_id", "--run", name, "--store", str(store),
                   "--format", "csv")  # fmt: skip
    steps = [e for e in raw_trace(FP32)["traceEvents"] if e.get("cat") == "user_annotation" and
             e["name"].startswith("ProfilerStep#")]  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["run_id,n", f"{ids[name]},{len(steps)}"]
    done = run_cli("sql", "select 1", "--run", "no_such_run", "--store", str(store))
    assert done.returncode == 1 and "no_such_run: no such run" in done.stderr


def test_a_column_two_joined_tables_share_is_named_after_its_table(store: Path) -> None:
    ids, name = _ids(store), FP32.name.split(".")[0]
    got = sql("select * from steps s join runs using (run_id) order by step", store, [ids[name]])
    assert "s.name" in got.columns and "runs.name" in got.columns and "name_1" not in got.columns
    events = raw_trace(FP32)["traceEvents"]
    steps = sorted(e["name"] for e in events if e.get("cat") == "user_annotation" and "ProfilerStep#" in e["name"])
    assert got["s.name"].to_list() == steps and set(got["runs.name"]) == {name}
    got = sql("select s.name, t.name, t.tid from steps s join threads t using (run_id, rank) limit 1", store)
    assert got.columns == ["s.name", "t.name", "tid"]


def test_columns_are_documented_in_information_schema(store: Path) -> None:
    """The comments are the query file's documented columns (read here from the file's header)."""
    header = (QUERIES / "gpu_gaps.sql").read_text().split("-- Columns:", 1)[1].split("\nWITH", 1)[0]
    want = dict(re.findall(r"^--\s+(\w+)\s+[A-Z]+\s+(.+?)\s*$", header, re.M))
    got = sql("select column_name, column_comment from information_schema.columns where table_name = 'gpu_gaps'", store)
    assert dict(got.iter_rows()) == want
    got = sql("select column_name, column_comment c from information_schema.columns where table_name = 'events'", store)
    assert all(got["c"]) and len(got["c"]) == len(TABLES["events"].columns) + 2


def test_a_missing_table_is_named_with_the_tables_there_are(store: Path) -> None:
    done = run_cli("sql", "select * from gpu_gap", "--store", str(store))
    assert done.returncode == 1 and "pg_am" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert "gpu_gap: no such table or metric" in line and all(t in line for t in TABLES) and "gpu_gaps" in line


def test_sql_help_names_every_table() -> None:
    done = run_cli("sql", "--help")
    text = " ".join(done.stdout.split())
    assert all(re.search(rf"\b{t}\b", text) for t in TABLES) and "traceq queries" in text
