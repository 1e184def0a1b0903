"""A damaged store: files deleted, truncated or overwritten under a run, its catalog row missing or cut
short. Each command names the damaged run in one line (exit code 1 where it was asked for), the other
runs stay usable, `traceq check` finds it, `traceq runs rm` removes it, and ingesting its trace again
stores it whole. A full disk and a read-only store are the store's problem, in one line."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

import traceq
from tests.conftest import SAMPLES, Ingested, run_cli, run_process, tree_state
from traceq.store import Store, remove_run

#: every case below is counted in the README's reliability tally
CASES: list[str] = []

SMALL = SAMPLES / "hta_triton_example.json.gz"
KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"


def _run_dir(store: Path, trace: Path) -> Path:
    """The folder of the run stored from ``trace`` (found by its file's sha256, which names the run)."""
    digest = hashlib.sha256(trace.read_bytes()).hexdigest()
    return store / "runs" / f"run_id=r{digest[:12]}"


def _rows(store: Path, table: str = "events") -> int:
    """Rows of ``table`` in the store's files, counted by pyarrow from the Parquet footers."""
    return sum(pq.read_metadata(f).num_rows for f in (store / "runs").glob(f"run_id=*/rank=*/{table}.parquet"))


def _one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    """The command's single stderr line, which names ``words``; no traceback, no internal error."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _overwrite_middle(path: Path) -> None:
    """The same size, other bytes in the middle (a bad disk block): only a checksum can tell."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 3
    data[middle : middle + 4096] = bytes(range(256)) * 16
    path.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "events.parquet deleted": lambda run: (run / "rank=0" / "events.parquet").unlink(),
    "rank=0/ deleted": lambda run: shutil.rmtree(run / "rank=0"),
    "events.parquet truncated": lambda run: _cut(run / "rank=0" / "events.parquet"),
    "steps.parquet replaced by garbage": lambda run: (run / "rank=0" / "steps.parquet").write_bytes(b"garbage"),
    "runs.parquet deleted": lambda run: (run / "runs.parquet").unlink(),
    "runs.parquet truncated": lambda run: _cut(run / "runs.parquet"),
}


@pytest.fixture
def two_runs(tmp_path: Path, ingested: Ingested) -> Path:
    """A store of its own holding two runs (a copy of one ingested once)."""
    return ingested.copy(SMALL, KINETO, to=tmp_path / "store")


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_run_is_named_left_out_and_replaced_by_ingesting_it_again(two_runs: Path, damage: str) -> None:
    store, run = two_runs, _run_dir(two_runs, KINETO)
    run_id, small_id = run.name[len("run_id=") :], _run_dir(two_runs, SMALL).name[len("run_id=") :]
    whole_rows = _rows(store)
    small_rows = sum(pq.read_metadata(f).num_rows for f in _run_dir(store, SMALL).glob("rank=*/events.parquet"))
    small_files = tree_state(_run_dir(store, SMALL))
    DAMAGE[damage](run)

    # the other run is listed and queried alone, with a warning naming the damaged one
    listed = run_cli("runs", "--store", str(store), "--format", "json")
    assert listed.returncode == 0
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [small_id]
    _one_line(listed, run_id, "damaged", "traceq runs rm")
    counted = run_cli("sql", "select count(*) n from events", "--store", str(store), "--format", "json")
    assert counted.returncode == 0 and json.loads(counted.stdout) == [{"n": small_rows}]
    # asking for the damaged run is an error naming it
    asked = run_cli("report", run_id, "--store", str(store))
    assert asked.returncode == 1
    assert asked.stderr.strip().splitlines()[-1].startswith("traceq: error: run ")
    assert run_id in asked.stderr.strip().splitlines()[-1]
    checked = run_cli("check", "--store", str(store), "--format", "json")
    assert checked.returncode == 1 and {p["run_id"] for p in json.loads(checked.stdout)} == {run_id}

    # the trace ingested again replaces it; nothing of the other run changed
    again = run_cli("ingest", "-q", "--store", str(store), str(KINETO), "--format", "json")
    assert again.returncode == 0 and json.loads(again.stdout)[0]["status"] == "ingested"
    assert run_cli("check", "--store", str(store)).returncode == 0
    assert _rows(store) == whole_rows
    assert tree_state(_run_dir(store, SMALL)) == small_files


CASES += [f"a stored run's {d}" for d in DAMAGE]


def test_same_size_garbage_is_found_by_check_and_named_by_every_reader(two_runs: Path) -> None:
    store, run = two_runs, _run_dir(two_runs, KINETO)
    run_id = run.name[len("run_id=") :]
    _overwrite_middle(run / "rank=0" / "events.parquet")
    checked = run_cli("check", "--store", str(store), "--format", "json")
    assert checked.returncode == 1
    assert json.loads(checked.stdout) == [
        {"run_id": run_id, "name": KINETO.name.removesuffix(".json.gz"), "file": "rank=0/events.parquet",
         "problem": "its content differs from what was written (CRC-32)"}
    ]  # fmt: skip
    for args in (["sql", "select sum(dur_ns), max(name) from events"], ["report", run_id]):
        done = run_cli(*args, "--store", str(store))
        assert done.returncode == 1
        _one_line(done, run_id, "rank=0/events.parquet", "damaged")
    # a re-ingest cannot tell (the sizes match), so the run is removed first
    removed = run_cli("runs", "rm", run_id, "--store", str(store))
    assert removed.returncode == 0 and run_id in removed.stdout
    assert not run.exists()
    assert run_cli("ingest", "-q", "--store", str(store), str(KINETO)).returncode == 0
    assert run_cli("check", "--store", str(store)).returncode == 0


CASES.append("a stored Parquet file overwritten in the middle (same size)")


def test_runs_of_older_versions_without_a_file_record_are_checked_by_their_layout(two_runs: Path) -> None:
    run = _run_dir(two_runs, KINETO)
    row = pl.read_parquet(run / "runs.parquet").drop("files")
    row.write_parquet(run / "runs.parquet")
    assert Store(two_runs).damaged() == {}
    (run / "rank=0" / "threads.parquet").unlink()
    assert Store(two_runs).damaged()[run.name[len("run_id=") :]].problem == "rank=0/threads.parquet is missing"


def test_removing_a_run_takes_it_out_of_the_catalog_in_one_rename(two_runs: Path, monkeypatch) -> None:
    store, run = Store(two_runs), _run_dir(two_runs, KINETO)
    run_id = run.name[len("run_id=") :]
    kept = tree_state(_run_dir(two_runs, SMALL))
    seen: list[list[str]] = []
    rmtree = shutil.rmtree

    def watched_rmtree(path: Path, *args: object, **kwargs: object) -> None:  # the files are deleted after
        seen.append(store.catalog()["run_id"].to_list())
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr("traceq.store.shutil.rmtree", watched_rmtree)
    remove_run(store, run_id)
    assert seen[0] == [_run_dir(two_runs, SMALL).name[len("run_id=") :]]
    assert not run.exists() and not list((two_runs / "tmp").iterdir())
    assert tree_state(_run_dir(two_runs, SMALL)) == kept
    missing = run_cli("runs", "rm", run_id, "--store", str(two_runs))
    assert missing.returncode == 1
    _one_line(missing, run_id, "no such run")


CASES.append("`traceq runs rm` of a whole run, a damaged run, and a run that is not there")


# -- a full disk, a read-only store ----------------------------------------------------------------------


@contextlib.contextmanager
def _tmpfs(path: Path, size_kib: int) -> Iterator[Path]:
    """A small file system of its own at ``path`` (mounting needs root; skipped otherwise)."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.slow
def test_a_disk_full_while_writing_parquet_is_the_stores_problem(tmp_path: Path) -> None:
    """Fill a small file system so that the decoded chunks fit but the Parquet files do not: found by
    trying fillers from large to small (the first that fails while writing Parquet)."""
    with _tmpfs(tmp_path / "disk", 8 << 10) as disk:
        messages: list[str] = []
        for filler_kib in range(7800, 800, -100):
            (disk / "filler").write_bytes(bytes(filler_kib << 10))
            store = disk / "store"
            done = run_cli("ingest", "-q", "--store", str(store), str(KINETO))
            shutil.rmtree(store)
            if done.returncode == 0:
                break
            messages.append(_one_line(done, "cannot write the store", "No space left on device"))
            if "spill." not in messages[-1]:
                break  # it failed writing the Parquet files
        writing = [m for m in messages if "spill." not in m]  # those that failed writing Parquet, not spilling
        assert writing, messages
        assert all(f"{disk}/store/tmp/run." in m for m in writing), writing


CASES.append("a disk filling while the Parquet files are written")


@pytest.mark.slow
def test_a_read_only_store_is_read_and_refuses_writes_in_one_line(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", 64 << 10) as disk:
        store = disk / "store"
        assert run_process("ingest", "-q", "--store", str(store), str(SMALL)).returncode == 0
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        for args in (["ingest", str(KINETO)], ["report", str(KINETO)], ["runs", "rm", "hta_triton_example"]):
            done = run_process(*args, "--store", str(store))
            assert done.returncode == 1
            _one_line(done, str(store), "Read-only file system")
        for args in (["runs"], ["sql", "select count(*) from events"], ["report"], ["check"]):
            assert run_process(*args, "--store", str(store)).returncode == 0, args


CASES.append("a store on a read-only file system")


def test_the_library_checks_and_removes_a_damaged_run(two_runs: Path) -> None:
    run = _run_dir(two_runs, KINETO)
    run_id = run.name[len("run_id=") :]
    assert traceq.check(two_runs).is_empty()
    (run / "runs.parquet").unlink()  # no name left: the run is found by its id
    problems = traceq.check(two_runs)
    assert problems.select("run_id", "problem").rows() == [(run_id, "runs.parquet is missing")]
    with pytest.raises(traceq.StoreError, match=f"{run_id} in .* is damaged: runs.parquet is missing"):
        traceq.run_report(run_id, two_runs)
    assert traceq.remove_run(run_id, two_runs) == run_id
    assert traceq.check(two_runs).is_empty() and not run.exists()
    assert traceq.runs(two_runs)["name"].to_list() == [SMALL.name.removesuffix(".json.gz")]
