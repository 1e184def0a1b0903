"""Benchmark: nsys ingest against its read floor, the same tables read through ADBC into Arrow, in one run.

The floor: every table read the ingest makes (kernels, copies, sets, runtime calls, NVTX ranges and the string
table, the columns it selects), read whole through the ADBC SQLite driver into Arrow tables, on one
connection, nothing else done. The ingest: ``traceq.ingest`` of the same export into a new store (one process,
its stages timed from the progress it reports: reading and shaping, the model, Parquet, the stored report
metrics and, from 2 M events per rank, the stored step estimated without the profiler). Each measurement runs
in a fresh process, in alternating rounds; prints rows per second of both (rows: the table rows the reads
return), the ratio, each ingest stage's share, and the peak memory (VmHWM) of each.

The export: a real one (``nsys_ingest.py``'s default) replicated ``--copies`` times (its kernel, runtime and
NVTX rows shifted in time, correlation ids too, as ``nsys_ingest.py`` builds its synthetic export).

``--before SRC`` times another traceq's ingest (a folder holding its ``traceq`` package, the query files as
``traceq/queries``) in the same rounds, after this one's, with its temporary writes (bytes written besides
the store: spilled chunks, model buckets, DuckDB's spills).

Usage: python benchmarks/nsys_floor.py [EXPORT.sqlite[.gz]] [--copies 9] [--rounds 2] [--work DIR] [--before SRC]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsys_ingest import DEFAULT, peak_mb, plain_copy, replicate, written_bytes
from nsys_ingest import in_fresh_process as _fresh


def floor(db: Path) -> dict[str, float]:
    """The ingest's table reads, whole, through ADBC into Arrow: seconds and rows."""
    import adbc_driver_sqlite.dbapi as adbc

    from traceq.readers import nsys

    export = nsys._Export(db, db)
    reads = {kind: r for kind, t in nsys._GPU_TABLES.items() if (r := nsys._gpu_read(export, kind, t)) is not None}
    reads |= {name: r for name, plan in (("runtime", nsys._runtime_read), ("nvtx", nsys._nvtx_read))
              if (r := plan(export)) is not None}  # fmt: skip
    reads["strings"] = nsys._Read("StringIds", "id, value")
    export.close()
    start = time.perf_counter()
    rows = 0
    con = adbc.connect(f"file:{db}?mode=ro")
    try:
        for read in reads.values():
            cur = con.cursor()
            cur.execute(read.sql())
            rows += cur.fetch_arrow_table().num_rows
            cur.close()
    finally:
        con.close()
    return {"seconds": time.perf_counter() - start, "rows": rows, "peak_mb": peak_mb()}


class _Stages:
    """The stages an ingest reports, timed (reading and shaping: until the first other stage)."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float]] = [("reading and shaping", time.perf_counter())]

    def stage(self, text: str) -> None:
        name = ("stored report metrics" if text.startswith("storing the report metrics")
                else "stored estimate" if text.startswith("storing the step estimated")
                else "reading and shaping" if text.startswith("reading the export")
                else "model" if text.startswith(("building the model", "classifying")) else text)  # fmt: skip
        if name != self.marks[-1][0]:
            self.marks.append((name, time.perf_counter()))


def ingest(db: Path, store: Path) -> dict[str, object]:
    from traceq.api import ingest as run  # what `traceq ingest` runs; imported before the clock starts

    stages = _Stages()
    start = time.perf_counter()
    result = run([db], store=store, jobs=1, progress=lambda label, size: _Progress(stages))
    end = time.perf_counter()
    assert result["status"][0] == "ingested", result["error"][0]
    marks = [*stages.marks, ("end", end)]
    spent: dict[str, float] = {}
    for (name, t), (_, t_next) in itertools.pairwise(marks):
        spent[name] = spent.get(name, 0.0) + t_next - t
    store_bytes = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    return {"seconds": end - start, "stages": spent, "peak_mb": peak_mb(), "written": written_bytes(),
            "store_bytes": store_bytes}  # fmt: skip


class _Progress:
    """One file's progress: bytes are ignored, stages go to the timer."""

    def __init__(self, stages: _Stages) -> None:
        self.stages = stages

    def __call__(self, n: int) -> None:
        pass

    def stage(self, text: str) -> None:
        self.stages.stage(text)


def in_fresh_process(what: str, *paths: Path, source: Path | None = None) -> dict:
    return _fresh(what, *paths, script=__file__, source=source)


def _spread(runs: list[dict], key: str = "seconds") -> str:
    """The median of ``key`` over ``runs`` and each run's value."""
    return f"{statistics.median(r[key] for r in runs):.2f} s ({' / '.join(f'{r[key]:.2f}' for r in runs)})"


def _temporary(runs: list[dict]) -> float:
    """Bytes written besides the store (median over ``runs``)."""
    return statistics.median(r["written"] - r["store_bytes"] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--copies", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", type=Path, help="keep the replicated export here (default: a temporary folder)")
    ap.add_argument("--before", type=Path, help="another traceq's source (its ingest timed in the same rounds)")
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        what, *paths = args.one
        print(json.dumps(floor(Path(paths[0])) if what == "floor" else ingest(Path(paths[0]), Path(paths[1]))))
        return
    with tempfile.TemporaryDirectory(prefix="traceq-nsys-floor-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        db = work / f"{args.export.name.split('.')[0]}_x{args.copies + 1}.sqlite"
        if not db.exists():
            replicate(plain_copy(args.export, db), args.copies)
        floors, ingests, before = [], [], []
        for i in range(args.rounds):  # alternating: floor, ingest, the ingest before
            floors.append(in_fresh_process("floor", db))
            ingests.append(in_fresh_process("ingest", db, Path(tmp) / f"store{i}"))
            shutil.rmtree(Path(tmp) / f"store{i}")
            if args.before:
                before.append(in_fresh_process("ingest", db, Path(tmp) / f"before{i}", source=args.before))
                shutil.rmtree(Path(tmp) / f"before{i}")
        size = db.stat().st_size
    rows = floors[0]["rows"]
    f = statistics.median(r["seconds"] for r in floors)
    t = statistics.median(r["seconds"] for r in ingests)
    print(f"export: {args.export.name} x{args.copies + 1}, {size / 1e6:,.0f} MB, {rows:,} table rows; medians of "
          f"{args.rounds} alternating rounds (each run's value in brackets)")  # fmt: skip
    print(f"{'ADBC read into Arrow (floor)':<32}{_spread(floors)}{rows / f:>12,.0f} rows/s"
          f"{statistics.median(r['peak_mb'] for r in floors):>8,.0f} MiB")  # fmt: skip
    print(f"{'traceq ingest':<32}{_spread(ingests)}{rows / t:>12,.0f} rows/s"
          f"{statistics.median(r['peak_mb'] for r in ingests):>8,.0f} MiB   {t / f:.1f}x the floor")  # fmt: skip
    for name in ingests[0]["stages"]:
        s = statistics.median(r["stages"].get(name, 0.0) for r in ingests)
        was = f"   before: {statistics.median(r['stages'].get(name, 0.0) for r in before):.2f} s" if before else ""
        print(f"  {name:<30}{s:>8.2f} s  ({s / t:.0%}){was}")
    peak = statistics.median(r["peak_mb"] for r in ingests) * 2**20
    store = statistics.median(r["store_bytes"] for r in ingests)
    temporary = _temporary(ingests)
    if before:
        b = statistics.median(r["seconds"] for r in before)
        print(f"{'before (' + args.before.name + ')':<32}{_spread(before)}{rows / b:>12,.0f} rows/s"
              f"{statistics.median(r['peak_mb'] for r in before):>8,.0f} MiB   {b / f:.1f}x the floor; "
              f"this one {t / b:.2f}x it")  # fmt: skip
        print(f"  temporary writes before: {_temporary(before) / 1e6:,.0f} MB, now {temporary / 1e6:,.0f} MB")
    print("targets:")
    for target, value, met in (
        ("at least 1,000,000 rows/s end to end", f"{rows / t:,.0f} rows/s", rows / t >= 1e6),
        ("within 2x the floor", f"{t / f:.1f}x", t / f <= 2),
        ("peak memory under 1 GB", f"{peak / 1e9:.2f} GB", peak < 1e9),
        (
            "temporary writes under 2x the input",
            f"{temporary / 1e6:,.0f} MB for a {size / 1e6:,.0f} MB export ({temporary / size:.1f}x)",
            temporary < 2 * size,
        ),
        (
            "temporary writes at most 2x the store",
            f"{temporary / 1e6:,.0f} MB for a {store / 1e6:,.0f} MB store ({temporary / store:.1f}x)",
            temporary <= 2 * store,
        ),
    ):
        print(f"  {target:<40}{value:<40}{'met' if met else 'not met'}")


if __name__ == "__main__":
    main()
