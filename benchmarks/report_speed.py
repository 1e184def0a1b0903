"""Benchmark: ``traceq report`` and ``report --compare`` on stored runs of ~500 MB traces.

Builds the FP32 and FP16 AMP batch-64 Conformer traces (real H200 traces) scaled up by replicating
their steps (``replicate_trace.py``) until each holds about ``--target-mb`` of JSON, ingests both, then
times in fresh processes: the report of one run, the comparison of the two, and ad-hoc SQL scans. Each
line gives wall time (the whole command, Python start-up included) and peak memory (VmHWM).

Usage: python benchmarks/report_speed.py [--target-mb 500] [--work DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replicate_trace import replicate

ROOT = Path(__file__).resolve().parents[1]
KINETO = ROOT.parent / "shared/traces/kineto"

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from traceq.cli import app
from traceq.ingestion.task import peak_rss_bytes
sys.argv = ["traceq", *json.loads(sys.argv[1])]
try:
    app(standalone_mode=False)
finally:
    print(json.dumps({"wall": time.perf_counter() - t0, "peak": peak_rss_bytes()}), file=sys.stderr)
"""


def timed(*args: str) -> dict:
    """Run the traceq CLI in a fresh process; wall time includes interpreter start."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"traceq {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    stats = json.loads(proc.stderr.strip().splitlines()[-1])
    return {"wall": wall, "peak": stats["peak"], "stdout": proc.stdout}


def raw_mb(path: Path) -> float:
    with gzip.open(path, "rb") as f:
        return sum(len(b) for b in iter(lambda: f.read(1 << 24), b"")) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target-mb", type=float, default=500)
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="traceq-report-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    traces = []
    for mode in ("fp32", "fp16"):
        source = KINETO / f"conformer_{mode}_b64.json.gz"
        one = work / f"{mode}_x1.json.gz"
        if not one.exists():
            replicate(source, one, 1)
        copies = max(1, round(a.target_mb / raw_mb(one)))
        path = work / f"conformer_{mode}_b64_x{copies}.json.gz"
        if not path.exists():
            replicate(source, path, copies)
        traces.append(path)
        print(f"{path.name}: {raw_mb(path):.0f} MB of JSON ({copies} copies of the 3 profiled steps)")
    store = work / "store"
    if not store.exists():
        for path in traces:
            r = timed("ingest", str(path), "--store", str(store), "--quiet", "--jobs", "1")
            print(f"ingest {path.name}: {r['wall']:.1f} s, peak {r['peak'] / 1e6:.0f} MB")
    names = [p.name.split(".")[0] for p in traces]
    print(f"\n{'command':<58}{'wall s':>8}{'peak MB':>9}")
    for label, args in (
        (f"report {names[1]}", ("report", names[1], "--format", "json")),
        (f"report --compare {names[0]} {names[1]}", ("report", "--compare", names[0], names[1], "--format", "json")),
        ("sql: kernels by name (2 columns of events)",
         ("sql", "select name, count(*), sum(dur_ns) from events where kind = 'kernel' group by name", "--format",
          "csv")),
        ("sql: events per run and kind", ("sql", "select run_id, kind, count(*) from events group by all",
                                          "--format", "csv")),
    ):  # fmt: skip
        r = timed(*args, "--store", str(store))
        print(f"{label[:57]:<58}{r['wall']:>8.2f}{r['peak'] / 1e6:>9.0f}")
    events = timed("sql", "select count(*) n from events", "--store", str(store), "--format", "json")
    print(f"\nstore: {json.loads(events['stdout'])[0]['n']:,} events in 2 runs")


if __name__ == "__main__":
    main()
