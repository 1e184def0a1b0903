"""Run the attacks of the three reliability rounds as ``traceq`` commands and check how each ends.

Each command must end with exit code 0 or 1, within its time limit, with no ``internal error`` and no
``Traceback`` in its output. The inputs are made under ``--work`` (a temporary folder by default) from
the bundled sample traces and the shared nsys exports; attacks that need minutes, gigabytes or a mount
(gzip bombs, 10^6-row summaries, a full disk, SIGKILL) are left to their own tests in
``tests/reliability/``. The commands that need a user without root's file permissions run under
``setpriv`` and are left out where that cannot be done (not root, no setpriv).

Usage: python scripts/attack_battery.py [--work DIR] [--jobs N] [--timeout SECONDS] [--list]
Prints one line per command that ends otherwise, then ``N commands: 0 internal errors, 0 tracebacks,
0 hangs, 0 other exit codes``; exit code 1 if any count is not 0.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
SHARED = Path(os.environ.get("TRACEQ_SHARED", ROOT.parent / "shared")) / "traces"
SMALL = SAMPLES / "hta_triton_example.json.gz"
KINETO = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
NSYS = SHARED / "nsys" / "nsysai_mock__nsys2026.1.1.sqlite.gz"
SUMMARY = SHARED / "paddle" / "issue48321_fp32_operator_summary.txt"
FF = os.fsdecode(b"\xff")
#: the DAC capabilities dropped, root reads and writes only what a file's owner and mode allow it
AS_A_USER = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
NOBODY = 65534
ASCII_TERMINAL = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": ""}


@dataclass
class Attack:
    """One command: its round and label, its arguments (``{store}`` is its store), how it runs."""

    round: int
    label: str
    args: list[str]
    store: str = "base"
    env: dict[str, str] = field(default_factory=dict)
    as_a_user: bool = False


@dataclass
class Ending:
    attack: Attack
    code: int | None  # None: it did not end in time
    output: str

    def problems(self) -> list[str]:
        found = []
        if self.code is None:
            found.append("hang")
        elif self.code not in (0, 1):
            found.append(f"exit code {self.code}")
        if "internal error" in self.output:
            found.append("internal error")
        if "Traceback" in self.output:
            found.append("traceback")
        return found


def _trace(events: list[object], **meta: object) -> str:
    return json.dumps({"traceEvents": events, **meta})


def _op(name: str, ts: float, dur: float | None, cat: str = "cpu_op", **extra: object) -> dict:
    event: dict = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, **extra}
    if dur is not None:
        event["dur"] = dur
    return event


def _kineto(edit: Callable[[dict], None]) -> str:
    doc = json.loads(gzip.decompress(KINETO.read_bytes()))
    edit(doc)
    return json.dumps(doc)


def _rename_step(doc: dict) -> None:
    for event in doc["traceEvents"]:
        if event.get("cat") == "user_annotation" and event.get("name") == "ProfilerStep#5":
            event["name"] = "ProfilerStep#99999999999"


def _nsys(work: Path, name: str, *statements: str) -> Path:
    """The mock nsys export with ``statements`` run on it."""
    out = work / "inputs" / f"{name}.sqlite"
    with gzip.open(NSYS) as f, out.open("wb") as g:
        shutil.copyfileobj(f, g)
    with sqlite3.connect(out) as con:
        for statement in statements:
            con.execute(statement)
    return out


_FIRST_KERNEL = "where rowid = (select min(rowid) from CUPTI_ACTIVITY_KIND_KERNEL)"


def inputs(work: Path) -> dict[str, Path]:
    """The hostile input files, by label."""
    d = work / "inputs"
    d.mkdir(parents=True)
    text = gzip.decompress(KINETO.read_bytes()).decode()
    files: dict[str, str | bytes] = {
        "truncated JSON (a tenth)": text[: len(text) // 10],
        "truncated JSON (half)": text[: len(text) // 2],
        "truncated JSON (all but one byte)": text[:-1],
        "invalid UTF-8 and control characters in names": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": '
        b'"bad\xff\xfename", "pid": 1, "tid": 1, "ts": 1, "dur": 1}, {"ph": "X", "cat": "cpu_op", "name": '
        b'"tab\x01here", "pid": 1, "tid": 1, "ts": 2, "dur": 1}]}',
        "duplicate events": _trace([_op("a", 10, 5), _op("a", 10, 5), _op("b", 20, 1)]),
        "negative and missing durations": _trace([_op("neg", 10, -5), _op("missing", 20, None), _op("ok", 30, 2)]),
        "kernels without launches, launches without kernels": _trace(
            [
                _op("k", 100, 5, cat="kernel", args={"correlation": 99, "device": 0, "stream": 7}),
                _op("cudaLaunchKernel", 200, 5, cat="cuda_runtime", args={"correlation": 1}),
            ]
        ),
        "a 2 MB name": _trace([_op("x" * 2_000_000, 10, 5)]),
        "ops nested 3000 deep": _trace([_op(f"op{i}", 10 + i, 100_000 - 2 * i) for i in range(3000)]),
        "unknown categories and args": _trace([_op("m", 10, 5, cat="brand_new", args={"nested": [1, 2]})]),
        "a trace with no GPU events": _trace([_op("cpu_only", 10, 5)]),
        "binary zeros": bytes(4096),
        "a corrupt SQLite header": b"SQLite format 3\x00" + bytes(range(256)) * 8,
        "unclosed JSON nesting": '{"traceEvents": [' + "[" * 10_000,
        "not JSON": "this is not json\n",
        "JSON that is not a trace": '{"config": {"lr": 0.1}}',
        "an empty file": "",
        "events without times": _trace([{"ph": "X", "name": "a", "pid": 1, "tid": 1}] * 3),
        "a non-object element among the events": _trace([17, "x", None, True, [], _op("kept", 10, 5)]),
        "args nested 100,000 arrays deep": '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "deep", "pid": 1, '
        '"tid": 1, "ts": 1, "dur": 1, "args": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}]}",
        "a 30-digit pid": _trace([{**_op("a", 10, 5), "pid": 10**29}, _op("b", 20, 5)]),
        "a ts or dur of 1e17 us": _trace([_op("far", 1e17, 5), _op("long", 10, 1e17), _op("ok", 20, 5)]),
        "Paddle summary Calls of 1e23, NaN, FLOPs of 1e40": (
            "---------------Operator Summary---------------\nTime unit: ms\n"
            "----------  ------  ------------------------------------  ------------------------------------  ------\n"
            "Name        Calls   CPU Total / Avg / Max / Min / Ratio(%)  "
            "GPU Total / Avg / Max / Min / Ratio(%)  FLOPs\n"
            "----------  ------  ------------------------------------  ------------------------------------  ------\n"
            "matmul      1e23    1.00 / 0.50 / 0.70 / 0.30 / 10.00     2.00 / 1.00 / 1.20 / 0.80 / 20.00     1e40\n"
            "conv2d      NaN     1.00 / 0.50 / 0.70 / 0.30 / 10.00     2.00 / 1.00 / 1.20 / 0.80 / 20.00     7\n"
        ),
        "a chrome baseTimeNanoseconds of 10^30": _kineto(lambda doc: doc.update(baseTimeNanoseconds=10**30)),
        "a ProfilerStep#99999999999": _kineto(_rename_step),
    }
    paths: dict[str, Path] = {}
    for k, (label, content) in enumerate(files.items()):
        suffix = ".txt" if "summary" in label else ".json"
        path = d / f"in{k}{suffix}"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        paths[label] = path
    paths["a .gz that is not gzip"] = d / "fake.json.gz"
    paths["a .gz that is not gzip"].write_text('{"traceEvents": []}')
    paths["corrupt gzip"] = d / "corrupt.json.gz"
    paths["corrupt gzip"].write_bytes(gzip.compress(text.encode())[:5000] + bytes(range(256)) * 4)
    paths["a directory passed as a file"] = d / "folder.json"
    paths["a directory passed as a file"].mkdir()
    (d / "empty_dir").mkdir()
    paths["a directory with no trace"] = d / "empty_dir"
    paths["a missing file"] = d / "missing.json"
    sqlite = d / "plain.sqlite"
    with sqlite3.connect(sqlite) as con:
        con.execute("create table t (x)")
    paths["an SQLite file that is not an nsys export"] = sqlite
    if NSYS.exists():
        paths["an nsys export with columns from a newer version"] = _nsys(
            work, "newer", "alter table CUPTI_ACTIVITY_KIND_KERNEL add column brandNew INTEGER"
        )
        cut = _nsys(work, "cut")
        cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
        paths["an nsys export cut short"] = cut
        paths["an nsys export with a row at rowid 2^62"] = _nsys(
            work,
            "rowid",
            "insert into CUPTI_ACTIVITY_KIND_KERNEL select * from CUPTI_ACTIVITY_KIND_KERNEL limit 1",
            "update CUPTI_ACTIVITY_KIND_KERNEL set rowid = 4611686018427387904 "
            "where rowid = (select max(rowid) from CUPTI_ACTIVITY_KIND_KERNEL)",
        )
        paths["a BLOB in StringIds.value"] = _nsys(
            work, "blob", "update StringIds set value = X'41FF42' where id = (select min(id) from StringIds)"
        )
        paths["a BLOB in a kernel's start"] = _nsys(
            work, "blobstart", f"update CUPTI_ACTIVITY_KIND_KERNEL set start = X'0102' {_FIRST_KERNEL}"
        )
        for label, value in (
            ("a REAL start of 8271798760.5", "start = 8271798760.5"),
            ("a start of 1e300", "start = 1e300"),
            ("an end of 1e300", '"end" = 1e300'),
        ):
            paths[f"an nsys export with {label}"] = _nsys(
                work, label.replace(" ", "_"), f"update CUPTI_ACTIVITY_KIND_KERNEL set {value} {_FIRST_KERNEL}"
            )
    folder = d / f"d{FF}"
    folder.mkdir()
    shutil.copy(SMALL, folder / f"t{FF}.json.gz")
    paths["a folder named with byte 0xFF"] = folder
    paths["a file named with byte 0xFF"] = folder / f"t{FF}.json.gz"
    return paths


def stores(work: Path) -> dict[str, Path]:
    """The stores the commands read: the base store (two runs) and damaged copies of it."""
    base = work / "stores" / "base"
    done = _traceq(["ingest", "-q", "--store", str(base), str(SMALL), str(KINETO)], timeout=600)
    if done.code != 0:
        raise SystemExit(f"cannot make the base store: {done.output}")
    runs = sorted((base / "runs").glob("run_id=*"))
    damages: dict[str, Callable[[Path], None]] = {
        "events.parquet deleted": lambda run: (run / "rank=0" / "events.parquet").unlink(),
        "rank=0/ deleted": lambda run: shutil.rmtree(run / "rank=0"),
        "events.parquet truncated": lambda run: _cut(run / "rank=0" / "events.parquet"),
        "steps.parquet replaced by garbage": lambda run: (run / "rank=0" / "steps.parquet").write_bytes(b"garbage"),
        "runs.parquet deleted": lambda run: (run / "runs.parquet").unlink(),
        "runs.parquet truncated": lambda run: _cut(run / "runs.parquet"),
        "events.parquet overwritten in the middle": lambda run: _overwrite_middle(run / "rank=0" / "events.parquet"),
    }
    made = {"base": base}
    for k, (label, damage) in enumerate(damages.items()):
        for which, chosen in (("one run", runs[-1:]), ("every run", runs)):
            copy = work / "stores" / f"damaged{k}_{which.replace(' ', '_')}"
            shutil.copytree(base, copy)
            for run in chosen:
                damage(copy / "runs" / run.name)
            made[f"{label} ({which})"] = copy
    if os.geteuid() == 0:
        for file in ("runs.parquet", "rank=0/events.parquet"):
            copy = work / "stores" / f"theirs_{file.replace('/', '_')}"
            shutil.copytree(base, copy)
            os.chown(copy / "runs" / runs[-1].name / file, NOBODY, NOBODY)
            (copy / "runs" / runs[-1].name / file).chmod(0o600)
            made[f"{file} another user's, mode 600"] = copy
    for label in ("renamed", "removed", "ascii"):
        shutil.copytree(base, work / "stores" / label)
        made[label] = work / "stores" / label
    return made


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _overwrite_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 3
    data[middle : middle + 4096] = bytes(range(256)) * 16
    path.write_bytes(bytes(data))


def attacks(work: Path, files: dict[str, Path], made: dict[str, Path]) -> list[Attack]:
    """Every attack command of the three rounds."""
    out = work / "out"
    out.mkdir()
    found: list[Attack] = []
    for label, path in files.items():
        found.append(Attack(_input_round(label), f"ingest {label}", ["ingest", "-q", "--store", "{store}", str(path)],
                            store=f"ingest:{label}"))  # fmt: skip
    found.append(
        Attack(
            2,
            "report --compare of a summary with a trace",
            ["report", "--compare", str(SUMMARY), str(KINETO), "--store", "{store}"],
            store="ingest:cmp",
        )
    )
    found.append(Attack(2, "sql -f /bin/ls", ["sql", "-f", "/bin/ls", "--store", "{store}"]))
    for statement in _SQL_WRITES:
        found.append(Attack(1, f"sql: {statement[:40]}", ["sql", statement, "--store", "{store}"]))
    found.append(Attack(1, "a run named like markup", ["runs", "rename", "hta_triton_example", "[/bold]", "--store",
                                                       "{store}"], store="renamed"))  # fmt: skip
    found.append(Attack(1, "runs of a run named like markup", ["runs", "--store", "{store}"], store="renamed"))
    for label, store in made.items():
        if "damaged" not in store.name and "theirs" not in store.name:
            continue
        round_ = 3 if "theirs" in store.name or "every_run" in store.name else 2
        user = "theirs" in store.name
        commands = [["runs"], ["export", "--to", "sqlite", str(out / f"{store.name}.db")]]
        if "every_run" not in store.name:
            commands += [
                ["sql", "select count(*) from events"],
                ["report"],
                ["check"],
                ["query", "gpu_busy"],
                ["report", "kineto_conformer_fp16_b4_2steps"],
                ["export", "--to", "perfetto", str(out / f"{store.name}.json")],
            ]
        for command in commands:
            found.append(Attack(round_, f"{' '.join(command[:2])} over {label}", [*command, "--store", "{store}"],
                                store=label, as_a_user=user))  # fmt: skip
    found += [
        Attack(2, "runs rm of a run not there", ["runs", "rm", "r000000000000", "--store", "{store}"], store="removed"),
        Attack(
            2, "runs rm of a whole run", ["runs", "rm", "hta_triton_example", "--store", "{store}"], store="removed"
        ),
        Attack(
            3,
            "runs rename to byte 0xFF",
            ["runs", "rename", "kineto_conformer_fp16_b4_2steps", f"n{FF}", "--store", "{store}"],
        ),
        Attack(3, "--steps-from with byte 0xFF", ["report", "--steps-from", f"a{FF}", "--store", "{store}"]),
        Attack(3, "SQL with byte 0xFF", ["sql", f"select '{FF}'", "--store", "{store}"]),
        Attack(3, "ingest --name with byte 0xFF", ["ingest", "--name", f"x{FF}", str(SMALL), "--store", "{store}"]),
        Attack(3, "a store path with byte 0xFF", ["ingest", str(SMALL), "--store", str(work / f"s{FF}")], store=""),
        Attack(
            3,
            "a non-ASCII rename under LC_ALL=C",
            ["runs", "rename", "hta_triton_example", "wörld", "--store", "{store}"],
            store="ascii",
            env=ASCII_TERMINAL,
        ),
        Attack(
            3,
            "runs of a non-ASCII name under LC_ALL=C",
            ["runs", "--store", "{store}"],
            store="ascii",
            env=ASCII_TERMINAL,
        ),
        Attack(
            3,
            "report of a non-ASCII name under LC_ALL=C",
            ["report", "wörld", "--store", "{store}"],
            store="ascii",
            env=ASCII_TERMINAL,
        ),
        Attack(3, "sql -f of a FIFO", ["sql", "-f", str(_fifo(work)), "--store", "{store}"]),
        Attack(3, "sql -f /dev/zero", ["sql", "-f", "/dev/zero", "--store", "{store}"]),
        Attack(
            3,
            "sql -f of a 2 MB file",
            ["sql", "-f", str(_file(work, "big.sql", "select 1;" + " " * (2 << 20))), "--store", "{store}"],
        ),
        Attack(3, "a query name of 10,000 characters", ["query", "a" * 10_000, "--store", "{store}"]),
        Attack(
            3,
            "a Requires: entry of 10,000 characters",
            ["sql", "-f", str(_file(work, "req.sql", f"-- Requires: _{'a' * 9999}\nselect 1")), "--store", "{store}"],
        ),
        Attack(
            3,
            "--memory-limit 99999999999999TB",
            ["sql", "select 1", "--memory-limit", "99999999999999TB", "--store", "{store}"],
        ),
        Attack(
            3,
            "export --to sqlite into a folder this user may not write",
            ["export", "--to", "sqlite", str(_theirs(work) / "runs.db"), "--store", "{store}"],
            as_a_user=True,
        ),
        Attack(3, "export --to sqlite into /proc", ["export", "--to", "sqlite", "/proc/runs.db", "--store", "{store}"]),
    ]
    return found


def _input_round(label: str) -> int:
    """The round of an input's attack."""
    if any(w in label for w in ("0xFF", "10^30", "99999999999", "1e300", "REAL")):
        return 3
    return 2 if label in _ROUND_2_INPUTS else 1


_ROUND_2_INPUTS = {
    "a non-object element among the events", "args nested 100,000 arrays deep", "a 30-digit pid",
    "a ts or dur of 1e17 us", "Paddle summary Calls of 1e23, NaN, FLOPs of 1e40",
    "an nsys export with a row at rowid 2^62", "a BLOB in StringIds.value", "a BLOB in a kernel's start",
}  # fmt: skip
_SQL_WRITES = (
    "COPY (SELECT 1) TO 'x.csv'",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO 'x.csv'",
    "EXPORT DATABASE 'exported'",
    "ATTACH 'other.db' AS o",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_csv('/etc/hostname')",
    "SELECT * FROM sniff_csv('/etc/hostname')",
    "SELECT * FROM glob('/*')",
    "SET enable_external_access = true",
    "RESET enable_external_access",
    "SET lock_configuration = false",
)


def _fifo(work: Path) -> Path:
    path = work / "query.fifo"
    os.mkfifo(path)
    return path


def _file(work: Path, name: str, text: str) -> Path:
    (work / name).write_text(text)
    return work / name


def _theirs(work: Path) -> Path:
    path = work / "theirs"
    path.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    path.chmod(0o755)
    return path


def _traceq(args: list[str], env: dict[str, str] | None = None, as_a_user: bool = False,
            timeout: float = 120) -> Ending:  # fmt: skip
    command = [*(AS_A_USER if as_a_user else []), sys.executable, "-m", "traceq", *args]
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout, cwd=ROOT,
                              env={**os.environ, **(env or {})})  # fmt: skip
    except subprocess.TimeoutExpired as e:
        return Ending(Attack(0, "", args), None, (e.stderr or b"").decode(errors="replace"))
    output = (done.stdout + done.stderr).decode(errors="replace")
    return Ending(Attack(0, "", args), done.returncode, output)


def run(attack: Attack, work: Path, made: dict[str, Path], timeout: float) -> Ending:
    """``attack`` run: on its store (a fresh one for each ingest), with its environment."""
    if attack.store.startswith("ingest:"):
        store = work / "stores" / f"fresh{abs(hash(attack.label))}"
    else:
        store = made.get(attack.store, made["base"])
    args = [a.replace("{store}", str(store)) for a in attack.args]
    ending = _traceq(args, attack.env, attack.as_a_user, timeout)
    ending.attack = attack
    return ending


def _can_drop_permissions() -> bool:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    return subprocess.run([*AS_A_USER, "true"], capture_output=True).returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="folder for the inputs and stores (default: a temporary one)")
    parser.add_argument("--jobs", type=int, default=2, help="commands run at once")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a command may take")
    parser.add_argument("--list", action="store_true", help="list the attacks and exit")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="traceq-attacks.") as tmp:
        work = options.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        files, made = inputs(work), stores(work)
        battery = attacks(work, files, made)
        if not NSYS.exists() or not SUMMARY.exists():
            print(f"left out the nsys exports' and the summary's attacks: no shared traces at {SHARED}")
            battery = [a for a in battery if str(SUMMARY) not in a.args]
        if not _can_drop_permissions():
            left = [a for a in battery if a.as_a_user]
            battery = [a for a in battery if not a.as_a_user]
            print(f"left out {len(left)} commands that need root and setpriv (another user's files)")
        if options.list:
            for a in battery:
                print(f"round {a.round}: {a.label}")
            return 0
        with ThreadPoolExecutor(options.jobs) as pool:
            endings = list(pool.map(lambda a: run(a, work, made, options.timeout), battery))
    counts = {"internal error": 0, "traceback": 0, "hang": 0, "other": 0}
    for ending in endings:
        problems = ending.problems()
        for p in problems:
            counts[p if p in counts else "other"] += 1
        if problems:
            tail = ending.output.strip().splitlines()[-1:] or [""]
            print(f"round {ending.attack.round}: {ending.attack.label}: {', '.join(problems)}: {tail[0][:300]}")
    by_round = {r: sum(a.round == r for a in battery) for r in (1, 2, 3)}
    print(f"rounds 1, 2, 3: {by_round[1]}, {by_round[2]}, {by_round[3]} commands")
    print(f"{len(endings)} commands: {counts['internal error']} internal errors, {counts['traceback']} tracebacks, "
          f"{counts['hang']} hangs, {counts['other']} other exit codes")  # fmt: skip
    return 1 if any(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
