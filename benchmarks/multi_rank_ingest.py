"""Benchmark: ingest of a many-rank job, one worker vs two vs Ray tasks, and cost per rank as ranks grow.

The job is built from one real rank trace (a DDP rank of ``sample_traces/ddp`` by default): copy r gets
``distributedInfo.rank = r`` and ``world_size = N``, so every file is distinct and declares its rank.
Each configuration runs in a fresh process (``traceq.ingest`` into a new store) and reports wall time,
ranks per second, the speed-up over one worker, the time the workers spent on the files (the sum over
files of reading and writing each: it grows where workers slow each other down), and the peak memory
(VmHWM) of every process that read files: the coordinator and each worker.

Usage: python benchmarks/multi_rank_ingest.py [--source TRACE] [--ranks 8,16,32,64] [--jobs 1,2,...]
       [--no-ray]

``--jobs`` lists the worker counts compared (default: 1, 2 and every core where there are more).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "sample_traces/ddp/fp16/ddp_fp16_rank0.json.gz"

_CHILD = """
import json, sys, time
import traceq
from traceq.ingestion.task import peak_rss_bytes
files, store, jobs, executor = json.loads(sys.argv[1])
start = time.perf_counter()
rows = traceq.ingest(files, store=store, name="job", jobs=jobs, executor=executor)
wall = time.perf_counter() - start
assert rows["status"].to_list() == ["ingested"] * len(files), rows
import polars as pl
workers = rows.group_by("worker").agg(pl.col("peak_rss_bytes").max().alias("peak"), pl.len().alias("files"))
print(json.dumps({"wall": wall, "coordinator_peak": peak_rss_bytes(), "workers": workers.to_dicts(),
                  "events": int(rows["events"].sum()), "file_seconds": float(rows["seconds"].sum())}))
"""


def build_job(source: Path, ranks: int, folder: Path) -> list[Path]:
    """``ranks`` copies of ``source``, each declaring its own rank."""
    with gzip.open(source, "rb") as f:
        doc = json.load(f)
    files = []
    for r in range(ranks):
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": r, "world_size": ranks}
        path = folder / f"rank{r}.json.gz"
        path.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
        files.append(path)
    return files


def run(files: list[Path], store: Path, jobs: int | None, executor: str) -> dict:
    arg = json.dumps([[str(f) for f in files], str(store), jobs, executor])
    proc = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"benchmark child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", type=Path, default=DEFAULT)
    ap.add_argument("--ranks", default="8,16,32,64")
    ap.add_argument("--jobs", default=None, help="worker counts to compare (default: 1, 2, all cores)")
    ap.add_argument("--no-ray", action="store_true")
    a = ap.parse_args()
    sizes = [int(x) for x in a.ranks.split(",")]
    cores = len(os.sched_getaffinity(0))
    jobs_list = [int(x) for x in a.jobs.split(",")] if a.jobs else sorted({1, 2, cores})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "job"
        folder.mkdir()
        t0 = time.perf_counter()
        files = build_job(a.source, max(sizes), folder)
        mb = sum(f.stat().st_size for f in files) / 1e6
        took = time.perf_counter() - t0
        print(f"job: {len(files)} ranks from {a.source.name} ({mb:.1f} MB gzip) built in {took:.1f} s")
        configs = [("local", j) for j in jobs_list] + ([] if a.no_ray else [("ray", None)])
        print(f"\n{len(files)} ranks on {cores} cores: one run, each configuration in a fresh process and store")
        print(f"{'executor':<22}{'wall s':>8}{'ranks/s':>9}{'speed-up':>10}{'file s (sum)':>14}"
              f"{'coord. peak MB':>16}{'worker peak MB (max)':>22}{'workers':>9}")  # fmt: skip
        base = None
        for executor, jobs in configs:
            r = run(files, Path(tmp) / f"store-{executor}-{jobs}", jobs, executor)
            base = base or r["wall"]
            label = f"{executor} jobs={jobs}" if executor == "local" else "ray (local instance)"
            peaks = [w["peak"] for w in r["workers"]]
            print(f"{label:<22}{r['wall']:>8.2f}{len(files) / r['wall']:>9.1f}{base / r['wall']:>10.2f}"
                  f"{r['file_seconds']:>14.2f}{r['coordinator_peak'] / 1e6:>16.0f}{max(peaks) / 1e6:>22.0f}"
                  f"{len(peaks):>9}")  # fmt: skip
        most = max(jobs_list)
        print(f"\ncost per rank as ranks grow (local, jobs={most})")
        print(f"{'ranks':>6}{'wall s':>9}{'ms/rank':>9}{'events':>12}{'worker peak MB (max)':>22}")
        for n in sizes:
            r = run(files[:n], Path(tmp) / f"store-scale-{n}", most, "local")
            peaks = [w["peak"] for w in r["workers"]]
            print(f"{n:>6}{r['wall']:>9.2f}{r['wall'] / n * 1e3:>9.0f}{r['events']:>12,}{max(peaks) / 1e6:>22.0f}")


if __name__ == "__main__":
    main()
