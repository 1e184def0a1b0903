"""The query files document themselves, and their headers agree with their SQL: the columns, in order and
with their types, are what each query returns on real traces, and the ``Reads:`` line names exactly the
tables and blocks the SQL reads. Metric SQL lives in these files only; the compute classes are listed once, and
the GPU work kinds are the model's."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import traceq
from tests.conftest import ROOT, SAMPLES, shared
from traceq.analysis.causes import ALGORITHM_SEARCH, ALLOCATOR, HOST_SYNC, IDLE_CAUSES, INPUT_PIPELINE
from traceq.model.kernel_classes import KERNEL_CLASSES
from traceq.querying.engine import Session
from traceq.querying.files import doc, query_text, requires, source_dir
from traceq.querying.macros import MACROS
from traceq.schema import GPU_WORK_KINDS, TABLES

FILES = sorted(source_dir().glob("*.sql"))
NAMES = [f.stem for f in FILES]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """A session over real runs on which every query returns rows: a Kineto trace, a two-rank DDP run and
    Paddle summary text with kernel rows and casts, and a run whose cuDNN searched for algorithms."""
    store = tmp_path_factory.mktemp("queries") / "store"
    traceq.ingest([SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"], store=store, jobs=1)
    traceq.ingest([SAMPLES / "ddp" / "fp32"], store=store, name="ddp", jobs=1)
    traceq.ingest([shared("paddle/issue48321_fp32_operator_summary.txt")], store=store, jobs=1)
    traceq.ingest([SAMPLES / "planted" / "cudnn_var_fp16_3steps.json.gz"], store=store, jobs=1)
    with Session(store, use_stored=False, own_queries=True) as session:
        yield session


def read_by(sql_text: str) -> set[str]:
    """The tables and blocks a statement reads, from DuckDB's parse tree (its own CTEs left out)."""
    tree = json.loads(duckdb.execute("SELECT json_serialize_sql(?)", [sql_text]).fetchone()[0])
    assert not tree.get("error"), tree
    tables: set[str] = set()
    ctes: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE":
                tables.add(node["table_name"])
            if isinstance(node.get("cte_map"), dict):
                ctes.update(entry["key"] for entry in node["cte_map"]["map"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tree)
    return tables - ctes


@pytest.mark.parametrize("name", NAMES)
def test_every_query_file_documents_itself(name: str) -> None:
    text = query_text(name)
    first = text.splitlines()[0]
    assert first.startswith(f"-- {name}: "), f"{name}: first line must be '-- {name}: <summary>'"
    assert re.search(r"^-- Definition: \S", text, re.M), f"{name}: no Definition"
    assert re.search(r"^-- Reads: \S", text, re.M), f"{name}: no Reads line"
    info = doc(text)
    assert info["summary"] and info["columns"], name
    for dep in requires(text):
        assert query_text(dep)


@pytest.mark.parametrize("name", NAMES)
def test_the_documented_columns_and_types_are_what_the_query_returns(name: str, session: Session) -> None:
    session.make([name])
    assert session.con.execute(f"SELECT count(*) FROM {name}").fetchone()[0] > 0, f"{name}: no rows to check"
    returned = [(column, dtype) for column, dtype, *_ in session.con.execute(f"DESCRIBE {name}").fetchall()]
    declared = [(column, dtype) for column, (dtype, _) in doc(query_text(name))["columns"].items()]
    assert returned == declared


@pytest.mark.parametrize("name", NAMES)
def test_the_reads_line_names_what_the_sql_reads(name: str) -> None:
    text = query_text(name)
    read = read_by(text)
    assert set(doc(text)["reads"]) == read
    assert read - set(TABLES) <= set(requires(text)), f"{name}: reads blocks it does not require"


def test_the_compute_classes_are_listed_once() -> None:
    listed = [row[0] for row in duckdb.execute(query_text("_compute_classes")).fetchall()]
    assert set(listed) <= set(KERNEL_CLASSES) and len(set(listed)) == len(listed) > 0
    for f in FILES:
        if f.stem != "_compute_classes":
            assert not re.search(r"'(gemm|conv|attention)'", f.read_text()), f.name


def test_the_gpu_work_kinds_are_the_models() -> None:
    con = duckdb.connect()
    for macro in MACROS:
        con.execute(macro)
    listed = [row[0] for row in con.execute(query_text("_gpu_work_kinds")).fetchall()]
    assert listed == list(GPU_WORK_KINDS)
    kinds = ("kernel", "memcpy", "memset", "runtime", "sync", "gpu_annotation")
    assert [k for k in kinds if con.execute("SELECT is_gpu_work(?)", [k]).fetchone()[0]] == listed


def test_the_causes_that_hold_the_host_are_named_once() -> None:
    con = duckdb.connect()
    for macro in MACROS:
        con.execute(macro)

    def held(macro: str) -> list[str]:
        return [c for c in IDLE_CAUSES if con.execute(f"SELECT {macro}(?)", [c]).fetchone()[0]]

    inner, outer = {HOST_SYNC.id, ALLOCATOR.id}, {ALGORITHM_SEARCH.id, INPUT_PIPELINE.id}
    assert set(held("holds_host_inner")) == inner and set(held("holds_host_outer")) == outer
    assert set(held("holds_host")) == inner | outer
    assert con.execute("SELECT holds_host(NULL::VARCHAR), holds_host_inner(NULL::VARCHAR)").fetchone() == (None, None)
    cause = f"'(?:{'|'.join(inner | outer)})'"
    listed = re.compile(rf"[\[(]\s*{cause}(?:\s*,\s*{cause})+\s*[\])]")  # a list of only those causes
    for f in FILES:
        assert not listed.search(f.read_text()), f"{f.name} spells out causes that hold the host"


_SQL = re.compile(r"(?is)\bselect\b.+\bfrom\b")
#: The catalog read, allowed everywhere.
_CATALOG_READ = "select * from runs"
#: Statements that compute nothing, allowed in one module each: the SQLite export copies whole tables and
#: query results of the exported runs as they are (its run filter is the only part it adds), counts the
#: rows of such a copy, and reads back the catalog of the SQLite file it writes. Any other SQL there,
#: generic or not, belongs in a query file.
_GENERIC_COPIES = {
    "traceq/export/sqlite.py": {
        "SELECT * FROM {} WHERE {}",
        "SELECT * FROM runs WHERE {} ORDER BY ingested_at, run_id",
        "SELECT run_id FROM runs ORDER BY ALL",
        "SELECT count(*) FROM ({})",
        "select name from sqlite_master where type = 'table'",
        "select coalesce(name, run_id) from runs order by 1",
    },
}


def _sql_literals(path: Path) -> Iterator[str]:
    """The string literals of a module that read like SQL; an f-string's text with ``{}`` for each value
    (read whole, not also piece by piece)."""
    tree = ast.parse(path.read_text())
    pieces = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in pieces:
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        else:
            continue
        if _SQL.search(text):
            yield text


def test_no_metric_sql_outside_the_query_files() -> None:
    """What ingests, analyses, renders and exports reads comes from query files: the only SQL there,
    f-strings included, is the catalog read and the SQLite export's generic copies (:data:`_GENERIC_COPIES`)."""
    found = []
    for stage in ("ingestion", "analysis", "render", "export"):
        for path in sorted((ROOT / "traceq" / stage).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            allowed = {_CATALOG_READ, *_GENERIC_COPIES.get(module, ())}
            found += [f"{module}: {text}" for text in _sql_literals(path) if text not in allowed]
    assert found == []


def test_the_generic_copies_allowed_are_still_there() -> None:
    """An allowance no statement uses any more goes (it would let such a statement back unnoticed)."""
    for module, shapes in _GENERIC_COPIES.items():
        assert shapes <= set(_sql_literals(ROOT / module)), module
