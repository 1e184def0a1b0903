"""Benchmark: how long each interactive command takes, whole process, against a bare ``python -c pass``,
in one run.

A store is made in a temporary folder from the bundled real Kineto sample (FP16 AMP, batch 4), with its
report metrics, diagnosis and estimate without the profiler stored at ingest as the largest runs' are,
and so the report itself (``report.json``, shown by ``traceq report RUN`` as table or JSON); a copy of
that store without the report's document is where the report is computed from the stored results. Then,
in rounds,
each command runs in a fresh process (the ``traceq`` script of this interpreter's environment), its
output discarded, alternating with ``python -c pass``; a command's cost is its wall time minus the
bare interpreter's in the same round. Prints the median and best of each, its floor (what importing the
libraries the command cannot do without, and making the DuckDB database a query runs in, costs over the bare
interpreter, measured in the same rounds),
the target (at most ``--target`` seconds over the bare interpreter) met or not, and what each
third-party library the commands may load costs to import alone (what dominates those that miss).

Usage: python benchmarks/command_latency.py [--rounds 9] [--target 0.15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "kineto_conformer_fp16_b4_2steps.json.gz"
TRACEQ = Path(sys.executable).with_name("traceq")
#: The commands timed (the issue's four first); RUN is the stored run's name.
COMMANDS = {
    "traceq --help": ["--help"],
    "traceq runs": ["runs"],
    'traceq sql "select 1"': ["sql", "select 1"],
    "traceq report RUN (report stored)": ["report", "RUN"],
    "traceq report RUN --format json": ["report", "RUN", "--format", "json"],
    "traceq report RUN (computed)": ["report", "RUN", "--store", "COMPUTED"],
    "traceq version": ["version"],
    "traceq queries": ["queries"],
}
LIBRARIES = ("typer", "rich.table", "polars", "duckdb", "pyarrow.parquet")
#: What each command cannot do without (its floor): the CLI's parser, rich's tables for a table, DuckDB and
#: a database of it to run SQL in; a report stored as printed, neither more (twenty-fourth round), and one
#: computed from the stored results the analysis' Polars frames (without DuckDB: sixteenth round).
FLOORS = {
    "traceq --help": ("typer",),
    "traceq runs": ("typer", "rich.table"),
    'traceq sql "select 1"': ("typer", "rich.table", "duckdb", "a DuckDB database"),
    "traceq report RUN (report stored)": ("typer", "rich.table"),
    "traceq report RUN --format json": ("typer",),
    "traceq report RUN (computed)": ("typer", "rich.table", "polars"),
    "traceq version": ("typer",),
    "traceq queries": ("typer", "rich.table"),
}
#: The code of a floor's part that is no library: the in-memory database every query runs in (about 20 ms
#: for the first one a process makes).
MADE = {"a DuckDB database": "duckdb.connect(':memory:')"}


def floor_code(parts: tuple[str, ...]) -> str:
    """The program that does only what a command cannot do without (its ``FLOORS`` entry)."""
    libraries = [p for p in parts if p not in MADE]
    return "; ".join(["import " + ", ".join(libraries), *(MADE[p] for p in parts if p in MADE)])


def wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def make_store(store: Path) -> str:
    """Ingest the sample into ``store`` with its report metrics stored; return the run's name."""
    code = (
        "import sys, traceq; from traceq.ingestion import metrics; "
        "metrics.STORE_MIN_EVENTS = metrics.DIAGNOSIS_MIN_EVENTS = 0; "
        "traceq.ingest([sys.argv[1]], store=sys.argv[2], jobs=1, name='bench')"
    )
    subprocess.run([sys.executable, "-c", code, str(SAMPLE), str(store)], check=True)
    stored = list(store.glob("runs/run_id=*/rank=*/metrics"))
    if not stored or not list(store.glob("runs/run_id=*/report.json")):
        sys.exit("the run's metrics or report were not stored; the report would compute them")
    return "bench"


def without_documents(store: Path, copy: Path) -> Path:
    """A copy of ``store`` without its runs' stored reports: there the report is computed."""
    shutil.copytree(store, copy)
    for document in copy.glob("runs/run_id=*/report.json"):
        document.unlink()
    return copy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--target", type=float, default=0.15, help="seconds over the bare interpreter")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        run = make_store(store)
        computed = str(without_documents(store, Path(tmp) / "computed"))

        def command(argv: list[str]) -> list[str]:  # the run's name and the second store filled in
            return [str(TRACEQ), *({"RUN": run, "COMPUTED": computed}.get(a, a) for a in argv)]

        # as a user's: bytecode cached (an environment that sets PYTHONDONTWRITEBYTECODE compiles every module
        # of traceq's at every start, about 0.13 s for a report)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"TRACEQ_STORE": str(store)}
        bare_argv = [sys.executable, "-c", "pass"]
        times: dict[str, list[float]] = {name: [] for name in ("python -c pass", *COMMANDS)}
        overs: dict[str, list[float]] = {name: [] for name in COMMANDS}
        floors: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for argv in COMMANDS.values():  # once each, so that no round pays for the first read of a file
            wall(command(argv), env)
        for _ in range(args.rounds):
            for name, argv in COMMANDS.items():
                bare = wall(bare_argv, env)
                took = wall(command(argv), env)
                times["python -c pass"].append(bare)
                times[name].append(took)
                overs[name].append(took - bare)
                floor = wall([sys.executable, "-c", floor_code(FLOORS[name])], env)
                floors[name].append(floor - wall(bare_argv, env))
        imports = {lib: [] for lib in LIBRARIES}
        for _ in range(args.rounds):
            for lib in LIBRARIES:
                imports[lib].append(wall([sys.executable, "-c", f"import {lib}"], env) - wall(bare_argv, env))

    print(f"{args.rounds} rounds, each command alternating with `python -c pass` in fresh processes")
    print(f"{'command':<38} {'median':>8} {'best':>8} {'over bare (median)':>19} {'floor':>8}  "
          f"target +{args.target:.2f} s  (floor: what it needs, over bare, median)")  # fmt: skip
    bare = statistics.median(times["python -c pass"])
    print(f"{'python -c pass':<38} {bare:>7.3f}s {min(times['python -c pass']):>7.3f}s")
    for name in COMMANDS:
        over, floor = statistics.median(overs[name]), statistics.median(floors[name])
        verdict = "met" if over <= args.target else f"not met ({over / args.target:.1f}x)"
        print(f"{name:<38} {statistics.median(times[name]):>7.3f}s {min(times[name]):>7.3f}s "
              f"{over:>+18.3f}s {floor:>+7.3f}s  {verdict:<17} ({', '.join(FLOORS[name])})")  # fmt: skip
    print("import alone, over the bare interpreter (median): " + ", ".join(
        f"{lib} {statistics.median(v):+.3f}s" for lib, v in imports.items()))  # fmt: skip


if __name__ == "__main__":
    main()
