"""Killing an ingest at any moment leaves a consistent store; two ingests at once both land."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.conftest import SAMPLES, shared
from traceq.schema import RANK_TABLES

BIG = "kineto/conformer_fp16_b4.json.gz"


def _start(store: Path, *paths: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "traceq", "ingest", "-q", "--store", str(store), *map(str, paths)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _assert_consistent(store: Path) -> list[str]:
    """Every visible run is complete and readable; returns the run ids."""
    ids = []
    for run in (store / "runs").glob("run_id=*") if (store / "runs").exists() else []:
        assert (run / "runs.parquet").is_file(), run
        for table in RANK_TABLES:
            pl.read_parquet(run / "rank=0" / f"{table.name}.parquet")
        ids.append(run.name[7:])
    catalog = traceq.runs(store)
    assert sorted(catalog["run_id"]) == sorted(ids)
    assert traceq.sql("select count(*) n from events", store)["n"][0] >= 0
    return ids


@pytest.mark.slow
def test_sigkill_at_random_moments_leaves_a_consistent_store(tmp_path: Path) -> None:
    trace = shared(BIG)
    store = tmp_path / "store"
    traceq.ingest([SAMPLES / "hta_triton_example.json.gz"], store=store)  # a run that must survive
    # how long a whole ingest process takes here, so that the kills land inside it
    started = time.perf_counter()
    assert _start(tmp_path / "timing_store", trace).wait() == 0
    whole = time.perf_counter() - started
    rng = random.Random(48321)
    killed = 0
    for delay in [rng.uniform(0.05, 0.95) * whole for _ in range(6)]:
        proc = _start(store, trace)
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            killed += 1
        proc.wait()
        ids = _assert_consistent(store)
        assert 1 <= len(ids) <= 2
        if len(ids) == 2:
            break
    # re-running after the kills succeeds and stores the run exactly once
    again = traceq.ingest([trace], store=store)
    assert again["status"][0] in ("ingested", "duplicate")
    ids = _assert_consistent(store)
    assert len(ids) == 2
    assert killed >= 1


def test_two_processes_ingesting_into_one_store_both_land(tmp_path: Path) -> None:
    store = tmp_path / "store"
    a = _start(store, SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz")
    b = _start(store, SAMPLES / "paddlefmt_conformer_fp32_b64_2steps.json.gz")
    assert a.wait(timeout=300) == 0 and b.wait(timeout=300) == 0
    names = set(traceq.runs(store)["name"])
    assert names == {"kineto_conformer_fp16_b4_2steps", "paddlefmt_conformer_fp32_b64_2steps"}
    _assert_consistent(store)


def test_the_same_file_ingested_twice_at_once_is_stored_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    sample = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
    procs = [_start(store, sample) for _ in range(2)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    assert traceq.runs(store).height == 1
    _assert_consistent(store)


def test_report_and_sql_do_not_write_to_the_store(tmp_path: Path) -> None:
    from tests.conftest import run_cli, tree_state

    store = tmp_path / "store"
    traceq.ingest([SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"], store=store)
    before = tree_state(store)
    assert run_cli("report", "kineto_conformer_fp16_b4_2steps", "--store", str(store)).returncode == 0
    assert run_cli("sql", "--store", str(store), "select count(*) from events").returncode == 0
    assert tree_state(store) == before
