"""Benchmark: nsys SQLite ingest speed, on a real export and on a synthetic one with millions of kernels.

The synthetic export is a copy of a real one whose kernel, launch (runtime API) and NVTX rows are
replicated N times, shifted in time and correlation id, so every kernel still has its launch and its op.
Prints rows/s of ``traceq ingest`` end to end (read, link, nest, write Parquet) next to a plain ``sqlite3`` fetch of the
kernel table alone (the usual way peers read exports), on the same file in the same run.

Each measurement runs in a fresh process, which reports its time and peak memory (VmHWM).

Usage: python benchmarks/nsys_ingest.py [REAL_EXPORT.sqlite[.gz]] [--copies N]
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
import time
from pathlib import Path

import traceq
import traceq.ingestion.ingest  # loaded before any clock starts (traceq names its API lazily)

DEFAULT = Path(__file__).resolve().parents[2] / "shared/traces/nsys/nsys_conformer_fp16_b4.sqlite.gz"


def plain_copy(src: Path, dst: Path) -> Path:
    opener = gzip.open if src.name.endswith(".gz") else open
    with opener(src, "rb") as f, dst.open("wb") as out:
        shutil.copyfileobj(f, out)
    return dst


def replicate(db: Path, copies: int) -> int:
    """Append ``copies`` shifted copies of the kernel, runtime and NVTX rows (the NVTX ranges too, as a
    longer capture has them for every step: without them a copy has fewer op ranges than kernels, and is
    not estimated without the profiler); return the kernel count."""
    con = sqlite3.connect(db)
    tables = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")
    spans = [con.execute(f"select min(start), max(coalesce(end, start)) from {t}").fetchone() for t in tables]
    (corr,) = con.execute("select max(correlationId) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    # each copy after the whole capture before it (the host's rows span more than the kernels': copies shifted
    # by the kernels' span alone overlapped on the host threads, their NVTX ranges crossing each other's)
    span = max(hi for _, hi in spans) - min(lo for lo, _ in spans) + 1
    for table in tables:
        cols = [r[1] for r in con.execute(f"pragma table_info({table})")]
        shifted = [f"{c} + :dt" if c in ("start", "end") else f"{c} + :dc" if c == "correlationId" else c for c in cols]
        sql = f"insert into {table} ({', '.join(cols)}) select {', '.join(shifted)} from {table} where start <= :hi"
        base_hi = con.execute(f"select max(start) from {table}").fetchone()[0]
        for i in range(1, copies + 1):
            con.execute(sql, {"dt": span * i, "dc": (corr + 1) * i, "hi": base_hi})
    con.commit()
    n = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    return n


def bench(db: Path, store: Path) -> dict[str, float]:
    t = time.perf_counter()
    result = traceq.ingest([db], store=store)
    elapsed = time.perf_counter() - t
    assert result["status"][0] == "ingested", result["error"][0]
    return {"seconds": elapsed, "peak_mb": peak_mb()}


def counts(store: Path) -> tuple[int, int]:
    """Kernels and events ingested into ``store``."""
    return traceq.sql("select count(*) filter (where kind = 'kernel') k, count(*) n from events", store).row(0)


def sqlite3_fetch(db: Path) -> dict[str, float]:
    t = time.perf_counter()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute(
        "select start, end, deviceId, streamId, correlationId, globalPid, demangledName from CUPTI_ACTIVITY_KIND_KERNEL"
    ).fetchall()
    con.close()
    del rows
    return {"seconds": time.perf_counter() - t, "peak_mb": peak_mb()}


def written_bytes() -> int:
    """Bytes this process has handed to ``write`` calls (``wchar`` of ``/proc/self/io``; 0 where there is none)."""
    try:
        lines = Path("/proc/self/io").read_text().splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in lines if line.startswith("wchar:")), 0)


def peak_mb() -> float:
    """This process's peak resident memory (VmHWM), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def missing_compiled(source: Path) -> list[str]:
    """The compiled extension modules of the ``traceq`` this process imports that ``source`` (a folder
    holding another ``traceq`` package) lacks, as paths inside the package: timed without them, that
    traceq runs its Python fallbacks (the nesting walk, the replay's visit), up to a third slower."""
    import importlib.machinery

    import traceq

    package = Path(traceq.__file__).parent
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]  # this interpreter's (.cpython-311-x86_64-linux-gnu.so)
    built = [p.relative_to(package) for p in package.rglob(f"*{suffix}")]
    return [str(p) for p in built if not (source / "traceq" / p).exists()]


def in_fresh_process(what: str, *paths: Path, script: str = __file__, source: Path | None = None) -> dict:
    """Run ``--one WHAT PATHS`` of ``script`` (a benchmark of this folder; this one by default) in a new
    process, with the ``traceq`` of ``source`` where given (a folder holding its ``traceq`` package, the
    query files as ``traceq/queries``); its printed measurement (the last line of its output, JSON). A
    ``source`` without this traceq's compiled parts is refused (:func:`missing_compiled`)."""
    env = None
    if source is not None:
        if missing := missing_compiled(source):
            raise SystemExit(f"{source}: without the compiled parts {', '.join(missing)}: its traceq would time "
                             "their Python fallbacks (build it, or copy them from this checkout)")  # fmt: skip
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, script, "--one", what, *map(str, paths)], capture_output=True, text=True,
                          env=env)  # fmt: skip
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--copies", type=int, default=60)
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)  # a measurement, in the process this starts
    args = ap.parse_args()
    if args.one:
        what, *paths = args.one
        print(json.dumps(bench(Path(paths[0]), Path(paths[1])) if what == "traceq" else sqlite3_fetch(Path(paths[0]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        real = plain_copy(args.export, tmp / "real.sqlite")
        synth = plain_copy(args.export, tmp / "synthetic.sqlite")
        replicate(synth, args.copies)
        print(f"{'file':<28}{'kernels':>10}{'rows':>11}{'traceq s':>10}{'peak MiB':>10}{'kernels/s':>12}"
              f"{'rows/s':>12}{'sqlite3 fetch s':>17}{'peak MiB':>10}{'kernels/s':>12}")  # fmt: skip
        for label, db in (("real " + args.export.name[:22], real), (f"synthetic x{args.copies + 1}", synth)):
            store = tmp / f"store_{db.stem}"
            ours = in_fresh_process("traceq", db, store)
            kernels, rows = counts(store)
            fetch = in_fresh_process("fetch", db)
            t, f = ours["seconds"], fetch["seconds"]
            print(f"{label:<28}{kernels:>10,}{rows:>11,}{t:>10.2f}{ours['peak_mb']:>10,.0f}{kernels / t:>12,.0f}"
                  f"{rows / t:>12,.0f}{f:>17.2f}{fetch['peak_mb']:>10,.0f}{kernels / f:>12,.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
