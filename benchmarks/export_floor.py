"""Benchmark: the exports against their floors, in one run.

Perfetto: ``traceq export RUN --to perfetto FILE.json`` of one trace (default the shared Kineto trace of
the Conformer at fp16, batch 4: 38.5 MB of JSON). Printed: the file's size against the trace's own
(target: no more than it), the idle-cause slices against the idle pieces of ``_idle_charges`` they are
merged from, their bytes and those of all analysis tracks, and the export's time.

SQLite: ``write_sqlite`` of every run of a store (``--store``; default a store built in a temporary
folder from ``--traces``) against its floor, the same rows written through ADBC's SQLite driver alone:
each table of the exported file read back (not timed) and appended to a new file with ``adbc_ingest``
in the batches the export writes (timed). Targets: the export's rows at the ADBC write rate (its time
at the floor's; the metrics it computes and the indexes it builds are the rest) and its peak memory
(VmHWM) under 600 MB. Each measurement runs in a fresh process; export and floor alternate
for ``--rounds`` rounds and medians are printed. ``--before SRC``: the export of another copy of traceq
as well (SRC holds its ``traceq`` package, the query files as ``traceq/queries``), in the same rounds,
printed beside this one's.

Usage: python benchmarks/export_floor.py [--trace T.json.gz] [--store DIR | --traces GLOB...] [--rounds 3]
       [--before SRC]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsys_ingest import in_fresh_process as _fresh
from nsys_ingest import peak_mb

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
DEFAULT_TRACE = SHARED / "kineto" / "conformer_fp16_b4.json.gz"
#: The traces of the default SQLite store: every shared and bundled trace with a timeline.
DEFAULT_TRACES = [
    str(SHARED / "kineto" / "*.json.gz"), str(SHARED / "nsys" / "*.sqlite.gz"),
    str(SHARED / "paddle-gpu-layout" / "*.json.gz"), str(SHARED / "hta" / "*" / "*.json.gz"),
    str(SHARED / "hta" / "critical_path" / "alexnet" / "*.json.gz"),
    str(SHARED / "paddle" / "cpu_paddle_3.3.1" / "*.paddle_trace.json.gz"),
    str(SAMPLES / "*.json.gz"), str(SAMPLES / "planted" / "*.json.gz"),
]  # fmt: skip


def perfetto(store: Path, out: Path) -> dict[str, object]:
    from traceq.export import export
    from traceq.querying.engine import Session
    from traceq.store import Store

    st = Store(store)
    (run_id,) = st.catalog()["run_id"].to_list()
    start = time.perf_counter()
    export(st, [run_id], "perfetto", out)
    seconds = time.perf_counter() - start
    with Session(st, [run_id], own_queries=True) as s:
        pieces = s.sql(
            f"-- Requires: _idle_charges\nSELECT count(*) FROM _idle_charges WHERE run_id = '{run_id}'"
        ).item()
    slices, idle_bytes, analysis_bytes = 0, 0, 0
    with out.open("rb") as f:
        for line in f:
            idle = b'"cat":"traceq.idle"' in line
            slices += idle
            idle_bytes += len(line) if idle else 0
            analysis_bytes += len(line) if b'"cat":"traceq.' in line else 0
    return {
        "seconds": seconds,
        "bytes": out.stat().st_size,
        "pieces": pieces,
        "slices": slices,
        "idle_bytes": idle_bytes,
        "analysis_bytes": analysis_bytes,
        "peak_mb": peak_mb(),
    }


def sqlite_export(store: Path, out: Path) -> dict[str, object]:
    from traceq.export.sqlite import write_sqlite
    from traceq.store import Store

    start = time.perf_counter()
    result = write_sqlite(Store(store), out)
    seconds = time.perf_counter() - start
    top = sorted(result.table_seconds.items(), key=lambda kv: -kv[1])[:5]
    return {"seconds": seconds, "rows": result.rows, "runs": result.tables["runs"], "peak_mb": peak_mb(),
            "top": top}  # fmt: skip


def sqlite_floor(exported: Path, out: Path) -> dict[str, object]:
    """The exported file's rows written again through ADBC, in the export's batch size and column types:
    seconds spent appending (the reads, through Python's sqlite3, not timed)."""
    import sqlite3

    import adbc_driver_sqlite.dbapi as adbc
    import pyarrow as pa

    from traceq.export.sqlite import BATCH_ROWS

    types = {"INTEGER": pa.int64(), "FLOAT": pa.float64(), "REAL": pa.float64(), "TEXT": pa.large_string()}
    src = sqlite3.connect(f"file:{exported}?mode=ro", uri=True)
    dst = adbc.connect(str(out), autocommit=True)
    write = dst.cursor()
    write.execute("PRAGMA journal_mode = OFF")
    write.execute("PRAGMA synchronous = OFF")
    tables = [
        r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    ]
    seconds, rows = 0.0, 0
    for table in tables:
        info = src.execute(f'PRAGMA table_info("{table}")').fetchall()
        schema = pa.schema([(c[1], types.get(c[2].upper(), pa.large_string())) for c in info])
        cursor = src.execute(f'SELECT * FROM "{table}"')
        while chunk := cursor.fetchmany(BATCH_ROWS):
            batch = pa.RecordBatch.from_arrays(
                [pa.array([r[i] for r in chunk], type=f.type) for i, f in enumerate(schema)], schema=schema
            )
            start = time.perf_counter()
            write.adbc_ingest(table, batch, mode="create_append")
            seconds += time.perf_counter() - start
            rows += batch.num_rows
    write.close()
    dst.close()
    src.close()
    return {"seconds": seconds, "rows": rows, "peak_mb": peak_mb()}


def in_fresh_process(what: str, *paths: Path, source: Path | None = None) -> dict:
    """A measurement in a new process, with the ``traceq`` of ``source`` where given."""
    return _fresh(what, *paths, script=__file__, source=source)


def ingest(paths: list[Path], store: Path) -> None:
    from traceq.ingestion.ingest import ingest as run

    run(paths, store=store)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--store", type=Path, help="the SQLite export's store (default: one built from --traces)")
    ap.add_argument("--traces", nargs="+", default=DEFAULT_TRACES)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip", choices=("perfetto", "sqlite"))
    ap.add_argument("--before", type=Path, help="another traceq's source (its SQLite export timed in the same rounds)")
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        what, *paths = args.one
        jobs = {"perfetto": perfetto, "sqlite": sqlite_export, "floor": sqlite_floor}
        print(json.dumps(jobs[what](*map(Path, paths))))
        return
    with tempfile.TemporaryDirectory(prefix="traceq-export-bench-") as tmp:
        work = Path(tmp)
        if args.skip != "perfetto":
            ingest([args.trace], work / "one")
            runs = [in_fresh_process("perfetto", work / "one", work / f"p{i}.json") for i in range(args.rounds)]
            with gzip.open(args.trace, "rb") as f:
                size = sum(len(chunk) for chunk in iter(lambda: f.read(1 << 20), b""))
            b = statistics.median(r["bytes"] for r in runs)
            print(f"perfetto: {args.trace.name} ({size / 1e6:.1f} MB of JSON), medians of {args.rounds} runs")
            print(f"  file {b / 1e6:.1f} MB, {b / size:.2f}x the trace (target at most 1x: "
                  f"{'met' if b <= size else 'not met'})")  # fmt: skip
            first = runs[0]
            print(f"  idle slices {first['slices']:,} from {first['pieces']:,} idle pieces "
                  f"({first['slices'] / max(first['pieces'], 1):.2f}x), {first['idle_bytes'] / 1e6:.1f} MB; all "
                  f"analysis tracks {first['analysis_bytes'] / 1e6:.1f} MB, the run's own events the rest")  # fmt: skip
            print(f"  {statistics.median(r['seconds'] for r in runs):.2f} s, "
                  f"{statistics.median(r['peak_mb'] for r in runs):,.0f} MiB")  # fmt: skip
        if args.skip != "sqlite":
            store = args.store
            if store is None:
                store = work / "many"
                ingest([Path(p) for pattern in args.traces for p in sorted(glob.glob(pattern))], store)
            exports, floors, before = [], [], []
            for i in range(args.rounds):  # alternating: export, floor, (the other traceq's export), export, ...
                exports.append(in_fresh_process("sqlite", store, work / f"s{i}.db"))
                floors.append(in_fresh_process("floor", work / f"s{i}.db", work / f"f{i}.db"))
                if args.before:
                    before.append(in_fresh_process("sqlite", store, work / f"b{i}.db", source=args.before))
                for p in (work / f"s{i}.db", work / f"f{i}.db", work / f"b{i}.db"):
                    p.unlink(missing_ok=True)
            t = statistics.median(r["seconds"] for r in exports)
            f = statistics.median(r["seconds"] for r in floors)
            peak = statistics.median(r["peak_mb"] for r in exports)
            rows = exports[0]["rows"]
            print(f"sqlite: {exports[0]['runs']} runs, {rows:,} rows; medians of {args.rounds} alternating rounds")
            print(f"  {'ADBC appends of the same rows (floor)':<40}{f:>8.2f} s{rows / f:>12,.0f} rows/s"
                  f"{statistics.median(r['peak_mb'] for r in floors):>8,.0f} MiB")  # fmt: skip
            print(f"  {'traceq write_sqlite':<40}{t:>8.2f} s{rows / t:>12,.0f} rows/s{peak:>8,.0f} MiB   "
                  f"{t / f:.1f}x the floor")  # fmt: skip
            if before:
                b = statistics.median(r["seconds"] for r in before)
                bpeak = statistics.median(r["peak_mb"] for r in before)
                print(f"  {'the same, ' + args.before.name + ' (before)':<40}{b:>8.2f} s{rows / b:>12,.0f} rows/s"
                      f"{bpeak:>8,.0f} MiB   {b / f:.1f}x the floor")  # fmt: skip
            print("  slowest tables (first round): " + ", ".join(f"{n} {s:.1f} s" for n, s in exports[0]["top"]))
            print("targets:")
            for target, value, met in (
                ("the ADBC write rate (1x the floor)", f"{t / f:.1f}x", t <= f),
                ("peak memory under 600 MB", f"{peak * 2**20 / 1e6:,.0f} MB", peak * 2**20 < 600e6),
            ):
                print(f"  {target:<40}{value:<12}{'met' if met else 'not met'}")


if __name__ == "__main__":
    main()
