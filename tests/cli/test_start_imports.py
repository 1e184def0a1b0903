"""Commands that start at once: what each loads (counted in a fresh process, never timed), the catalog's
JSON copy they read instead of Polars, and users' SQL shown in a table without frames, the same text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.conftest import SAMPLES, Ingested, run_cli
from traceq.querying import shown as shown_module
from traceq.querying.engine import sql, sql_shown
from traceq.querying.shown import Shown
from traceq.render import render
from traceq.render.cells import SHOWN_ROWS, table
from traceq.store import Store

FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
RUN = "kineto_conformer_fp16_b4_2steps"
HEAVY = ("polars", "duckdb", "pyarrow", "traceq.readers", "traceq.analysis")


def loaded(store: Path, *args: str) -> set[str]:
    """The modules, and the packages and stages of traceq they are in, that the command ``traceq ARGS``
    loaded, in a fresh process."""
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['traceq', *{list(args)!r}]\n"
        "try:\n    runpy.run_module('traceq', run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "finally:\n    print(' '.join(sys.modules), file=sys.stderr)\n"
    )
    env = {**os.environ, "TRACEQ_STORE": str(store)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    names = done.stderr.split()
    return {*names, *(n.split(".")[0] for n in names), *(".".join(n.split(".")[:2]) for n in names)}


@pytest.fixture(scope="module")
def store(ingested: Ingested) -> Path:
    return ingested.store(FP16)


@pytest.mark.parametrize(
    ("args", "absent"),
    [
        (("runs",), HEAVY),
        # nor the thread pools and logging: no metric is made for it
        (("sql", "select 1"), ("polars", "pyarrow", "traceq.readers", "traceq.analysis", "concurrent.futures")),
        (("sql", "select kind, count(*) n from events group by kind"), ("polars", "traceq.readers", "traceq.analysis")),
        # it replays the run (nothing stored at this size), with no use for Arrow's compute functions
        (("report", RUN), ("traceq.readers", "traceq.ingestion.ingest", "pyarrow.compute")),
    ],
    ids=" ".join,
)
def test_a_command_loads_only_what_it_needs(store: Path, args: tuple[str, ...], absent: tuple[str, ...]) -> None:
    assert loaded(store, *args) & set(absent) == set()


def test_a_report_of_a_run_with_everything_stored_loads_neither_duckdb_nor_the_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its results, diagnosis and estimate without the profiler were stored at ingest: they are read from
    their files (no DuckDB connection, no Arrow), and the catalog row from its copy."""
    from traceq.ingestion import metrics

    monkeypatch.setattr(metrics, "STORE_MIN_EVENTS", 0)
    monkeypatch.setattr(metrics, "DIAGNOSIS_MIN_EVENTS", 0)
    traceq.ingest([FP16], store=tmp_path / "store", jobs=1)
    assert loaded(tmp_path / "store", "report", RUN) & {"duckdb", "pyarrow", "traceq.readers"} == set()


def test_a_run_is_listed_and_resolved_from_its_catalog_copy_without_polars(store: Path) -> None:
    code = (
        "import sys\nfrom traceq.store import Store\n"
        f"s = Store({str(store)!r})\n"
        f"print(s.resolve({RUN!r}), s.latest(1), [r['name'] for r in s.catalog_rows()], 'polars' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[-1] == "False"


def test_the_catalog_copy_is_the_parquet_row_and_a_stale_one_is_not_read(ingested: Ingested, tmp_path: Path) -> None:
    root = ingested.copy(FP16, to=tmp_path / "store")
    (run_dir,) = (root / "runs").iterdir()
    assert (run_dir / "runs.json").is_file()
    with_copy = Store(root).catalog()
    (run_dir / "runs.json").unlink()
    assert Store(root).catalog().equals(with_copy)  # read from the Parquet row alone
    run_id = Store(root).catalog()["run_id"][0]
    traceq.rename_run(run_id, "renamed", store=root)
    assert json.loads((run_dir / "runs.json").read_text())["row"]["name"] == "renamed"
    row = pl.read_parquet(run_dir / "runs.parquet").with_columns(name=pl.lit("by another writer"))
    row.write_parquet(run_dir / "runs.parquet")  # the Parquet row replaced, its copy not: the copy is not read
    assert Store(root).catalog()["name"].to_list() == ["by another writer"]
    assert Store(root).resolve("by another writer") == run_id


def test_runs_lists_the_same_table_from_the_copies_and_from_parquet(store: Path, tmp_path: Path) -> None:
    listed = run_cli("runs", "--store", str(store))
    assert listed.returncode == 0, listed.stderr
    bare = tmp_path / "bare"
    subprocess.run(["cp", "-r", str(store), str(bare)], check=True)
    for copy in (bare / "runs").glob("*/runs.json"):
        copy.unlink()
    assert run_cli("runs", "--store", str(bare)).stdout == listed.stdout
    frame = traceq.runs(store).select("run_id", "name", "n_ranks", "flavour", "profiler_version", "n_events",
                                      "n_steps", "ingested_at")  # fmt: skip
    assert listed.stdout == _rendered(frame)


@pytest.mark.parametrize(
    "query",
    [
        "select 1",
        "select event_id, name, dur_ns, dur_ns / 3.0 third, dur_ns > 1000 long from events order by event_id",
        "select kind, count(*)::int n, min(dur_ns)::float m from events group by kind order by kind",
        "select step, idle_ns / 1e6 idle_ms from gpu_busy order by step",
        "select name from events where false",
        "select event_id from events order by event_id limit 41",
    ],
)
def test_users_sql_shown_without_frames_is_the_frames_table(
    store: Path, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = sql_shown(query, SHOWN_ROWS, store)
    assert isinstance(result, Shown)
    shown = _rendered(result)
    assert shown == _rendered(sql(query, store))
    assert run_cli("sql", query, "--store", str(store)).stdout == shown
    # as DuckDB 1 shows it (Python 3.10's): Arrow batches from the first row
    monkeypatch.setattr(shown_module, "fetched_rows_reach_arrow", lambda: False)
    assert _rendered(sql_shown(query, SHOWN_ROWS, store)) == shown


@pytest.mark.parametrize(
    "query", ["select sum(dur_ns) d from events", "select 1 a, 2 a", "select ingested_at from runs", "select [1, 2] l"]
)
def test_users_sql_of_other_types_is_shown_from_its_frame(store: Path, query: str) -> None:
    assert not isinstance(sql_shown(query, SHOWN_ROWS, store), Shown)


def _rendered(result: object) -> str:
    from io import StringIO

    out = StringIO()
    if isinstance(result, Shown):
        table(result.columns, result, out, shown_rows=SHOWN_ROWS)
    else:
        render(result, "table", out)  # type: ignore[arg-type]
    return out.getvalue()


def _command_paths(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's words under a click ``group`` (a group's own words too)."""
    paths = []
    for name, command in getattr(group, "commands", {}).items():
        paths += [(*prefix, name), *_command_paths(command, (*prefix, name))]
    return paths


def test_each_command_alone_is_the_whole_apps_command() -> None:
    """The command line builds only the command it names (:func:`traceq.cli._app_for`): each command's
    and subcommand's help (its options, arguments and text) is the whole app's; without a command's name
    (help, the version, a misspelt command) it is the whole app."""
    import typer.main
    from typer.testing import CliRunner

    from traceq.cli import _app_for, app

    paths = _command_paths(typer.main.get_command(app))
    assert {"sql", "report", "ingest", "runs", "rm"} <= {p[-1] for p in paths}
    for path in paths:
        whole = CliRunner().invoke(app, [*path, "--help"], prog_name="traceq")
        alone = CliRunner().invoke(_app_for(list(path)), [*path, "--help"], prog_name="traceq")
        assert whole.exit_code == alone.exit_code == 0, path
        assert alone.stdout == whole.stdout, path
        assert len(typer.main.get_command(_app_for(list(path))).commands) == 1, path
    for args in ([], ["--help"], ["--version"], ["sqll", "select 1"], ["rm"]):
        assert _app_for(args) is app
