"""The store: atomic runs, duplicate detection, untouched inputs, readable by other engines."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import traceq
import traceq.readers.chrome.decoder
import traceq.store
from tests.conftest import SAMPLES, raw_trace, tree_state
from traceq.errors import QueryError
from traceq.model import on_disk
from traceq.querying.engine import Session
from traceq.store import Store

KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
PADDLE = SAMPLES / "paddlefmt_conformer_fp32_b64_2steps.json.gz"


def test_ingest_writes_one_folder_per_run_and_lists_it(store_dir: Path) -> None:
    result = traceq.ingest([KINETO, PADDLE], store=store_dir)
    assert result["status"].to_list() == ["ingested", "ingested"]
    cat = traceq.runs(store_dir)
    assert set(cat["name"]) == {"kineto_conformer_fp16_b4_2steps", "paddlefmt_conformer_fp32_b64_2steps"}
    assert set(cat["flavour"]) == {"kineto", "paddle"}
    for run_id in cat["run_id"]:
        assert (store_dir / "runs" / f"run_id={run_id}" / "rank=0" / "events.parquet").is_file()
    assert not list((store_dir / "tmp").iterdir())


def test_same_content_is_reported_not_duplicated(store_dir: Path, tmp_path: Path) -> None:
    traceq.ingest([KINETO], store=store_dir)
    copy = tmp_path / "renamed_copy.json.gz"
    copy.write_bytes(KINETO.read_bytes())
    before = tree_state(store_dir)
    again = traceq.ingest([copy], store=store_dir, name="other")
    assert again["status"].to_list() == ["duplicate"]
    assert again["name"].to_list() == ["kineto_conformer_fp16_b4_2steps"]
    assert tree_state(store_dir) == before
    assert traceq.runs(store_dir).height == 1


def test_inputs_are_never_modified(store_dir: Path) -> None:
    digest = hashlib.sha256(KINETO.read_bytes()).hexdigest()
    stat = KINETO.stat()
    traceq.ingest([KINETO], store=store_dir)
    assert hashlib.sha256(KINETO.read_bytes()).hexdigest() == digest
    assert KINETO.stat().st_mtime_ns == stat.st_mtime_ns


def test_a_failed_write_leaves_no_partial_run(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traceq.ingest([PADDLE], store=store_dir)
    before = tree_state(store_dir)
    calls = []
    write = traceq.store.write_parquet

    def failing_write(frame: pl.DataFrame | pl.LazyFrame, path: Path) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        write(frame, path)

    monkeypatch.setattr("traceq.store.write_parquet", failing_write)
    with pytest.raises(traceq.StoreError, match="cannot write the store: disk full"):
        traceq.ingest([KINETO], store=store_dir)
    assert tree_state(store_dir) == before
    assert traceq.runs(store_dir)["name"].to_list() == ["paddlefmt_conformer_fp32_b64_2steps"]


def test_a_full_disk_while_spilling_is_a_store_error_and_leaves_the_store_as_it_was(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traceq.ingest([PADDLE], store=store_dir)
    before = tree_state(store_dir)

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pa.ipc, "new_file", full_disk)
    with pytest.raises(traceq.StoreError, match=r"spill\..*: cannot write the store: No space left on device"):
        traceq.ingest([KINETO], store=store_dir)
    assert tree_state(store_dir) == before
    assert not list((store_dir / "tmp").iterdir())


@pytest.mark.parametrize(
    ("writer", "fails_at", "settings", "folder"),
    [
        # the spill thread's failure on a later body (not the first): many 64 KB bodies
        (pa.ipc.RecordBatchFileWriter, 3, [(traceq.readers.chrome.decoder, "CHUNK", 1 << 16)], r"spill\.[^/]*"),
        # the on-disk model's bucket writer, a few buckets in
        (
            pa.ipc.RecordBatchStreamWriter,
            5,
            [(on_disk, "MIN_EVENTS", 0), (on_disk, "BUCKET_ROWS", 2000)],
            r"spill\.[^/]*/model",
        ),
    ],
    ids=["spilling chunks", "building the model on disk"],
)
def test_a_disk_filling_in_the_middle_of_an_ingest_is_a_store_error_and_leaves_the_store_as_it_was(
    writer: type, fails_at: int, settings: list, folder: str, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write on a background thread fails after a few succeeded: the ingest reports the store (naming
    the folder), not the input."""
    traceq.ingest([PADDLE], store=store_dir)
    before = tree_state(store_dir)
    write, calls = writer.write_table, []

    def fills_up(self: object, table: pa.Table, *args: object, **kwargs: object) -> None:
        calls.append(table.num_rows)
        if len(calls) >= fails_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, table, *args, **kwargs)

    for module, name, value in settings:
        monkeypatch.setattr(module, name, value)
    monkeypatch.setattr(writer, "write_table", fills_up)
    with pytest.raises(traceq.StoreError, match=folder + r": cannot write the store: No space left on device"):
        traceq.ingest([KINETO], store=store_dir)
    assert len(calls) >= fails_at
    assert tree_state(store_dir) == before
    assert not list((store_dir / "tmp").iterdir())


def test_leftovers_of_a_killed_ingest_are_ignored_and_cleaned(store_dir: Path) -> None:
    traceq.ingest([PADDLE], store=store_dir)
    stale = store_dir / "tmp" / "rdeadbeef0000.999999999.abcd1234" / "rank=0"
    stale.mkdir(parents=True)
    (stale / "events.parquet").write_bytes(b"partial")
    assert traceq.sql("select count(distinct run_id) n from events", store_dir)["n"][0] == 1
    traceq.ingest([KINETO], store=store_dir)
    assert not stale.parent.exists()


def test_store_is_readable_by_pyarrow_dataset_alone(store_dir: Path) -> None:
    traceq.ingest([KINETO, PADDLE], store=store_dir, jobs=1)
    files = sorted(str(p) for p in (store_dir / "runs").glob("*/*/events.parquet"))
    table = ds.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(store_dir / "runs"))
    frame = pl.from_arrow(table.to_table(columns=["run_id", "kind"]))
    counts = frame.group_by("run_id", "kind").len().sort("run_id", "kind")
    via_sql = traceq.sql(
        "select run_id, kind, count(*)::UINTEGER len from events group by all order by run_id, kind", store_dir
    )
    assert counts.equals(via_sql)


def test_runs_resolve_by_id_prefix_and_name(store_dir: Path) -> None:
    traceq.ingest([KINETO], store=store_dir, name="amp")
    store = Store(store_dir)
    run_id = traceq.runs(store)["run_id"][0]
    assert store.resolve("amp") == run_id
    assert store.resolve(run_id[:6]) == run_id
    with pytest.raises(traceq.StoreError):
        store.resolve("nope")


def test_a_non_store_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "somefile.txt").write_text("mine")
    with pytest.raises(traceq.StoreError):
        traceq.ingest([KINETO], store=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["somefile.txt"]


def test_catalog_records_source_and_clock(store_dir: Path) -> None:
    traceq.ingest([KINETO, PADDLE], store=store_dir, jobs=1)
    cat = {r["flavour"]: r for r in traceq.runs(store_dir).iter_rows(named=True)}
    kineto_meta = raw_trace(KINETO)
    assert cat["kineto"]["clock_offset_ns"] == kineto_meta["baseTimeNanoseconds"]
    assert cat["paddle"]["clock_offset_ns"] == 0
    assert cat["kineto"]["source_hash"] == hashlib.sha256(KINETO.read_bytes()).hexdigest()
    assert cat["paddle"]["profiler_version"] == f"paddle schema {raw_trace(PADDLE)['schemaVersion']}"
    devices = json.loads(cat["kineto"]["devices"])
    assert [d["name"] for d in devices] == [d["name"] for d in kineto_meta["deviceProperties"]]
    by_kind = json.loads(cat["kineto"]["events_by_kind"])
    assert by_kind["kernel"] == sum(1 for e in kineto_meta["traceEvents"] if e.get("cat") == "kernel")


def test_a_directory_ingests_every_kind_of_input_and_skips_other_files(store_dir: Path, tmp_path: Path) -> None:
    from tests.conftest import SHARED

    folder = tmp_path / "mixed"
    folder.mkdir()
    for src in (
        KINETO,
        SHARED / "nsys" / "nvfuser_report1__nsys2024.6.2.sqlite.gz",
        SHARED / "paddle" / "issue48321_fp32_operator_summary.txt",
    ):
        (folder / src.name).write_bytes(src.read_bytes())
    (folder / "runs.json").write_text('{"note": "not a trace"}')
    (folder / "README.md").write_text("# notes")
    result = traceq.ingest([folder], store=store_dir)
    assert sorted(result["status"]) == ["ingested"] * 3 + ["skipped"]  # runs.json is named, README.md not
    skipped = result.filter(pl.col("status") == "skipped").row(0, named=True)
    assert skipped["path"].endswith("runs.json") and "traceEvents" in skipped["summary"]
    assert set(traceq.runs(store_dir)["source_format"]) == {"chrome_json", "nsys_sqlite", "paddle_summary"}


def test_sql_reads_only_the_columns_and_rows_a_query_names(store_dir: Path) -> None:
    traceq.ingest([KINETO], store=store_dir)
    plan = traceq.sql(
        "explain select name, sum(dur_ns) from events where kind = 'kernel' group by name", store_dir
    ).row(0)[1]
    scan = plan[plan.index("ARROW_SCAN") :]  # users' SQL reads the files through Arrow datasets
    projected = re.search(r"Projections:(.*?)(?:Filters|~)", scan, re.S)
    assert projected is not None
    columns = {c.strip(" │,\n") for c in projected.group(1).split() if c.strip(" │,\n")}
    assert columns == {"name", "dur_ns"}  # of the 22 columns of events
    assert re.search(r"\bkind\"?\s*=\s*'kernel'", scan)  # the filter is pushed into the scan (row groups skipped)


def test_runs_written_by_other_versions_are_read_with_their_columns_conformed(store_dir: Path) -> None:
    traceq.ingest([KINETO], store=store_dir)
    traceq.ingest([PADDLE], store=store_dir)
    older = next((store_dir / "runs").glob("*/runs.parquet"))
    row = pl.read_parquet(older)
    row.select(list(reversed(row.columns))).drop("n_ranks").write_parquet(older)  # other order, no n_ranks
    runs = traceq.runs(store_dir)
    assert runs.height == 2 and runs.columns[:3] == ["run_id", "name", "n_ranks"]
    assert runs["n_ranks"].null_count() == 1
    assert traceq.sql("select count(*) from runs", store_dir).item() == 2


def test_a_write_in_progress_on_another_host_is_left_alone_until_stale(store_dir: Path) -> None:
    traceq.ingest([PADDLE], store=store_dir)
    foreign = store_dir / "tmp" / "run.other-node.4242.0123456789ab" / "part-0"
    foreign.mkdir(parents=True)
    traceq.ingest([KINETO], store=store_dir)  # cleans this host's leftovers only
    assert foreign.exists()
    day_ago = foreign.parent.stat().st_mtime - 2 * 24 * 3600
    os.utime(foreign.parent, (day_ago, day_ago))
    traceq.ingest([KINETO.with_name("kineto_conformer_fp32_b4_2steps.json.gz")], store=store_dir)
    assert not foreign.parent.exists()


@pytest.mark.parametrize(("name", "sibling"), [("st[1]", "st1"), ("st*x", "stAx"), ("st?x", "stBx")])
def test_a_store_path_with_glob_characters_reads_its_own_runs_only(tmp_path: Path, name: str, sibling: str) -> None:
    """The store's path is never a glob pattern: ``st[1]`` would match ``st1``, ``st*x`` also ``stAx``, a
    sibling holding another run and the same one."""
    from tests.conftest import run_cli

    store, other = tmp_path / name, tmp_path / sibling
    run_id = traceq.ingest([KINETO], store=store, jobs=1)["run_id"][0]
    traceq.ingest([SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz", KINETO], store=other, jobs=1)  # and the same
    query = "select run_id, count(*) n from events group by all"
    done = run_cli("sql", "--store", str(store), "--format", "json", query)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"run_id": run_id, "n": 22_786}]
    done = run_cli("runs", "--store", str(store), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert [r["run_id"] for r in json.loads(done.stdout)] == [run_id]
    assert traceq.runs(store)["run_id"].to_list() == [run_id]
    report = traceq.run_report(run_id, store)  # DuckDB's own reader, given the files as literal paths
    assert report.summary.steps == 2 and report.run["run_id"] == run_id
    assert traceq.query("gpu_busy", store)["run_id"].unique().to_list() == [run_id]


def test_a_session_reads_one_run_s_catalog_row_alone(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's run row is the catalog's row of that run, read without reading the other runs' rows;
    a run the store lacks is an error."""
    traceq.ingest([KINETO, PADDLE], store=store_dir, jobs=1)
    store = Store(store_dir)
    catalog = {row["run_id"]: row for row in store.catalog_rows()}
    read: list[str] = []
    original = Store._catalog_row

    def reading(self: Store, run_dir: Path) -> tuple:
        read.append(run_dir.name)
        return original(self, run_dir)

    monkeypatch.setattr(Store, "_catalog_row", reading)
    for run_id, row in catalog.items():
        read.clear()
        with Session(store, [run_id]) as session:
            assert session.run_row(run_id) == row
        assert read == [f"run_id={run_id}"]
    with Session(store, list(catalog)) as session, pytest.raises(QueryError, match="no such run"):
        session.run_row("r000000000000")
