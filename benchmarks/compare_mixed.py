"""Benchmark: ``traceq report --compare`` of a run with stored metrics and one without, against the sum of
the two runs' reports, in one run.

Two real H200 Conformer traces (FP32 and FP16 AMP, batch 64), replicated in time until each run holds at
least ``--min-events`` events (enough for its metrics to be stored at ingest), are ingested, the FP32
run without its metrics stored (as a store written by an older traceq holds it). Each
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
            # FP32 as a store written by an older traceq holds it: its metrics not stored
            stored = (
                "" if label == "fp16" else "from traceq.ingestion import metrics; metrics.STORE_MIN_EVENTS = 10**12; "
            )
            code = f"import sys, traceq; {stored}traceq.ingest([sys.argv[1]], store=sys.argv[2], name=sys.argv[3])"
            subprocess.run([sys.executable, "-c", code, str(big), str(store), label], check=True)
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
    verdict = "met" if statistics.median(ratios) <= 1 else "not met"
    print(f"target: the comparison costs no more than its two reports: {verdict}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
