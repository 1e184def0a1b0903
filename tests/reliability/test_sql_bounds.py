"""Users' SQL is bounded in time and memory: a runaway query ends with one line naming the bound."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, run_cli
from traceq.errors import QueryError
from traceq.querying.engine import MAX_DEFAULT_MEMORY, default_memory_limit, memory_bytes

KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
#: 22,786 events with themselves, three times: 1.2e13 triples, days of work (519 M pairs, two times, could
#: end within the timeout on a quiet machine)
CROSS_JOIN = "SELECT count(*) FROM events a, events b, events c WHERE a.dur_ns + b.dur_ns + c.dur_ns = 7"
#: one string of every event's args, 100 times over: hundreds of MB that no operator can spill
HUNGRY = "SELECT length(string_agg(a.args, ',')) FROM events a, range(100)"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bounds") / "store"
    traceq.ingest([KINETO], store=root, jobs=1)
    return root


def test_a_cross_join_is_stopped_at_the_timeout(store: Path) -> None:
    started = time.perf_counter()
    done = run_cli("sql", "--store", str(store), "--timeout", "1", CROSS_JOIN)
    assert time.perf_counter() - started < 15  # the interpreter's start included
    assert done.returncode == 1
    assert done.stderr == "traceq: error: query stopped after 1 s (--timeout)\n"
    started = time.perf_counter()
    with pytest.raises(QueryError, match=r"^query stopped after 0.5 s \(--timeout\)$"):
        traceq.sql(CROSS_JOIN, store, timeout=0.5)
    assert time.perf_counter() - started < 5


def test_a_query_beyond_the_memory_limit_says_so(store: Path) -> None:
    done = run_cli("sql", "--store", str(store), "--memory-limit", "50MB", HUNGRY)
    assert done.returncode == 1
    assert done.stderr == "traceq: error: query needs more than 50 MB of memory (--memory-limit)\n"
    with pytest.raises(QueryError, match=r"^query needs more than 50 MB of memory \(--memory-limit\)$"):
        traceq.sql(HUNGRY, store, memory_limit=50 * 10**6)


def test_a_query_that_can_spill_runs_within_a_small_limit(store: Path) -> None:
    """The limit bounds memory, not size: a sort of 3 M strings (about 200 MB) spills, into the temporary
    folder that the users' connection, which can open no file, still has for itself, and ends. (On 50 MB
    the two threads' sort buffers do not always fit at once.)"""
    sort = (
        "SELECT count(*) AS n FROM (SELECT i FROM range(3000000) r(i) "
        "ORDER BY repeat('x', 50) || (i * 7919 % 3000017)::VARCHAR)"
    )
    assert traceq.sql(sort, store, memory_limit="100MB", timeout=None)["n"][0] == 3_000_000


def test_queries_within_the_bounds_are_unaffected(store: Path) -> None:
    assert traceq.sql("SELECT count(*) AS n FROM events", store, timeout=30, memory_limit="1GB")["n"][0] == 22_786
    assert traceq.query("gpu_busy", store, timeout=30, memory_limit="1GB").height == 2


def test_memory_sizes_and_the_default_limit() -> None:
    assert memory_bytes("4GB") == 4 * 10**9
    assert memory_bytes("500 MB") == 500 * 10**6
    assert memory_bytes("2GiB") == 2 * 2**30
    assert memory_bytes(12345) == 12345
    for bad in ("lots", "5XB", "-1GB", "0"):
        with pytest.raises(QueryError, match="not a memory size"):
            memory_bytes(bad)
    assert 64 * 10**6 <= default_memory_limit() <= MAX_DEFAULT_MEMORY


def test_a_bad_memory_limit_is_one_line(store: Path) -> None:
    done = run_cli("sql", "--store", str(store), "--memory-limit", "lots", "SELECT 1")
    assert done.returncode == 1
    assert done.stderr == "traceq: error: lots: not a memory size (e.g. 4GB, 500MB)\n"
