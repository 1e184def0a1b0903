"""Benchmark: ``traceq report --compare`` of a run with stored metrics and one without, against the sum of
the two runs' reports, in one run.

Two real H200 Conformer traces (FP32 and FP16 AMP, batch 64), replicated in time until each run holds at
least ``--min-events`` events (enough for its metrics to be stored at ingest), are ingested; then the
stored metrics of the FP32 run are removed (as a store written by an older traceq would hold it). Each
round runs, in fresh processes, the report of each run and the comparison; the comparison should cost no
more than the two reports together (it computes only the metrics the FP32 run lacks). Prints medians
and the ratio of each round's comparison to its two reports.

Usage: python benchmarks/compare_mixed.py [--rounds 5] [--min-events 400000] [--work DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replicate_trace import replicate

ROOT = Path(__file__).resolve().parents[1]
KINETO = ROOT.parent / "shared/traces/kineto"


def events_in(path: Path) -> int:
    with gzip.open(path, "rb") as f:
        doc = json.load(f)
    return len(doc["traceEvents"] if isinstance(doc, dict) else doc)


def traceq(*args: str, store: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "traceq", *args, "--store", str(store), "--format", "json"],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"traceq {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-events", type=int, default=400_000)
    ap.add_argument("--work", type=Path, help="keep the traces and store here (reused when present)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="traceq-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "store"
    names = {"fp32": "conformer_fp32_b64", "fp16": "conformer_fp16_b64"}
    if not store.exists():
        for label, name in names.items():
            source = KINETO / f"{name}.json.gz"
            copies = -(-args.min_events // events_in(source))
            big = work / f"{label}_x{copies}.json.gz"
            replicate(source, big, copies)
            subprocess.run([sys.executable, "-m", "traceq", "ingest", str(big), "--name", label, "--store", str(store),
                            "-q"], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        listed = subprocess.run([sys.executable, "-m", "traceq", "runs", "--store", str(store), "--format", "json"],
                                capture_output=True, text=True, check=True).stdout  # fmt: skip
        fp32 = next(r["run_id"] for r in json.loads(listed) if r["name"] == "fp32")
        for metrics in (store / "runs" / f"run_id={fp32}").glob("rank=*/metrics"):
            shutil.rmtree(metrics)
    rounds: dict[str, list[float]] = {"report fp16 (stored metrics)": [], "report fp32 (no stored metrics)": [],
                                      "report --compare fp32 fp16": []}  # fmt: skip
    for _ in range(args.rounds):
        rounds["report fp16 (stored metrics)"].append(traceq("report", "fp16", store=store))
        rounds["report fp32 (no stored metrics)"].append(traceq("report", "fp32", store=store))
        rounds["report --compare fp32 fp16"].append(traceq("report", "--compare", "fp32", "fp16", store=store))
    for name, ts in rounds.items():
        print(f"{name:<36}{statistics.median(ts):>8.2f} s  ({min(ts):.2f}-{max(ts):.2f})")
    a, b, c = rounds.values()
    ratios = [z / (x + y) for x, y, z in zip(a, b, c, strict=True)]
    print(f"{'sum of the two reports':<36}{statistics.median([x + y for x, y in zip(a, b, strict=True)]):>8.2f} s")
    print(f"comparison / sum of its two reports, per round: median {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f})")  # fmt: skip
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
