"""Nsight Systems exports: counts equal direct SQL on each file; joins per process; bad files."""

from __future__ import annotations

import bisect
import functools
import gzip
import re
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from tests.cli.test_start_imports import loaded
from tests.conftest import SHARED, run_cli, tree_state
from traceq.errors import InputError
from traceq.model.steps import STEP_NAME
from traceq.readers import nsys, read_trace

EXPORTS = sorted((SHARED / "nsys").glob("*.sqlite.gz"))
PYTORCH_NVTX = {"nsys_conformer_fp16_b4", "nsys_conformer_fp32_b4", "nsysai_mfu_2gpu_before", "nsysai_mfu_2gpu_after"}
GPU_TABLES = {"kernel": "CUPTI_ACTIVITY_KIND_KERNEL", "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
              "memset": "CUPTI_ACTIVITY_KIND_MEMSET"}  # fmt: skip
#: Every table an export's events come from.
READ_TABLES = [*GPU_TABLES.values(), "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_RUNTIME",
               "NVTX_EVENTS"]  # fmt: skip


@functools.lru_cache(maxsize=2)
def _plain(gz: Path, tmp: str) -> Path:
    out = Path(tmp) / gz.name.removesuffix(".gz")
    with gzip.open(gz) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


class _Stages:
    """A progress callback that keeps the stages it is told."""

    def __init__(self) -> None:
        self.stages: list[str] = []

    def __call__(self, n: int) -> None:
        pass

    def stage(self, text: str) -> None:
        self.stages.append(text)


def _sql(db: Path, query: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _tables(db: Path) -> set[str]:
    return {r[0] for r in _sql(db, "select name from sqlite_master where type = 'table'")}


@pytest.fixture(scope="module", params=EXPORTS, ids=lambda p: p.name.split("__")[0].removesuffix(".sqlite.gz"))
def export(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pl.DataFrame]:
    db = _plain(request.param, str(tmp_path_factory.mktemp("nsys")))
    return db, read_trace(request.param).tables.events


def test_all_exports_are_present() -> None:
    assert len(EXPORTS) == 8
    assert len([p for p in EXPORTS if p.name.split("__")[0].removesuffix(".sqlite.gz") in PYTORCH_NVTX]) == 4


def test_gpu_counts_and_kernel_time_equal_direct_sql(export: tuple[Path, pl.DataFrame]) -> None:
    db, events = export
    for kind, table in GPU_TABLES.items():
        want = (
            _sql(db, f"select count(*), coalesce(sum(end - start), 0) from {table}")
            if table in _tables(db)
            else [(0, 0)]
        )
        got = events.filter(pl.col("kind") == kind)
        assert (got.height, got["dur_ns"].sum()) == want[0], kind


def test_launches_join_on_correlation_and_process(export: tuple[Path, pl.DataFrame]) -> None:
    db, events = export
    tables = _tables(db)
    want = 0
    for table in GPU_TABLES.values():
        if table in tables and "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            want += _sql(
                db,
                f"select count(*) from {table} g join CUPTI_ACTIVITY_KIND_RUNTIME r on g.correlationId = "
                "r.correlationId and g.globalPid = (r.globalTid / 16777216) * 16777216",
            )[0][0]
    gpu = events.filter(pl.col("kind").is_in(list(GPU_TABLES)))
    assert gpu["launch_id"].is_not_null().sum() == want
    calls = (
        _sql(db, "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables
        else 0
    )
    assert events.filter(pl.col("kind") == "runtime").height == calls


def test_nvtx_ranges_become_ops_where_pytorch_made_them_annotations_otherwise(
    export: tuple[Path, pl.DataFrame],
) -> None:
    """Every closed NVTX range is an event: a step where named like one, an op where its text carries
    emit_nvtx's ``op_id`` (counted here on the export's texts), an annotation otherwise."""
    db, events = export
    texts: list[str] = []
    if "NVTX_EVENTS" in _tables(db):
        strings = "StringIds" in _tables(db)
        texts = [t or "" for (t,) in _sql(
            db,
            ("select coalesce(e.text, s.value) from NVTX_EVENTS e left join StringIds s on s.id = e.textId"
             if strings else "select e.text from NVTX_EVENTS e") + ' where eventType in (59, 60) and "end" is not null',
        )]  # fmt: skip
    ranges = events.filter(pl.col("kind").is_in(["op", "step", "annotation"]))
    assert ranges.height == len(texts)
    with_op_id = [t for t in texts if re.search(r", op_id = \d+", t) and "\n" not in t]
    names = [re.split(r", (?:seq|op_id) = ", t)[0] for t in with_op_id]  # the op's name: the text's start
    ops = [n for n in names if not re.search(STEP_NAME, n)]  # (a range named like a step is a step)
    assert ranges.filter(pl.col("kind") == "op").height == len(ops)
    if db.name.split("__")[0].removesuffix(".sqlite") in PYTORCH_NVTX:
        assert len(with_op_id) > 0.9 * len(texts)


@pytest.mark.parametrize(
    "gz", [p for p in EXPORTS if p.name.split("__")[0].removesuffix(".sqlite.gz") in PYTORCH_NVTX], ids=lambda p: p.name
)
def test_kernels_of_pytorch_captures_are_linked_to_the_enclosing_nvtx_range(gz: Path, tmp_path: Path) -> None:
    db, events = _plain(gz, str(tmp_path)), read_trace(gz).tables.events
    # independent: a launch is inside a range if, among its thread's ranges started before it, the
    # latest-ending one ends after it (NVTX push/pop ranges nest)
    ranges: dict[int, list[tuple[int, int]]] = {}
    for tid, start, end in _sql(
        db, 'select globalTid, start, "end" from NVTX_EVENTS where eventType = 59 and "end" is not null'
    ):
        ranges.setdefault(tid, []).append((start, end))
    index = {}
    for tid, rs in ranges.items():
        rs.sort()
        starts, reach, best = [s for s, _ in rs], [], -1
        for _, e in rs:
            best = max(best, e)
            reach.append(best)
        index[tid] = (starts, reach)
    launches = _sql(
        db,
        "select r.globalTid, r.start, r.end from CUPTI_ACTIVITY_KIND_KERNEL k join CUPTI_ACTIVITY_KIND_RUNTIME r "
        "on k.correlationId = r.correlationId and k.globalPid = (r.globalTid / 16777216) * 16777216",
    )
    inside = 0
    for tid, start, end in launches:
        starts, reach = index.get(tid, ([], []))
        i = bisect.bisect_right(starts, start) - 1
        inside += i >= 0 and reach[i] >= end
    kernels = events.filter(pl.col("kind") == "kernel")
    assert kernels["op_id"].is_not_null().sum() == inside
    assert inside / kernels.height > 0.9


def test_emit_nvtx_names_are_reduced_and_sizes_kept() -> None:
    events = read_trace(SHARED / "nsys" / "nsys_conformer_fp32_b4.sqlite.gz").tables.events
    ops = events.filter(pl.col("kind") == "op")
    assert not ops["name"].str.contains(", op_id = ").any()
    assert ops.filter(pl.col("name") == "aten::mm").height > 0
    with_sizes = ops.filter(pl.col("input_shapes").is_not_null())
    assert with_sizes.height > 0 and with_sizes["input_shapes"].str.starts_with("[").all()
    assert ops["args"].str.contains('"nvtx_text":').all()


#: The ``emit_nvtx`` grammar as one expression with a group per part (the name and the sizes as short as
#: they can be), the reference the reader's group-free searches must agree with.
_EMIT_NVTX = r"^(.*?)(?:, seq = (\d+))?(?:, op_id = (\d+))?(?:, sizes = (\[.*?\]))?(?:, input_op_ids = (.*))?$"

#: Texts where a search could stop in the wrong place: parts missing or out of order, separators in the name,
#: brackets in and after the sizes, line breaks, names that are not ASCII.
_NVTX_EDGES = [
    "", "aten::mm", "aten::mm, seq = 3", "aten::mm, op_id = 7", "aten::mm, sizes = []", "a, b, seq = 1, op_id = 2",
    "aten::mm, seq = 1, op_id = 2, sizes = [[2, 3], [3]], input_op_ids = [(1,0), (2,0)]",
    "aten::mm, op_id = 2, seq = 1", "x, seq = , op_id = 2", "x, seq = 12x", "x, sizes = [[1]], extra",
    "x, sizes = [a], b], input_op_ids = [(0,-1)]", "x, sizes = [[1]], input_op_ids = ], sizes = [[2]]",
    "x, sizes = [[1]], input_op_ids = [(0,-1)], sizes = [[2]]", "x, sizes = [", "x, input_op_ids = ",
    "é名, seq = 5, sizes = [[5]]", "名\n, seq = 5", "x, seq = 5\n", "x, sizes = [\n]", "line\nbreak",
    ", seq = 1", ", sizes = [[1]], sizes = [[2]]", "x, op_id = 1, op_id = 2",
]  # fmt: skip


def test_emit_nvtx_parts_agree_with_one_expression_of_groups(tmp_path: Path) -> None:
    gz = next(p for p in EXPORTS if p.name.startswith("nsys_conformer_fp16_b4"))
    texts = [t for (t,) in _sql(_plain(gz, str(tmp_path)), "select text from NVTX_EVENTS where text is not null")]
    assert len(texts) > 10_000 and sum(", sizes = " in t for t in texts) > 1_000
    frame = pl.DataFrame({"text": texts + _NVTX_EDGES})
    got = nsys.emit_nvtx_parts(frame.lazy(), "text").collect()
    want = frame.select(pl.col("text").str.extract_groups(_EMIT_NVTX).alias("g")).unnest("g")
    for column, group in (("_name", "1"), ("_seq", "2"), ("_op_id", "3"), ("_sizes", "4")):
        assert got[column].to_list() == want[group].to_list(), column
    assert got["_name"].null_count() == 4  # the four texts with a line break where the name is
    assert got["_sizes"].drop_nulls().str.starts_with("[").all()


def test_tables_read_in_rowid_parts_give_the_whole_table_reads_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gz = next(p for p in EXPORTS if p.name.startswith("nsys_conformer_fp16_b4"))
    db = _plain(gz, str(tmp_path))
    whole = read_trace(db).tables
    ranges: list[str] = []
    original = nsys._Read.sql
    monkeypatch.setattr(nsys._Read, "sql", lambda self, rows=None: ranges.append(self.table) or original(self, rows))
    monkeypatch.setattr(nsys, "PART_ROWS", 5_000)
    monkeypatch.setattr(nsys, "default_jobs", lambda: 4)
    ranges.clear()
    split = read_trace(db).tables
    n_runtime = _sql(db, "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
    assert ranges.count("CUPTI_ACTIVITY_KIND_RUNTIME") == 4 and n_runtime >= 4 * 5_000  # read in four parts
    assert ranges.count("CUPTI_ACTIVITY_KIND_KERNEL") == 4 and ranges.count("StringIds") == 1  # small: whole
    assert split.events.equals(whole.events)
    assert split.threads.equals(whole.threads) and split.steps.equals(whole.steps)


def test_export_is_opened_read_only(tmp_path: Path) -> None:
    db = _plain(EXPORTS[0], str(tmp_path))
    before = tree_state(tmp_path)
    read_trace(db)
    assert tree_state(tmp_path) == before  # no journal, no index, no change


def test_a_sqlite_file_that_is_not_an_export_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "app.sqlite"
    con = sqlite3.connect(db)
    con.execute("create table users(id integer, name text)")
    con.commit()
    con.close()
    with pytest.raises(InputError, match="not an Nsight Systems export"):
        read_trace(db)


def test_a_corrupted_export_is_a_one_line_error(tmp_path: Path) -> None:
    db = _plain(EXPORTS[-1], str(tmp_path))
    data = bytearray(db.read_bytes())
    data[4096:] = b"\x5a" * (len(data) - 4096)
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(bytes(data))
    store = tmp_path / "store"
    done = run_cli("ingest", "--store", str(store), str(broken))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(broken) in lines[0] and "Traceback" not in done.stderr
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())


def test_an_export_without_cuda_tables_warns(tmp_path: Path) -> None:
    db = _plain(EXPORTS[0], str(tmp_path))
    con = sqlite3.connect(db)
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):  # fmt: skip
        con.execute(f"drop table {t}")
    con.commit()
    con.close()
    result = read_trace(db)
    assert any("CUDA was not traced" in w for w in result.warnings)
    assert result.tables.events.filter(pl.col("kind") == "op").height > 0


def _two_processes_with_steps(db: Path) -> None:
    """Turn an export into a two-process capture with profiler steps: its runtime and GPU rows copied into
    a second process (same correlation ids, 1 us later), and four ``ProfilerStep#N`` NVTX ranges over
    the launching thread."""
    con = sqlite3.connect(db)
    (tid,) = con.execute(
        "select globalTid from CUPTI_ACTIVITY_KIND_RUNTIME group by globalTid order by count(*) desc limit 1"
    ).fetchone()
    lo, hi = con.execute("select min(start), max(end) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    for table, process in [
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"),
        *((t, "globalPid") for t in GPU_TABLES.values()),
    ]:
        cols = [r[1] for r in con.execute(f"pragma table_info({table})")]
        moved = {"start": "start + 1000", "end": '"end" + 1000', process: f"{process} + 16777216"}
        quoted = [f'"{c}"' for c in cols]
        con.execute(
            f"insert into {table} ({', '.join(quoted)}) "
            f"select {', '.join(moved.get(c, q) for c, q in zip(cols, quoted, strict=True))} from {table}"
        )
    step = (hi - lo) // 4
    for i in range(4):
        con.execute(
            'insert into NVTX_EVENTS (start, "end", eventType, text, globalTid) values (?, ?, 59, ?, ?)',
            (lo + i * step, lo + (i + 1) * step, f"ProfilerStep#{i + 1}", tid),
        )
    con.commit()
    con.close()


@pytest.mark.slow
def test_an_export_built_on_disk_in_small_parts_equals_the_one_built_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the on-disk size an export is read in rowid parts into spilled chunks and its model built on
    disk: the same tables as in memory, launches still joined per process (correlation ids repeat across
    the two processes here) and steps found."""
    from traceq.model import on_disk
    from traceq.readers import chunks

    gz = next(p for p in EXPORTS if p.name.startswith("nsys_conformer_fp16_b4"))
    db = _plain(gz, str(tmp_path)).rename(tmp_path / "two_processes.sqlite")
    _two_processes_with_steps(db)
    whole = read_trace(db)
    monkeypatch.setattr(on_disk, "MIN_EVENTS", 0)
    monkeypatch.setattr(on_disk, "BUCKET_ROWS", 20_000)
    monkeypatch.setattr(nsys, "CHUNK_PART_ROWS", 30_000)
    monkeypatch.setattr(chunks, "CHUNK_ROWS", 10_000)  # a chunk per part
    spill = tmp_path / "spill"
    heard = _Stages()
    result = read_trace(db, heard, spill_dir=spill)
    assert result.model_on_disk and len(list((spill / "nsys").glob("chunk-*.arrow"))) > 10
    events = result.tables.events
    assert isinstance(events, pl.LazyFrame)
    events = events.collect()
    assert events.equals(whole.tables.events)
    assert result.tables.steps.equals(whole.tables.steps) and result.tables.threads.equals(whole.tables.threads)
    assert result.tables.kernel_classes.equals(whole.tables.kernel_classes)
    assert result.overview == whole.overview and result.warnings == whole.warnings == []
    assert result.tables.steps["name"].to_list() == [f"ProfilerStep#{i}" for i in range(1, 5)]
    kernels = "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL g join CUPTI_ACTIVITY_KIND_RUNTIME r on "
    same_process = "g.globalPid = (r.globalTid / 16777216) * 16777216 and g.correlationId = r.correlationId"
    linked = _sql(db, kernels + same_process)[0][0]
    assert _sql(db, kernels + "g.correlationId = r.correlationId")[0][0] > linked  # ids repeat across processes
    on_kernels = events.filter(pl.col("kind") == "kernel")
    assert on_kernels["launch_id"].is_not_null().sum() == linked
    launches = events.select(pl.col("event_id").alias("launch_id"), pl.col("pid").alias("launch_pid"))
    assert on_kernels.join(launches, on="launch_id").filter(pl.col("pid") != pl.col("launch_pid")).is_empty()
    assert on_kernels["step"].is_not_null().sum() > 0.9 * on_kernels.height
    # progress: each part as it is read, out of the parts of the tables' rowid ranges
    present = {name for (name,) in _sql(db, "select name from sqlite_master where type = 'table'")}
    spans = [_sql(db, f"select min(rowid), max(rowid) from {t}")[0] for t in READ_TABLES if t in present]
    n = sum(-(-(hi - lo + 1) // 30_000) for lo, hi in spans if lo is not None)
    parts = [s for s in heard.stages if s.startswith("reading the export")]
    assert parts == [f"reading the export in parts: {k:,} of {n:,}" for k in range(1, n + 1)] and n > 10


def test_an_export_is_ingested_without_arrows_compute_functions_or_the_drivers_db_api(tmp_path: Path) -> None:
    """The driver's DB-API layer loads pyarrow's datasets and compute functions, and a cast of Polars' strings
    to the decoder's 32-bit offsets loads the compute functions: about 43-67 ms of a small capture's ingest
    that reads nothing with them (counted in a fresh process, never timed)."""
    gz = next(p for p in EXPORTS if p.name.startswith("nsys_conformer_fp32_b4"))
    modules = loaded(tmp_path / "store", "ingest", str(gz))
    assert {"traceq.readers.nsys", "adbc_driver_sqlite", "pyarrow"} <= modules  # it did read the export
    assert not {"pyarrow.compute", "pyarrow.dataset", "adbc_driver_manager.dbapi"} & modules
