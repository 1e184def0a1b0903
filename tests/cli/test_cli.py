"""The ``traceq`` command end to end: output formats, errors, read-only SQL."""

from __future__ import annotations

import gzip
import io
import json
import tempfile
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SAMPLES, raw_trace, run_cli, tree_state
from traceq.cli import app
from traceq.querying.engine import close, connect

KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
PADDLE = SAMPLES / "paddle331_cpu_fp32_noshapes.paddle_trace.json.gz"


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("filled") / "store"
    done = run_cli("ingest", "--store", str(store), "-j", "1", str(KINETO), str(PADDLE))
    assert done.returncode == 0, done.stderr
    return store


def test_ingest_prints_one_summary_line_per_file(tmp_path: Path) -> None:
    done = run_cli("ingest", str(KINETO), env={"TRACEQ_STORE": str(tmp_path / "s")})
    assert done.returncode == 0
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ingested kineto_conformer_fp16_b4_2steps (r")
    raw = raw_trace(KINETO)["traceEvents"]
    kernels = sum(1 for e in raw if e.get("cat") == "kernel")
    assert f"kernel {kernels:,}" in lines[0] and "2 steps" in lines[0] and "NVIDIA H200" in lines[0]
    assert (tmp_path / "s" / "runs").is_dir()


def test_sql_json_is_scriptable(filled_store: Path) -> None:
    done = run_cli(
        "sql",
        "--store",
        str(filled_store),
        "--format",
        "json",
        "select kind, count(*) n, sum(dur_ns) d from events group by kind",
    )
    assert done.returncode == 0 and done.stderr == ""
    rows = json.loads(done.stdout)
    by_kind = {r["kind"]: r for r in rows}
    raw_kineto = raw_trace(KINETO)["traceEvents"]
    kernels = [e for e in raw_kineto if e.get("cat") == "kernel"]
    assert by_kind["kernel"]["n"] == len(kernels)
    assert abs(by_kind["kernel"]["d"] - sum(e["dur"] * 1000 for e in kernels)) <= len(kernels)
    raw_paddle = raw_trace(PADDLE)["traceEvents"]
    ops = sum(1 for e in raw_paddle if e.get("cat") == "cpu_op") + sum(
        1 for e in raw_paddle if e.get("cat") == "Operator"
    )
    assert by_kind["op"]["n"] == ops + sum(1 for e in raw_kineto if e.get("cat") == "cpu_op")


def test_sql_formats(filled_store: Path) -> None:
    q = "select run_id, count(*) n from steps group by run_id order by n"
    csv = run_cli("sql", "--store", str(filled_store), "--format", "csv", q)
    assert csv.stdout.splitlines()[0] == "run_id,n"
    assert [line.split(",")[1] for line in csv.stdout.splitlines()[1:]] == ["2", "5"]
    md = run_cli("sql", "--store", str(filled_store), "--format", "markdown", q)
    assert md.stdout.startswith("| run_id | n |")
    pq = run_cli("sql", "--store", str(filled_store), "--format", "parquet", q, text=False)
    assert pq.returncode == 0
    assert pl.read_parquet(io.BytesIO(pq.stdout))["n"].to_list() == [2, 5]


def test_sql_file_option_and_trace_analysis_sql(filled_store: Path, tmp_path: Path) -> None:
    """Window frames and ASOF joins, which the metric queries rely on, run through the same path."""
    query = tmp_path / "q.sql"
    query.write_text(
        """
        with k as (select run_id, ts_ns, ts_ns + dur_ns as end_ns from events where kind = 'kernel'),
        m as (select run_id, ts_ns, end_ns,
                     max(end_ns) over (partition by run_id order by ts_ns
                                       rows between unbounded preceding and 1 preceding) as prev_end
              from k)
        select count(*) filter (where prev_end is null or ts_ns > prev_end) as busy_intervals,
               (select count(*) from steps s asof join events e on s.run_id = e.run_id and s.ts_ns <= e.ts_ns)
                 as asof_rows
        from m
        """
    )
    done = run_cli("sql", "--store", str(filled_store), "--format", "json", "-f", str(query))
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)[0]
    assert row["busy_intervals"] > 0 and row["asof_rows"] == 7


@pytest.mark.parametrize(
    "query",
    ["copy (select 1) to 'out.csv'", "create table t as select 1", "select 1; select 2", "attach 'x.db'"],
)
def test_sql_cannot_modify_anything(filled_store: Path, query: str) -> None:
    before = tree_state(filled_store)
    done = run_cli("sql", "--store", str(filled_store), query, cwd=filled_store)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert tree_state(filled_store) == before


@pytest.mark.slow
def test_a_query_beyond_memory_spills_into_the_temporary_folder_not_the_working_one(
    filled_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's default spill folder is ``.tmp`` in the working directory: queries spill into a folder of
    their own under the system's temporary folder (mode 0700), removed when the connection closes."""
    work, temp = tmp_path / "work", tmp_path / "temp"
    work.mkdir()
    temp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    con = connect(filled_store, locked=False)
    con.execute("SET memory_limit = '50MB'")
    con.execute("SET threads = 1")  # two threads' sort buffers may not fit 50 MB at once: DuckDB then fails
    con.execute(
        "CREATE TEMP TABLE t AS "
        "SELECT i, repeat('x', 50) || (i * 7919 % 3000017)::VARCHAR AS s FROM range(3000000) r(i)"
    )
    rows = con.execute("SELECT count(*) FROM (SELECT * FROM t ORDER BY s)").fetchone()
    seen = [p for p in temp.iterdir()]
    modes, spilled = [p.stat().st_mode & 0o777 for p in seen], [any(p.iterdir()) for p in seen]
    close(con)
    assert rows == (3_000_000,)
    assert len(seen) == 1 and seen[0].name.startswith("traceq-duckdb.") and spilled == [True]  # it spilled there
    assert modes == [0o700]
    assert not list(work.iterdir()) and not list(temp.iterdir())


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    not_json = tmp / "notes.json"
    not_json.write_text("this is not json\n")
    not_trace = tmp / "config.json"
    not_trace.write_text('{"lr": 0.1, "layers": [1, 2]}')
    empty = tmp / "empty.json"
    empty.write_bytes(b"")
    fake_gz = tmp / "trace.json.gz"
    fake_gz.write_text('{"traceEvents": []}')
    corrupt_gz = tmp / "corrupt.json.gz"
    corrupt_gz.write_bytes(gzip.compress(b'{"traceEvents": [' * 100)[:20] + b"\x00garbage" * 10)
    cut_header = tmp / "cut_header.json.gz"
    cut_header.write_bytes(gzip.compress(b'{"traceEvents": []}')[:6])
    untimed = tmp / "untimed.json"  # decoded (and spilled) before it is refused
    untimed.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "op", "pid": 1, "tid": 1, "dur": 5}] * 3}))
    no_traces = tmp / "emptydir"
    no_traces.mkdir()
    (no_traces / "readme.txt").write_text("nothing here")
    return {
        "not json": (not_json, "not a trace"),
        "json, not a trace": (not_trace, "traceEvents"),
        "empty file": (empty, "empty file"),
        "not gzip": (fake_gz, "not gzip"),
        "corrupt gzip": (corrupt_gz, "gzip"),
        "gzip header cut short": (cut_header, "corrupt gzip"),
        "no timed events": (untimed, "no timed events"),
        "dir without traces": (no_traces, "no trace files"),
        "missing file": (tmp / "missing.json", "no such file"),
    }


_BAD_CASES = (
    "not json",
    "json, not a trace",
    "empty file",
    "not gzip",
    "corrupt gzip",
    "gzip header cut short",
    "no timed events",
    "dir without traces",
    "missing file",
)


@pytest.mark.parametrize("case", _BAD_CASES)
def test_bad_input_is_one_line_nonzero_and_stores_nothing(tmp_path: Path, case: str) -> None:
    path, problem = _bad_inputs(tmp_path)[case]
    store = tmp_path / "store"
    run_cli("ingest", "--store", str(store), str(SAMPLES / "hta_triton_example.json.gz"))
    before = tree_state(store)
    done = run_cli("ingest", "--store", str(store), str(path))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0] and problem in lines[0]
    assert done.stdout == ""
    assert tree_state(store) == before


def test_every_command_has_help_with_an_example_or_doc() -> None:
    import typer.main

    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        assert command.help, f"{name} has no help"
        done = run_cli(name, "--help")
        assert done.returncode == 0 and "Usage" in done.stdout


def test_readme_documents_the_model_and_every_command() -> None:
    from traceq.schema import markdown_reference

    readme = (SAMPLES.parent / "README.md").read_text()
    assert markdown_reference() in readme
    import typer.main

    for name in typer.main.get_command(app).commands:
        assert f"traceq {name}" in readme


@pytest.mark.parametrize(
    "args",
    [
        ["report", "--fail-if-slower", "lots"],
        ["sql", "--timeout", "-1", "select 1"],
        ["ingest", "--bogus", "x"],
        ["nosuchcommand"],
    ],
)
def test_usage_errors_are_reported_by_the_parser(args: list[str]) -> None:
    done = run_cli(*args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
