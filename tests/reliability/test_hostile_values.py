"""Hostile values inside well-formed inputs: each is read correctly or refused in one line naming the
file, exit code 1, no traceback, and the store unchanged."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SAMPLES, SHARED, repeated_gzip, run_cli, run_process, tree_state
from traceq.readers import read_trace

#: every case below is counted in the README's reliability tally
CASES: list[str] = []


def _op(name: str, ts: float, dur: float = 5, pid: object = 1, **args: object) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _refused_in_one_line(store: Path, path: Path, *words: str) -> None:
    """``traceq ingest path`` ends in one line naming the file, exit code 1, and the store unchanged."""
    run_cli("ingest", "--store", str(store), str(SAMPLES / "hta_triton_example.json.gz"))
    before = tree_state(store)
    done = run_cli("ingest", "--store", str(store), str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and str(path) in done.stderr, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert all(w in done.stderr for w in words), done.stderr
    assert tree_state(store) == before


# -- chrome traces ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("element", ["17", '"x"', "null", "true", "[]", "{}"])
@pytest.mark.parametrize("big", [False, True], ids=["small", "chunked"])
def test_a_non_object_element_costs_only_itself(tmp_path: Path, element: str, big: bool) -> None:
    filler = [_op(f"f{i}", 100 + i, 1) for i in range(60_000 if big else 0)]  # several 4 MB chunks
    events = [*filler, _op("before", 1), "ELEMENT", _op("after", 10), *filler[:10]]
    text = json.dumps({"traceEvents": events}).replace('"ELEMENT"', element)
    path = tmp_path / "t.json"
    path.write_text(text)
    result = read_trace(path)
    names = result.tables.events["name"].to_list()
    assert "before" in names and "after" in names
    assert result.tables.events.height == len(events) - 1
    assert not any("truncated" in w for w in result.warnings)


CASES.append("a non-object element (number, string, null, boolean, array) among the events")


def test_args_nested_100k_deep_are_replaced_and_the_event_kept(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = json.dumps({"traceEvents": [_op("a", 1, x="DEEP"), _op("b", 10)]}).replace('"DEEP"', deep)
    path = tmp_path / "deep.json"
    path.write_text(text)
    events = read_trace(path).tables.events
    assert events["name"].to_list() == ["a", "b"]
    assert json.loads(events["args"][0]) == {"x": None}  # too deep for the decoder: replaced, with a warning


CASES.append("args nested 100,000 arrays deep")


def test_ids_beyond_64_bits_are_no_ids(tmp_path: Path) -> None:
    path = tmp_path / "pid.json"
    path.write_text(json.dumps({"traceEvents": [_op("a", 1), _op("b", 5, pid="PID")]}).replace('"PID"', "9" * 30))
    events = read_trace(path).tables.events.sort("ts_ns")
    assert events["name"].to_list() == ["a", "b"]
    assert events["pid"].to_list() == [1, None]


CASES.append("a 30-digit pid")


@pytest.mark.parametrize("field", ["ts", "dur"])
def test_times_beyond_int64_ns_are_dropped_with_a_warning(tmp_path: Path, field: str) -> None:
    huge = _op("huge", 1e17 if field == "ts" else 20, 1e17 if field == "dur" else 5)
    path = tmp_path / "ts.json"
    path.write_text(json.dumps({"traceEvents": [_op("a", 1), huge, _op("b", 30)]}))
    result = read_trace(path)
    assert result.tables.events["name"].sort().to_list() == ["a", "b"]
    assert any("beyond" in w and "1 event" in w for w in result.warnings), result.warnings


CASES.append("a ts or dur of 1e17 us (beyond int64 ns)")


@pytest.mark.slow
def test_a_whitespace_bomb_is_refused_quickly(tmp_path: Path) -> None:
    """1.2 GB of whitespace after the array's start (a 1.2 MB gzip): refused after one pass, not after
    scanning the pending window again for every block (92 s of CPU before). The reader's CPU time is the
    measure: its wall time depends on what else the machine runs (67 s once on a busy machine)."""
    path = tmp_path / "ws.json.gz"
    repeated_gzip(path, b'{"traceEvents": [', b" " * (8 << 20), 150, b"]}")
    probe = (
        "import time, resource\nfrom pathlib import Path\nfrom traceq.readers import read_trace\n"
        "from traceq.errors import InputError\n"
        f"try:\n    read_trace(Path({str(path)!r}))\nexcept InputError as e:\n    print(e)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600)
    message, cpu = done.stdout.strip().splitlines()
    assert "no events" in message
    assert float(cpu) < 30


CASES.append("gzip expanding to 1.2 GB of whitespace, in bounded time")


# -- nsys exports ----------------------------------------------------------------------------------------


def _export(tmp_path: Path, name: str = "nsysai_mock__nsys2026.1.1.sqlite.gz") -> Path:
    out = tmp_path / "export.sqlite"
    with gzip.open(SHARED / "nsys" / name) as f, out.open("wb") as g:
        shutil.copyfileobj(f, g)
    return out


def test_an_nsys_row_at_rowid_2_62_is_read_promptly(tmp_path: Path) -> None:
    db = _export(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("insert into CUPTI_ACTIVITY_KIND_KERNEL select * from CUPTI_ACTIVITY_KIND_KERNEL limit 1")
        con.execute(
            "update CUPTI_ACTIVITY_KIND_KERNEL set rowid = 4611686018427387904 "
            "where rowid = (select max(rowid) from CUPTI_ACTIVITY_KIND_KERNEL)"
        )
        kernels = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    command = [sys.executable, "-m", "traceq", "ingest", "--store", str(tmp_path / "store"), str(db)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)  # parts of min..max rowids: forever
    assert done.returncode == 0, done.stderr
    counts = run_cli("sql", "--store", str(tmp_path / "store"), "select count(*) n from events where kind = 'kernel'",
                     "--format", "json")  # fmt: skip
    assert json.loads(counts.stdout)[0]["n"] == kernels


CASES.append("an nsys export with a row at rowid 2^62")


@pytest.mark.parametrize(
    ("case", "statement", "expect"),
    [
        ("blob name", "update StringIds set value = X'41424344' where id = (select min(id) from StringIds)", "ok"),
        ("invalid UTF-8 blob", "update StringIds set value = X'41FF42' where id = (select min(id) from StringIds)",
         "ok"),
        ("blob start", "update CUPTI_ACTIVITY_KIND_KERNEL set start = X'0102' "
         "where rowid = (select min(rowid) from CUPTI_ACTIVITY_KIND_KERNEL)", "refused"),
    ],
)  # fmt: skip
def test_blobs_in_an_nsys_export(tmp_path: Path, case: str, statement: str, expect: str) -> None:
    db = _export(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute(statement)
    store = tmp_path / "store"
    if expect == "refused":
        _refused_in_one_line(store, db, "start")
        return
    done = run_process("ingest", "--store", str(store), str(db))
    assert done.returncode == 0 and "Traceback" not in done.stderr and "panic" not in done.stderr, done.stderr


CASES += ["a BLOB in an nsys string table", "invalid UTF-8 in a BLOB of names", "a BLOB in a kernel's start"]


# -- Paddle summary text ---------------------------------------------------------------------------------

_SUMMARY = (
    "---------------Operator Summary---------------\nTime unit: ms\n"
    "----------  ------  ----------------------------------------  ----------------------------------------  ------\n"
    "Name        Calls   CPU Total / Avg / Max / Min / Ratio(%)    GPU Total / Avg / Max / Min / Ratio(%)    FLOPs\n"
    "----------  ------  ----------------------------------------  ----------------------------------------  ------\n"
)
_ROW = (
    "{name:<10}  {calls:<6}  1.00 / 0.50 / 0.70 / 0.30 / 10.00         "
    "2.00 / 1.00 / 1.20 / 0.80 / 20.00         {flops}\n"
)


@pytest.mark.parametrize(("calls", "flops"), [("1e23", "10"), ("NaN", "10"), ("2", "1e40"), ("inf", "-1e40")])
def test_summary_numbers_beyond_int64_are_no_numbers(tmp_path: Path, calls: str, flops: str) -> None:
    path = tmp_path / "summary.txt"
    path.write_text(_SUMMARY + _ROW.format(name="matmul", calls=calls, flops=flops) +
                    _ROW.format(name="conv2d", calls="3", flops="7"))  # fmt: skip
    ops = read_trace(path).tables.op_stats.sort("name")
    assert ops["name"].to_list() == ["conv2d", "matmul"]
    assert ops["calls"][0] == 3 and ops["flops"][0] == 7
    assert ops["calls"][1] in (None, 2) and ops["flops"][1] in (None, 10)


CASES.append("summary Calls of 1e23 or NaN, FLOPs of 1e40")


@pytest.mark.slow
@pytest.mark.parametrize(("spilled", "bound_mib"), [(False, 450), (True, 280)], ids=["in memory", "spilled"])
def test_a_large_summary_is_read_in_bounded_memory(tmp_path: Path, spilled: bool, bound_mib: int) -> None:
    """10^5 rows (10 MB of text, 1.2 M cells): the cells are built in batches from a stream of lines (not
    one list of a dict per cell: 10^6 rows peaked at 6.7 GB), and with a spill folder (as ingest reads)
    each batch waits there, pivoted into op rows at once (in memory: 381 MiB; spilled: 218 MiB)."""
    path = tmp_path / "big.txt"
    with path.open("w") as f:
        f.write(_SUMMARY)
        for i in range(100_000):
            f.write(_ROW.format(name=f"op{i}", calls=i, flops=i * 10))
    spill = repr(str(tmp_path / "spill")) if spilled else "None"
    probe = (
        "from pathlib import Path\nfrom traceq.readers import read_trace\nimport polars as pl\n"
        f"r = read_trace(Path({str(path)!r}), spill_dir=None if {spill} is None else Path({spill}))\n"
        "print(next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM')) // 1024)\n"
        "print(r.tables.op_stats.height, r.tables.op_stats['flops'].sum())\n"
        "print(r.tables.summary_cells.lazy().select(pl.len()).collect().item())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600)
    peak_mib, ops, cells = done.stdout.strip().splitlines()
    assert ops.split() == ["100000", str(sum(i * 10 for i in range(100_000)))]
    assert int(cells) == 100_000 * 12  # Calls, five CPU and five GPU values, FLOPs per row
    assert int(peak_mib) < bound_mib, peak_mib


CASES.append("a summary of 10^5 rows, in bounded memory, in memory and spilled")


# -- the command -----------------------------------------------------------------------------------------


def test_sql_from_a_binary_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ls.sql"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe" * 100)
    done = run_cli("sql", "--store", str(tmp_path / "store"), "-f", str(path))
    assert done.returncode == 1 and "internal error" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and str(path) in done.stderr


CASES.append("sql -f of a binary file")


def test_comparing_a_summary_with_a_trace_is_one_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    summary = SHARED / "paddle" / "issue48321_fp32_operator_summary.txt"
    trace = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
    done = run_cli("report", "--compare", str(summary), str(trace), "--store", str(store))
    assert done.returncode == 1 and "internal error" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "summary" in done.stderr


CASES.append("report --compare of a summary with a trace")


def test_every_hostile_value_is_counted() -> None:
    assert len(CASES) == len(set(CASES))
    assert pl.Series(CASES).str.len_chars().min() > 0
