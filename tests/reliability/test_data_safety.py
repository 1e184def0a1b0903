"""Data safety: nothing outside the store is deleted, no command overwrites what it did not make, what is
stored is what was read, temporary files are private and do not outlive their process, names are unique."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, SHARED, run_cli
from traceq.errors import TraceqError

SMALL = SAMPLES / "hta_triton_example.json.gz"
OTHER = SAMPLES / "paddle331_cpu_fp32_noshapes.paddle_trace.json.gz"
NSYS = SHARED / "nsys" / "nvfuser_report1__nsys2024.6.2.sqlite.gz"
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _store_state(store: Path) -> dict[str, str]:
    return {str(p.relative_to(store)): _sha(p) for p in sorted(store.rglob("*")) if p.is_file()}


def _one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _host() -> str:
    return socket.gethostname().replace(".", "-") or "localhost"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    traceq.ingest(SMALL, store=path)
    return path


# -- 1. deletion outside the store ---------------------------------------------------------------------------


def test_a_tmp_folder_that_is_a_symlink_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    store, scratch = tmp_path / "store", tmp_path / "scratch"
    traceq.ingest(SMALL, store=store)
    scratch.mkdir()
    (scratch / "results.csv").write_text("precious\n")
    (scratch / "checkpoints").mkdir()
    (scratch / "checkpoints" / "model.pt").write_bytes(b"weights")
    shutil.rmtree(store / "tmp")
    (store / "tmp").symlink_to(scratch)
    before = {p.name for p in scratch.rglob("*")}
    done = run_cli("ingest", str(OTHER), "--store", str(store))
    _one_line(done, str(store / "tmp"), "symbolic link")
    assert {p.name for p in scratch.rglob("*")} == before == {"results.csv", "checkpoints", "model.pt"}
    done = run_cli("runs", "rm", traceq.runs(store)["run_id"][0], "--store", str(store))
    _one_line(done, "symbolic link")
    assert len(traceq.runs(store)) == 1 and {p.name for p in scratch.rglob("*")} == before


def test_the_tmp_cleanup_removes_only_leftovers_traceq_made(tmp_path: Path) -> None:
    store, outside = tmp_path / "store", tmp_path / "outside"
    traceq.ingest(SMALL, store=store)
    outside.mkdir()
    (outside / "data.bin").write_bytes(b"x" * 100)
    tmp, dead = store / "tmp", _dead_pid()
    (tmp / "notes.txt").write_text("mine\n")
    (tmp / "my-folder").mkdir()
    (tmp / "my-folder" / "f").write_text("mine\n")
    (tmp / "run.not-a-pid").mkdir()
    (tmp / f"run.{_host()}.{dead}.0123456789ab").symlink_to(outside)  # traceq's name, but a link
    stale = tmp / f"run.{_host()}.{dead}.ba9876543210"  # a dead writer's: removed
    (stale / "part-0").mkdir(parents=True)
    (stale / "part-0" / "events.parquet").write_bytes(b"partial")
    (stale / "part-0" / "escape").symlink_to(outside)  # inside a leftover: the link goes, not its target
    document = tmp / f"doc.{_host()}.{dead}.cccccccccccc"  # a dead ingest's report document, not yet renamed
    document.write_text('{"made_by": ')
    theirs = tmp / f"spill.{_host()}.{dead}.aaaaaaaaaaaa"
    theirs.mkdir()
    if ROOT:
        os.chown(theirs, 12345, 12345)  # another user's
    traceq.ingest(OTHER, store=store)
    assert (outside / "data.bin").read_bytes() == b"x" * 100
    assert not stale.exists() and not document.exists()
    left = {p.name for p in tmp.iterdir()}
    assert {"notes.txt", "my-folder", "run.not-a-pid", f"run.{_host()}.{dead}.0123456789ab"} <= left
    assert (tmp / "my-folder" / "f").read_text() == "mine\n"
    assert (theirs.name in left) == ROOT  # (not root: this user's, so removed)


def test_a_run_folder_that_is_a_symlink_is_not_removed_through(tmp_path: Path) -> None:
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    run_id = traceq.ingest(SMALL, store=store)["run_id"][0]
    shutil.move(store / "runs" / f"run_id={run_id}", elsewhere)
    (store / "runs" / f"run_id={run_id}").symlink_to(elsewhere)
    files = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    done = run_cli("runs", "rm", run_id, "--store", str(store))
    _one_line(done, "symbolic link")
    assert sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == files


# -- 2. outputs into the store -------------------------------------------------------------------------------


def _targets(store: Path) -> list[Path]:
    run_dir = next((store / "runs").iterdir())
    return [run_dir / "rank=0" / "events.parquet", run_dir / "runs.parquet", store / "traceq-store.json",
            store / "runs" / "new.json", store / "tmp" / "x.db"]  # fmt: skip


@pytest.mark.parametrize("command", ["sqlite", "perfetto", "html"])
def test_no_output_is_written_inside_the_store(store: Path, command: str) -> None:
    before = _store_state(store)
    for target in _targets(store):
        if command == "html":
            done = run_cli("report", "--html", str(target), "--store", str(store))
            assert done.returncode == 1
            assert done.stderr.strip().splitlines()[-1].startswith(f"traceq: error: {target}: inside the store")
        else:
            done = run_cli("export", "--to", command, str(target), "--store", str(store))
            _one_line(done, str(target), "inside the store")
        assert _store_state(store) == before
    assert traceq.check(store).is_empty()


def test_an_output_linked_into_the_store_is_refused(store: Path, tmp_path: Path) -> None:
    link = tmp_path / "events.parquet"
    link.symlink_to(_targets(store)[0])
    before = _store_state(store)
    _one_line(run_cli("export", "--to", "sqlite", str(link), "--force", "--store", str(store)), "inside the store")
    assert _store_state(store) == before


# -- 3. outputs over what traceq did not make ----------------------------------------------------------------


def test_a_device_or_fifo_is_never_replaced(store: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    specials = [fifo, tmp_path]
    if ROOT:
        device = tmp_path / "full"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # a /dev/full of its own
        specials.append(device)
    for special in specials:
        kind = os.stat(special).st_mode
        for target in ("sqlite", "perfetto"):
            done = run_cli("export", "--to", target, str(special), "--force", "--store", str(store))
            _one_line(done, str(special), "not a regular file")
        done = run_cli("report", "--html", str(special), "--force", "--store", str(store))
        assert done.returncode == 1 and "not a regular file" in done.stderr
        assert os.stat(special).st_mode == kind
    assert not [p for p in tmp_path.iterdir() if "traceq-partial" in p.name]


def test_the_trace_of_a_stored_run_is_never_overwritten(tmp_path: Path) -> None:
    trace, store = tmp_path / "trace.json.gz", tmp_path / "store"
    shutil.copyfile(SMALL, trace)
    traceq.ingest(trace, store=store)
    digest = _sha(trace)
    for extra in ((), ("--force",)):
        done = run_cli("export", "--to", "perfetto", str(trace), *extra, "--store", str(store))
        _one_line(done, str(trace), "the trace of the stored run", "never overwrites its inputs")
        done = run_cli("report", "--html", str(trace), *extra, "--store", str(store))
        assert done.returncode == 1 and "never overwrites its inputs" in done.stderr
    hard = tmp_path / "same-file.json.gz"
    os.link(trace, hard)  # the same file by another name
    _one_line(run_cli("export", "--to", "perfetto", str(hard), "--force", "--store", str(store)), "never overwrites")
    assert _sha(trace) == digest


def test_an_unrelated_database_is_kept_unless_forced(store: Path, tmp_path: Path) -> None:
    db = tmp_path / "precious.db"
    con = sqlite3.connect(db)
    con.execute("create table accounts (id integer, balance real)")
    con.execute("insert into accounts values (1, 100.0)")
    con.commit()
    con.close()
    digest = _sha(db)
    _one_line(run_cli("export", "--to", "sqlite", str(db), "--store", str(store)), str(db), "--force")
    assert _sha(db) == digest
    done = run_cli("export", "--to", "sqlite", str(db), "--force", "--store", str(store))
    assert done.returncode == 0 and f"replacing {db} (--force)" in done.stderr
    tables = {r[0] for r in sqlite3.connect(db).execute("select name from sqlite_master where type = 'table'")}
    assert "accounts" not in tables and {"runs", "events"} <= tables


def test_a_traceq_export_is_replaced_and_the_note_says_what_it_was(store: Path, tmp_path: Path) -> None:
    db, trace, page = tmp_path / "runs.db", tmp_path / "t.json.gz", tmp_path / "p.html"
    for _ in range(2):
        db_done = run_cli("export", "--to", "sqlite", str(db), "--store", str(store))
        trace_done = run_cli("export", "--to", "perfetto", str(trace), "--store", str(store))
        page_done = run_cli("report", "--html", str(page), "--store", str(store))
        assert db_done.returncode == trace_done.returncode == page_done.returncode == 0
    name = traceq.runs(store)["name"][0]
    assert f"traceq: replacing {db}, a traceq export of 1 run: {name}" in db_done.stderr
    assert f"traceq: replacing {trace}, a traceq Perfetto export" in trace_done.stderr
    assert f"traceq: replacing {page}, a traceq HTML page" in page_done.stderr
    app_id = sqlite3.connect(db).execute("PRAGMA application_id").fetchone()[0]
    assert app_id.to_bytes(4, "big") == b"trcq"


def test_another_file_is_kept_unless_forced(store: Path, tmp_path: Path) -> None:
    for name, args in (("notes.txt", ("export", "--to", "perfetto")), ("page.html", ("report", "--html"))):
        path = tmp_path / name
        path.write_text("my notes\n")
        done = run_cli(*args, str(path), "--store", str(store))
        assert done.returncode == 1 and "the file exists and traceq did not write it" in done.stderr.splitlines()[-1]
        assert path.read_text() == "my notes\n"
        done = run_cli(*args, str(path), "--force", "--store", str(store))
        assert done.returncode == 0 and path.read_text() != "my notes\n"
    meta = tmp_path / "new.db.metadata.json"  # the metadata an SQLite export writes beside its file
    meta.write_text("{}\n")
    _one_line(run_cli("export", "--to", "sqlite", str(tmp_path / "new.db"), "--store", str(store)), str(meta))
    assert meta.read_text() == "{}\n" and not (tmp_path / "new.db").exists()


# -- 4. identity of what was read ----------------------------------------------------------------------------


def _events(path: Path) -> int:
    with gzip.open(path) as f:
        doc = json.load(f)
    return len(doc["traceEvents"] if isinstance(doc, dict) else doc)


def test_a_file_replaced_after_hashing_is_refused_and_then_stored_as_itself(tmp_path: Path, monkeypatch) -> None:
    from traceq.ingestion import ingest as ingest_module

    trace, store = tmp_path / "trace.json.gz", tmp_path / "store"
    shutil.copyfile(SMALL, trace)
    genuine = _sha(trace)
    hash_files = ingest_module._hash_files

    def then_replaced(runs, jobs):  # the file is hashed, then replaced by another before it is read
        hash_files(runs, jobs)
        shutil.copyfile(OTHER, tmp_path / "other")
        os.replace(tmp_path / "other", trace)

    monkeypatch.setattr(ingest_module, "_hash_files", then_replaced)
    with pytest.raises(TraceqError, match="changed while it was read"):
        traceq.ingest(trace, store=store, jobs=1)
    monkeypatch.setattr(ingest_module, "_hash_files", hash_files)
    assert traceq.runs(store).is_empty()
    shutil.copyfile(SMALL, trace)
    row = traceq.ingest(trace, store=store, jobs=1).row(0, named=True)
    assert row["status"] == "ingested" and row["events"] <= _events(SMALL)
    stored = traceq.runs(store).row(0, named=True)
    assert stored["source_hash"] == genuine and stored["n_events"] == row["events"]


def test_a_file_written_to_while_it_is_read_is_refused(tmp_path: Path) -> None:
    trace, store = tmp_path / "trace.json.gz", tmp_path / "store"
    shutil.copyfile(SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz", trace)

    def progress(label: str, size: int):
        def advance(n: int) -> None:
            if trace.stat().st_size == size:  # once: a writer appends while the reader reads
                with trace.open("ab") as f:
                    f.write(b"\0" * 64)

        return advance

    with pytest.raises(TraceqError, match="changed while it was read"):
        traceq.ingest(trace, store=store, jobs=1, progress=progress)
    assert traceq.runs(store).is_empty()


def test_the_hash_is_of_the_bytes_read(tmp_path: Path) -> None:
    from traceq.readers.source import hashing_reads, iter_content

    trace = tmp_path / "trace.json.gz"
    shutil.copyfile(SMALL, trace)
    with trace.open("ab") as f:
        f.write(b"\0" * 4096)  # padding after the gzip member: the decoder stops before it
    with hashing_reads(trace) as passes:
        b"".join(iter_content(trace))
    assert passes == [_sha(trace)]


# -- 5. nsys exports read wrongly, silently ------------------------------------------------------------------


def _nsys_copy(tmp_path: Path) -> Path:
    db = tmp_path / "export.sqlite"
    with gzip.open(NSYS) as f, db.open("wb") as g:
        shutil.copyfileobj(f, g)
    return db


def _kernels(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    finally:
        con.close()


def _stored_kernels(store: Path) -> int:
    return json.loads(traceq.runs(store)["events_by_kind"][0])["kernel"]


def test_an_nsys_export_with_a_pending_wal_is_read_with_it_and_not_written(tmp_path: Path) -> None:
    db = _nsys_copy(tmp_path)
    kernels = _kernels(db)
    live = tmp_path / "live"
    live.mkdir()
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("CREATE TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the database file itself now has no kernel table
    con.execute("ALTER TABLE k RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")  # this only in the WAL
    con.commit()
    user = tmp_path / "user"
    user.mkdir()
    shutil.copyfile(db, user / "export.sqlite")  # as a profiler left them: database and WAL, unmerged
    shutil.copyfile(db.with_name("export.sqlite-wal"), user / "export.sqlite-wal")
    con.close()
    files = {p.name: _sha(p) for p in user.iterdir()}
    assert (user / "export.sqlite-wal").stat().st_size > 32
    store = tmp_path / "store"
    traceq.ingest(user / "export.sqlite", store=store)
    assert _stored_kernels(store) == kernels > 0
    assert {p.name: _sha(p) for p in user.iterdir()} == files  # nothing written, no -shm made


def test_repeated_string_ids_do_not_multiply_events(tmp_path: Path) -> None:
    db = _nsys_copy(tmp_path)
    kernels = _kernels(db)
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE s AS SELECT * FROM StringIds")
    con.execute("DROP TABLE StringIds")
    con.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    con.execute("INSERT INTO StringIds SELECT * FROM s UNION ALL SELECT * FROM s ORDER BY 1")
    repeated = con.execute("SELECT count(*) FROM s").fetchone()[0]
    con.commit()
    con.close()
    store = tmp_path / "store"
    row = traceq.ingest(db, store=store).row(0, named=True)
    assert _stored_kernels(store) == kernels
    assert f"StringIds repeats {repeated:,} ids (0 with another text)" in " ".join(json.loads(row["warnings"]))


# -- 6. leftovers and permissions ----------------------------------------------------------------------------


def test_stale_leftovers_of_dead_processes_are_removed_at_the_next_start(
    store: Path, tmp_path: Path, monkeypatch
) -> None:
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    dead, alive = _dead_pid(), os.getppid()
    names = {f"traceq-duckdb.{_host()}.{dead}.0123456789ab": "stale", f"traceq-duckdb.{_host()}.{alive}.0123456789ab":
             "kept", f"traceq-nsys.{_host()}.{dead}.0123456789ab": "stale", "traceq-duckdb-mine": "kept"}  # fmt: skip
    for name in names:
        (temp / name).mkdir()
        (temp / name / "spilled.tmp").write_bytes(b"x" * 1000)
    out = tmp_path / "out"
    out.mkdir()
    partial, other = out / f".t.json.traceq-partial.{_host()}.{dead}.0123456789ab", out / ".t.json.1234.tmp"
    partial.write_bytes(b"half")
    other.write_bytes(b"not traceq's")
    assert run_cli("sql", "select count(*) from events", "--store", str(store)).returncode == 0
    assert run_cli("ingest", str(NSYS), "--store", str(store)).returncode == 0
    assert run_cli("export", "--to", "perfetto", str(out / "t.json"), "--store", str(store)).returncode == 0
    assert {p.name for p in temp.iterdir()} == {n for n, what in names.items() if what == "kept"}
    assert {p.name for p in out.iterdir()} == {"t.json", other.name}


def test_temporary_folders_are_private(store: Path, monkeypatch) -> None:
    from traceq.ingestion import task
    from traceq.readers import nsys

    modes: list[int] = []
    ingest_task, local_sqlite = task._ingest, nsys._local_sqlite

    def watched(t, spill, progress):
        modes.append(spill.stat().st_mode & 0o777)
        return ingest_task(t, spill, progress)

    def watched_local(path, progress):
        with local_sqlite(path, progress) as (local, immutable):
            modes.append(local.parent.stat().st_mode & 0o777)
            yield local, immutable

    monkeypatch.setattr(task, "_ingest", watched)
    monkeypatch.setattr(nsys, "_local_sqlite", __import__("contextlib").contextmanager(watched_local))
    old = os.umask(0o022)
    try:
        traceq.ingest(NSYS, store=store, jobs=1)
    finally:
        os.umask(old)
    assert modes == [0o700, 0o700]


def _spilling_query(store: Path, tmp: Path, timeout: int = 0, command: tuple[str, ...] = ("-m", "traceq")
                    ) -> subprocess.Popen:  # fmt: skip
    query = ("select count(*) from (select * from (select i, repeat('x', 50) || (i * 7919 % 3000017)::varchar s "
             "from range(40000000) r(i)) order by s)")  # fmt: skip
    env = {**os.environ, "TMPDIR": str(tmp)}
    args = ["sql", query, "--memory-limit", "60MB", "--timeout", str(timeout), "--store", str(store)]
    return subprocess.Popen([sys.executable, *command, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


#: The command with a connection's close that takes two minutes, as DuckDB 1's did after a signal under load
#: (it waits for the stopped query's tasks still running: 40 s to 3 minutes for the sort above)
_SLOW_CLOSE = ("-c", "import sys, time; import traceq.querying.engine as e; c = e.close; "
               "e.close = lambda con: (time.sleep(120), c(con)); from traceq.cli import main; "
               "sys.argv[0] = 'traceq'; main()")  # fmt: skip


def _wait_for_spill(tmp: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any(any(d.iterdir()) for d in tmp.glob("traceq-duckdb.*")):
            return
        time.sleep(0.05)
    pytest.fail("the query did not spill")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_a_command_in_one_line_and_leaves_nothing(store: Path, tmp_path: Path, signum: int) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = _spilling_query(store, temp)
    _wait_for_spill(temp, proc)
    mode = next(temp.glob("traceq-duckdb.*")).stat().st_mode & 0o777
    proc.send_signal(signum)
    # at once: the signal interrupts DuckDB (which, left to see it between its tasks, took 26-75 s to stop a
    # sort that spilled)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["traceq: error: interrupted; nothing partial was stored"]
    assert mode == 0o700 and not list(temp.iterdir())


def test_a_stopped_query_ends_the_command_without_waiting_for_its_connection_to_close(
    store: Path, tmp_path: Path
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = _spilling_query(store, temp, command=_SLOW_CLOSE)
    _wait_for_spill(temp, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["traceq: error: interrupted; nothing partial was stored"]
    assert not list(temp.iterdir())
    # and stopped by the timeout
    started = time.monotonic()
    proc = _spilling_query(store, temp, timeout=2, command=_SLOW_CLOSE)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and time.monotonic() - started < 60
    assert err.strip().splitlines() == ["traceq: error: query stopped after 2 s (--timeout)"]
    assert not list(temp.iterdir())


#: The command with a two-minute connection close and no watching thread: the query sees the signal only as
#: DuckDB does, between its tasks, running the signal's handler itself (a race the watching thread can lose
#: under load); "querying" is written when the query starts
_DUCKDB_FIRST = ("-c", "import contextlib, sys, time; import traceq.querying.engine as e; c = e.close; "
                 "e.close = lambda con: (time.sleep(120), c(con)); "
                 "e.calling_on_signal = lambda callback: (print('querying', file=sys.stderr, flush=True), "
                 "contextlib.nullcontext())[1]; "
                 "from traceq.cli import main; sys.argv[0] = 'traceq'; main()")  # fmt: skip


def test_a_signal_duckdb_sees_first_ends_the_command_without_waiting_for_its_connection_to_close(
    store: Path,
) -> None:
    """DuckDB 2 then raises a RuntimeError "Query interrupted" without a cause (DuckDB 1: one caused by the
    KeyboardInterrupt); the connection is still closed on a thread of its own, not waited for."""
    proc = subprocess.Popen([sys.executable, *_DUCKDB_FIRST, "sql", "select count(*) from range(100000000000)",
                             "--timeout", "0", "--store", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stderr is not None and proc.stderr.readline().strip() == "querying"
    time.sleep(0.5)  # inside DuckDB's count
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["traceq: error: interrupted; nothing partial was stored"]


def test_the_spill_of_a_killed_query_is_removed_by_the_next(store: Path, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = _spilling_query(store, temp)
    _wait_for_spill(temp, proc)
    proc.kill()
    proc.communicate(timeout=60)
    assert list(temp.iterdir())  # left behind by SIGKILL
    env = {**os.environ, "TMPDIR": str(temp)}
    done = subprocess.run([sys.executable, "-m", "traceq", "sql", "select 1", "--store", str(store)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and not list(temp.iterdir())


# -- 7. names, and run references (issue 35, item 8) ---------------------------------------------------------


@pytest.fixture
def two(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    traceq.ingest([SMALL, OTHER], store=path)
    return path


def test_two_concurrent_renames_to_one_name_cannot_both_succeed(two: Path) -> None:
    from traceq.store import Store, rename_run

    ids = traceq.runs(two)["run_id"].to_list()
    for attempt in range(12):
        name, barrier, outcomes = f"same-{attempt}", threading.Barrier(2), []

        def rename(run_id: str) -> None:
            barrier.wait()  # noqa: B023
            try:
                rename_run(Store(two), run_id, name)  # noqa: B023
                outcomes.append("ok")  # noqa: B023
            except TraceqError as e:
                outcomes.append(str(e))  # noqa: B023

        threads = [threading.Thread(target=rename, args=(r,)) for r in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes)[0] == "ok" and "already the name of run" in sorted(outcomes)[1], outcomes
        assert traceq.runs(two)["name"].to_list().count(name) == 1


def test_ingest_name_of_an_existing_name_is_refused(two: Path, tmp_path: Path) -> None:
    taken = traceq.runs(two)["name"][0]
    third = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
    done = run_cli("ingest", str(third), "--name", taken, "--store", str(two))
    assert done.returncode == 1 and f"{taken}: already the name of run" in done.stderr
    assert len(traceq.runs(two)) == 2
    again = run_cli("ingest", str(SMALL), "--name", "anything", "--store", str(two))  # stored already
    assert again.returncode == 0 and again.stdout.startswith("duplicate")
    copy = tmp_path / "a" / SMALL.name  # the same file name, other content: a name of its own
    copy.parent.mkdir()
    with gzip.open(SMALL) as f:
        doc = json.load(f)
    doc["traceEvents"] = doc["traceEvents"][:-1]
    with gzip.open(copy, "wt") as f:
        json.dump(doc, f)
    row = traceq.ingest(copy, store=two).row(0, named=True)
    assert row["status"] == "ingested" and row["name"] == f"{SMALL.name.removesuffix('.json.gz')}-2"
    names = traceq.runs(two)["name"].to_list()
    assert len(names) == len(set(names)) == 3 and row["name"] in names


def test_a_name_can_never_look_like_a_run_id(two: Path) -> None:
    ids = traceq.runs(two)["run_id"].to_list()
    for name in (ids[1], ids[1][:6], ids[1][:4], "rabc"):
        done = run_cli("runs", "rename", ids[0], name, "--store", str(two))
        _one_line(done, "looks like a run id")
        done = run_cli("ingest", str(SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"), "--name", name,
                       "--store", str(two))  # fmt: skip
        assert done.returncode == 1 and "looks like a run id" in done.stderr
    assert run_cli("runs", "rm", ids[1][:6], "--store", str(two)).returncode == 0
    assert traceq.runs(two)["run_id"].to_list() == [ids[0]]  # the run whose id it is, not a run so named


def test_an_ambiguous_short_prefix_lists_the_candidates(two: Path) -> None:
    ids = sorted(traceq.runs(two)["run_id"].to_list())
    common = os.path.commonprefix(ids)  # noqa: RUF071 - of run ids, not paths
    done = run_cli("runs", "rename", common, "foo", "--store", str(two))
    line = _one_line(done, common, *ids)
    assert re.search("ambiguous run id prefix|matches 2 runs", line) and "no such run" not in line
    done = run_cli("runs", "rename", ids[0][:3], "foo", "--store", str(two))
    assert done.returncode == 1 and ids[0] in done.stderr and "no such run" not in done.stderr
