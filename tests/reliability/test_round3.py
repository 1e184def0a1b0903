"""The third round of attacks: names that are not UTF-8, store files this user may not read, numbers beyond
their columns' range, SQL files that never end and names too long for a file, and exports of damaged runs.
Each is read correctly or refused in one line naming the file, run or store (exit code 1), never an
internal error or a hang."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import traceq
from tests.conftest import ROOT, SAMPLES, SHARED, raw_trace, run_process, tree_state
from tests.reliability.test_store_integrity import _one_line, _run_dir

#: every case below is counted in the README's reliability tally (its third round)
CASES: list[str] = []

SMALL = SAMPLES / "hta_triton_example.json.gz"
KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
FF = os.fsdecode(b"\xff")  # how Python holds a byte 0xFF of a file name or an argument


def _refused(done: subprocess.CompletedProcess, *words: str) -> str:
    assert done.returncode == 1, (done.returncode, done.stderr)
    return _one_line(done, *words)


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    assert run_process("ingest", "-q", "--store", str(store), str(SMALL), str(KINETO)).returncode == 0
    return store


# -- 1. names that are not UTF-8 -------------------------------------------------------------------------


def test_a_file_and_a_folder_named_with_byte_ff_are_ingested(tmp_path: Path) -> None:
    folder = tmp_path / f"d{FF}"
    folder.mkdir()
    trace = folder / f"t{FF}.json.gz"
    shutil.copy(SMALL, trace)
    store = tmp_path / "store"
    done = run_process("ingest", "-q", "--store", str(store), str(trace))
    assert done.returncode == 0 and "\ufffd" in done.stdout, done.stderr
    assert run_process("ingest", "-q", "--store", str(store), str(folder)).returncode == 0  # the same: duplicate
    cat = traceq.runs(store)
    assert cat["name"].to_list() == ["t\ufffd"]
    assert cat["source_hash"][0] == hashlib.sha256(SMALL.read_bytes()).hexdigest()
    assert run_process("report", "--store", str(store), str(trace)).returncode == 0


CASES.append("a file and a folder named with byte 0xFF")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["runs", "rename", "hta_triton_example", f"n{FF}"], "NEW_NAME"),
        (["report", "--steps-from", f"a{FF}", "hta_triton_example"], "--steps-from"),
        (["sql", f"select '{FF}'"], "QUERY"),
        (["ingest", "--name", f"x{FF}", str(SMALL)], "--name"),
    ],
    ids=["runs rename", "--steps-from", "sql", "ingest --name"],
)
def test_an_argument_that_is_not_utf8_is_refused_naming_it(two_runs: Path, args: list[str], named: str) -> None:
    before = tree_state(two_runs)
    _refused(run_process(*args, "--store", str(two_runs)), named, "not UTF-8", "0xff")
    assert tree_state(two_runs) == before


CASES.append("runs rename, --steps-from, SQL and --name with bytes that are not UTF-8")


def test_a_store_path_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    store = tmp_path / f"s{FF}"
    _refused(run_process("ingest", "--store", str(store), str(SMALL)), "UTF-8", "0xff")
    assert not store.exists()
    with pytest.raises(traceq.StoreError, match="store's path must be UTF-8"):
        traceq.ingest(SMALL, store=store)


CASES.append("a store path with byte 0xFF")


def test_non_ascii_names_on_an_ascii_terminal(two_runs: Path) -> None:
    """Under LC_ALL=C, without Python's UTF-8 mode: arguments are still read as UTF-8, output that the
    terminal cannot encode is replaced."""
    ascii_env = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": ""}
    renamed = run_process("runs", "rename", "hta_triton_example", "wörld", "--store", str(two_runs), env=ascii_env)
    assert renamed.returncode == 0, renamed.stderr
    assert "wörld" in traceq.runs(two_runs)["name"].to_list()
    for args in (["runs"], ["report", "wörld"], ["check"]):
        done = run_process(*args, "--store", str(two_runs), env=ascii_env)
        assert done.returncode == 0 and "Traceback" not in done.stderr and "internal error" not in done.stderr, done
    assert "w?rld" in run_process("runs", "--store", str(two_runs), env=ascii_env).stdout


CASES.append("a non-ASCII run name under LC_ALL=C")


# -- 2. store files this user may not read or write -------------------------------------------------------

#: the DAC capabilities dropped, root reads and writes only what a file's owner and mode allow it
_AS_A_USER = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
NOBODY = 65534


def _as_a_user(*args: str) -> subprocess.CompletedProcess:
    """The command with the permissions of an ordinary user (root without its file-permission capabilities)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to make a file another user's")
    probe = subprocess.run([*_AS_A_USER, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"setpriv cannot drop capabilities here: {probe.stderr.strip()}")
    command = [*_AS_A_USER, sys.executable, "-m", "traceq", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)


def _another_users(path: Path) -> None:
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o600)


@pytest.mark.parametrize("file", ["rank=0/events.parquet", "runs.parquet"])
def test_a_store_file_this_user_may_not_read(two_runs: Path, file: str) -> None:
    run = _run_dir(two_runs, KINETO)
    run_id, other = run.name[len("run_id=") :], _run_dir(two_runs, SMALL)
    _another_users(run / file)
    if os.access(run / file, os.R_OK, effective_ids=True) and _as_a_user("version").returncode != 0:
        pytest.skip("cannot run traceq without root's capabilities")
    warning = f"run {'' if file == 'runs.parquet' else 'kineto_conformer_fp16_b4_2steps ('}"
    listed = _as_a_user("runs", "--format", "json", "--store", str(two_runs))
    assert listed.returncode == 0, listed.stderr
    assert [r["name"] for r in json.loads(listed.stdout)] == ["hta_triton_example"]
    assert warning in listed.stderr and f"{file} may not be read" in listed.stderr
    assert "Permission denied" in listed.stderr
    counted = _as_a_user("sql", "select count(*) n from events", "--format", "json", "--store", str(two_runs))
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout)[0]["n"] == pq.read_metadata(other / "rank=0" / "events.parquet").num_rows
    _refused_line = _as_a_user("report", run_id, "--store", str(two_runs))
    assert _refused_line.returncode == 1 and "Traceback" not in _refused_line.stderr
    assert f"{run_id}) in {two_runs} cannot be read: {file}" in _refused_line.stderr.splitlines()[-1] or (
        f"run {run_id} in {two_runs} cannot be read: {file}" in _refused_line.stderr.splitlines()[-1]
    )
    assert _as_a_user("report", "hta_triton_example", "--store", str(two_runs)).returncode == 0
    checked = _as_a_user("check", "--format", "json", "--store", str(two_runs))
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    problems = json.loads(checked.stdout)
    assert [(p["run_id"], "Permission denied" in p["problem"]) for p in problems] == [(run_id, True)]


CASES.append("a store's runs.parquet or events.parquet another user's, mode 600")


def test_an_sqlite_export_into_a_folder_this_user_may_not_write(two_runs: Path, tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir()
    os.chown(folder, NOBODY, NOBODY)
    folder.chmod(0o755)
    out = folder / "runs.db"
    done = _as_a_user("export", "--to", "sqlite", str(out), "--store", str(two_runs))
    _refused(done, str(out), "Permission denied")
    assert list(folder.iterdir()) == []


CASES.append("export --to sqlite into a folder this user may not write")


# -- 3. numbers beyond their columns' range ---------------------------------------------------------------


def _nsys_export(tmp_path: Path) -> Path:
    out = tmp_path / "export.sqlite"
    with gzip.open(SHARED / "nsys" / "nsysai_mock__nsys2026.1.1.sqlite.gz") as f, out.open("wb") as g:
        shutil.copyfileobj(f, g)
    return out


@pytest.mark.parametrize(("column", "value"), [("start", "start + 0.5"), ("start", "1e300"), ("end", "1e300")])
def test_an_nsys_time_that_is_real_is_refused_naming_the_column(tmp_path: Path, column: str, value: str) -> None:
    db = _nsys_export(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute(f'update CUPTI_ACTIVITY_KIND_KERNEL set "{column}" = {value} '
                    "where rowid = (select min(rowid) from CUPTI_ACTIVITY_KIND_KERNEL)")  # fmt: skip
    store = tmp_path / "store"
    _refused(run_process("ingest", "--store", str(store), str(db)), str(db),
             f"column {column} of CUPTI_ACTIVITY_KIND_KERNEL holds real values where integers belong")  # fmt: skip
    assert not list((store / "runs").glob("run_id=*"))


CASES.append("an nsys start or end of 8271798760.5 or 1e300 (REAL where integers belong)")


def _edited_kineto(tmp_path: Path, edit: dict) -> Path:
    doc = json.loads(json.dumps(raw_trace(KINETO)))
    doc.update(edit.get("meta", {}))
    for event in doc["traceEvents"]:
        if event.get("cat") == "user_annotation" and event.get("name") == edit.get("rename"):
            event["name"] = edit["to"]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("base", [10**30, 2**63])
def test_a_base_time_beyond_int64_is_no_clock_offset(tmp_path: Path, base: int) -> None:
    path = _edited_kineto(tmp_path, {"meta": {"baseTimeNanoseconds": base}})
    store = tmp_path / "store"
    done = run_process("ingest", "-q", "--store", str(store), str(path))
    assert done.returncode == 0, done.stderr
    cat = traceq.runs(store)
    assert cat["clock_offset_ns"].to_list() == [None]
    assert cat["n_steps"].to_list() == [2]


CASES.append("a chrome baseTimeNanoseconds beyond int64")


def test_a_profiler_step_number_beyond_int32_is_a_range_not_a_step(tmp_path: Path) -> None:
    path = _edited_kineto(tmp_path, {"rename": "ProfilerStep#5", "to": "ProfilerStep#99999999999"})
    store = tmp_path / "store"
    assert run_process("ingest", "-q", "--store", str(store), str(path)).returncode == 0
    raw = raw_trace(path)["traceEvents"]
    named = [re.fullmatch(r"ProfilerStep#(\d+)", e.get("name", "")) for e in raw if e.get("cat") == "user_annotation"]
    expected = sorted(int(m.group(1)) for m in named if m and int(m.group(1)) < 2**31)
    steps = traceq.sql("select step from steps order by step", store)["step"].to_list()
    assert steps == expected == [6]
    kinds = traceq.sql("select kind from events where name = 'ProfilerStep#99999999999'", store)["kind"].to_list()
    assert kinds == ["annotation"]
    assert run_process("report", "--store", str(store)).returncode == 0


CASES.append("a ProfilerStep#99999999999")


# -- 4. SQL files and names -------------------------------------------------------------------------------


@pytest.mark.parametrize("what", ["fifo", "/dev/zero", "2 MB", "folder"])
def test_sql_from_a_file_that_is_not_a_small_regular_file(two_runs: Path, tmp_path: Path, what: str) -> None:
    path = tmp_path / "q.sql"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "2 MB":
        path.write_text("select 1;" + " " * (2 << 20))
    elif what == "folder":
        path.mkdir()
    else:
        path = Path(what)
    done = run_process("sql", "-f", str(path), "--store", str(two_runs))  # a FIFO's reader waited forever
    reason = {"fifo": "not a regular file", "/dev/zero": "not a regular file", "2 MB": "larger than 1 MB",
              "folder": "Is a directory"}[what]  # fmt: skip
    _refused(done, str(path), reason)


CASES.append("sql -f of a FIFO, /dev/zero, a 2 MB file")


@pytest.mark.parametrize("where", ["query name", "Requires entry"])
def test_a_name_of_10000_characters(two_runs: Path, tmp_path: Path, where: str) -> None:
    name = "a" * 10_000
    if where == "query name":
        done = run_process("query", name, "--store", str(two_runs))
    else:
        (tmp_path / "q.sql").write_text(f"-- Requires: _{name[1:]}\nselect 1")
        done = run_process("sql", "-f", str(tmp_path / "q.sql"), "--store", str(two_runs))
    _refused(done, "10,000 characters", "not a query name")


CASES.append("a query name or -- Requires: entry of 10,000 characters")


@pytest.mark.parametrize("size", ["99999999999999TB", "2PB", "1000000000000000001"])
def test_a_memory_limit_out_of_range(two_runs: Path, size: str) -> None:
    _refused(run_process("sql", "select 1", "--memory-limit", size, "--store", str(two_runs)),
             size, "from 1 byte to 1 PB")  # fmt: skip
    assert run_process("sql", "select 1", "--memory-limit", "1PB", "--store", str(two_runs)).returncode == 0


CASES.append("an out-of-range --memory-limit")


# -- 5. exports of damaged runs ---------------------------------------------------------------------------


def test_an_sqlite_export_of_a_store_whose_every_run_is_damaged(two_runs: Path, tmp_path: Path) -> None:
    for trace in (SMALL, KINETO):
        events = _run_dir(two_runs, trace) / "rank=0" / "events.parquet"
        events.write_bytes(events.read_bytes()[:100])
    out = tmp_path / "runs.db"
    done = subprocess.run([sys.executable, "-m", "traceq", "export", "--to", "sqlite", str(out), "--store",
                           str(two_runs)], capture_output=True, text=True, timeout=60)  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr and len(lines) == 3, done.stderr
    assert all("is damaged" in line and "left out" in line for line in lines[:2])
    assert lines[2] == f"traceq: error: {two_runs}: no run to export (2 damaged or unreadable, left out)"
    assert not out.exists()


CASES.append("export --to sqlite of a store whose every run is damaged")


def test_the_third_round_tally_in_the_readme_matches_the_cases() -> None:
    assert len(CASES) == len(set(CASES))
    readme = (ROOT / "README.md").read_text()
    assert f"A third round of {len(CASES)} kinds of attack (`test_round3.py`" in readme
