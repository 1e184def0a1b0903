"""Multi-rank runs: one run from many files, ranked, read in parallel, readable without traceq."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.dataset as ds
import pytest

import traceq
from tests.conftest import SAMPLES, raw_trace, run_cli, tree_state
from traceq.ingestion import executors
from traceq.ingestion.ranks import assign_ranks

DDP32 = SAMPLES / "ddp" / "fp32"
DDP16 = SAMPLES / "ddp" / "fp16"
SINGLE = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"


def _raw_kernels(path: Path) -> int:
    return sum(1 for e in raw_trace(path)["traceEvents"] if e.get("cat") == "kernel")


def test_a_directory_with_a_name_is_one_run_ranked_by_distributed_info(store_dir: Path) -> None:
    result = traceq.ingest([DDP32], store=store_dir, name="ddp", jobs=1)
    assert result["status"].to_list() == ["ingested", "ingested"]
    assert result["run_id"].n_unique() == 1
    runs = traceq.runs(store_dir)
    assert runs.height == 1 and runs["n_ranks"][0] == 2 and runs["name"][0] == "ddp"
    sources = traceq.sql("select rank, rank_from, source_path from sources order by rank", store_dir)
    for rank, rank_from, path in sources.iter_rows():
        assert rank_from == "distributedInfo"
        assert raw_trace(Path(path))["distributedInfo"]["rank"] == rank
    kernels = traceq.sql(
        "select s.source_path, count(*) n from events e join sources s using (run_id, rank) "
        "where e.kind = 'kernel' group by all",
        store_dir,
    )
    for path, n in kernels.iter_rows():
        assert n == _raw_kernels(Path(path))
    assert runs["n_events"][0] == traceq.sql("select count(*) from events", store_dir).item()


def test_ranks_come_from_file_names_when_files_do_not_declare_distinct_ones(store_dir: Path, tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(DDP32 / "ddp_fp32_rank0.json.gz", job / "copy_rank7.json.gz")  # both declare rank 0
    shutil.copy(DDP32 / "ddp_fp32_rank0.json.gz", job / "copy_rank3.json.gz")
    result = traceq.ingest([job], store=store_dir, name="named", jobs=1)
    assert dict(zip(result["path"].map_elements(lambda p: Path(p).name, pl.String), result["rank"], strict=True)) == {
        "copy_rank3.json.gz": 3,
        "copy_rank7.json.gz": 7,
    }
    assert "distributedInfo ranks are not distinct (0, 0); not used" in traceq.runs(store_dir)["warnings"][0]
    froms = traceq.sql("select distinct rank_from from sources", store_dir)["rank_from"].to_list()
    assert froms == ["file_name"]


def test_files_without_rank_information_are_ranked_in_natural_order(store_dir: Path, tmp_path: Path) -> None:
    files = []
    for i, src in enumerate((SINGLE, SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz", SINGLE)):
        dst = tmp_path / f"part{[10, 2, 1][i]}.json.gz"
        if i == 2:  # different content, same events: rewrite the JSON so the hash differs
            doc = raw_trace(src)
            dst.write_bytes(gzip.compress(json.dumps({**doc, "note": "copy"}).encode()))
        else:
            shutil.copy(src, dst)
        files.append(dst)
    result = traceq.ingest(files, store=store_dir, name="ordered", jobs=1)
    assert result["rank"].to_list() == [0, 1, 2]  # the order given, not sorted
    assert traceq.sql("select distinct rank_from from sources", store_dir).item() == "file_order"


def test_assign_ranks_prefers_declared_then_names_then_order() -> None:
    paths = [Path("a_rank1.json"), Path("b_rank0.json")]
    assert assign_ranks(paths, [5, 4]) == ([5, 4], "distributedInfo", [])
    assert assign_ranks(paths, [None, None]) == ([1, 0], "file_name", [])
    ranks, source, warnings = assign_ranks([Path("x.json"), Path("y_gpu2.json")], [0, None])
    assert (ranks, source) == ([0, 1], "file_order")
    assert warnings == [
        "distributedInfo gives a rank for only some files; not used",
        "file_name gives a rank for only some files; not used",
    ]


def _fingerprint(store: Path) -> pl.DataFrame:
    return traceq.sql(
        "select rank, kind, count(*) n, sum(ts_ns) ts, sum(dur_ns) dur, sum(coalesce(parent_id, -1)) parents, "
        "sum(coalesce(launch_id, -1)) launches from events group by all order by all",
        store,
    )


def test_a_process_pool_stores_exactly_what_one_process_stores(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    a = traceq.ingest([DDP32], store=one, name="ddp", jobs=1)
    b = traceq.ingest([DDP32], store=two, name="ddp", jobs=2)
    assert a["run_id"].to_list() == b["run_id"].to_list()
    assert _fingerprint(one).equals(_fingerprint(two))
    assert not list((two / "tmp").iterdir())


@pytest.mark.slow
def test_ray_tasks_store_exactly_what_one_process_stores(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the ray extra is part of the test extras")
    one, ray_store = tmp_path / "one", tmp_path / "ray"
    traceq.ingest([DDP16], store=one, name="ddp", jobs=1)
    result = traceq.ingest([DDP16], store=ray_store, name="ddp", executor="ray")
    assert result["status"].to_list() == ["ingested", "ingested"]
    assert (result["peak_rss_bytes"] > 0).all()
    assert _fingerprint(one).equals(_fingerprint(ray_store))
    assert not list((ray_store / "tmp").iterdir())


def test_the_store_reads_the_same_without_traceq(store_dir: Path) -> None:
    traceq.ingest([DDP32], store=store_dir, name="ddp32", jobs=1)
    traceq.ingest([DDP16], store=store_dir, name="ddp16", jobs=1)
    expected = traceq.sql("select run_id, rank, count(*) n from events group by all order by all", store_dir)
    runs = store_dir / "runs"
    files = sorted(str(p) for p in runs.glob("*/*/events.parquet"))
    table = ds.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(runs)).to_table(
        columns=["run_id", "rank", "kind"]
    )
    by_pyarrow = (
        pl.from_arrow(table).group_by("run_id", "rank").agg(pl.len().alias("n")).sort("run_id", "rank")  # type: ignore[union-attr]
    )
    assert by_pyarrow.select(pl.col("run_id").cast(pl.String), pl.col("rank").cast(pl.Int64), "n").equals(
        expected.with_columns(pl.col("n").cast(pl.UInt32))
    )
    by_duckdb = duckdb.sql(
        f"select run_id, rank, count(*) n from read_parquet('{runs}/*/*/events.parquet', hive_partitioning = true) "
        "group by all order by all"
    ).pl()
    assert by_duckdb.with_columns(pl.col("rank").cast(pl.Int64)).equals(expected)


def test_one_unreadable_rank_stores_nothing_of_its_run(store_dir: Path, tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(DDP32 / "ddp_fp32_rank0.json.gz", job / "rank0.json.gz")
    bad = b'{"traceEvents": [{"ph": "X", "name": "a", "ts": "zz", "dur": 1, "pid": 1, "tid": 1}]}'
    (job / "rank1.json.gz").write_bytes(gzip.compress(bad))  # passes the format check, fails in the reader
    traceq.ingest([SINGLE], store=store_dir)
    before = tree_state(store_dir)
    proc = run_cli("ingest", str(job), "--name", "broken", "--store", str(store_dir), "--jobs", "2")
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("traceq: error:")]
    assert len(errors) == 1 and "rank1.json.gz" in errors[0] and "Traceback" not in proc.stderr
    after = {k: v for k, v in tree_state(store_dir).items() if not k.startswith("tmp/")}
    assert after == before
    assert not list((store_dir / "tmp").iterdir())


def test_cli_names_each_rank_and_reports_a_duplicate_job(store_dir: Path) -> None:
    proc = run_cli("ingest", str(DDP16), "--name", "ddp16", "--store", str(store_dir), "-j", "2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(" (")[0] for line in lines] == ["ingested ddp16 rank 0", "ingested ddp16 rank 1"]
    again = run_cli("ingest", str(DDP16), "--name", "ddp16", "--store", str(store_dir), "--format", "json")
    rows = json.loads(again.stdout)
    assert [r["status"] for r in rows] == ["duplicate", "duplicate"]
    assert traceq.runs(store_dir).height == 1


def test_a_job_folder_file_that_is_not_a_trace_is_reported_not_dropped_silently(
    store_dir: Path, tmp_path: Path
) -> None:
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(DDP32 / "ddp_fp32_rank1.json.gz", job / "rank1.json.gz")
    (job / "rank0.json").write_text("garbage")  # a rank the profiler failed to write
    proc = run_cli("ingest", str(job), "--name", "job", "--store", str(store_dir))
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {job / 'rank0.json'}: not a trace" in proc.stderr
    warnings = json.loads(traceq.runs(store_dir)["warnings"][0])
    assert any(w.startswith(f"left out {job / 'rank0.json'}") for w in warnings)
    assert traceq.runs(store_dir)["n_ranks"][0] == 1


def test_a_script_without_a_main_guard_gets_a_clear_error_and_an_empty_store(tmp_path: Path) -> None:
    """Spawned workers import the calling script; one that ingests on import makes them fail to start."""
    store = tmp_path / "store"
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys, traceq\n"
        "from traceq.errors import TraceqError\n"
        "try:\n"
        f"    traceq.ingest([{str(DDP32)!r}], store={str(store)!r}, name='ddp', jobs=2)\n"
        "except TraceqError as e:\n"
        "    print('ERROR', e)\n"
        "    sys.exit(3)\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stdout.startswith("ERROR a worker process ended before finishing its file")
    assert 'if __name__ == "__main__":' in proc.stdout
    assert traceq.runs(store).is_empty()
    assert not list((store / "runs").glob("run_id=*"))


def _polars_pool_size(_: int) -> int:
    return pl.thread_pool_size()


@pytest.mark.slow
def test_pool_workers_share_the_cores_unless_the_caller_sized_polars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors, "default_jobs", lambda: 4)
    monkeypatch.delenv(executors.POLARS_THREADS_ENV, raising=False)
    assert set(dict(executors.run_tasks(_polars_pool_size, [0, 1], jobs=2)).values()) == {2}  # 4 cores / 2
    assert executors.POLARS_THREADS_ENV not in os.environ  # restored for this process
    monkeypatch.setenv(executors.POLARS_THREADS_ENV, "3")
    assert set(dict(executors.run_tasks(_polars_pool_size, [0, 1], jobs=2)).values()) == {3}
