"""Benchmark: chrome-trace ingest against its decode floor, gunzip and the C decoder over the same bytes.

The floor: ``read_chrome_trace`` of the file (what the ingest's first stage does: gunzip on its reading
thread, the C decoder on its threads, the raw event columns held in memory), nothing else. The ingest:
``traceq.ingest`` of the same file into a new store, its stages timed from the progress it reports (decoding
until the first other stage, the model, Parquet, the stored report metrics and, from 2 M events per rank, the
stored step estimated without the profiler). Source: HTA's V100 DDP trace (53.7 MB), and copies of its steps
(``replicate_trace.py``) for ``--copies`` above 1. Each measurement runs in a fresh process; floor and ingest
alternate for ``--rounds`` rounds; medians are printed, with each ingest stage's share and the target (the
ingest within 2x of the floor). ``--before SRC``: the ingest of another copy of traceq as well (SRC holds its
``traceq`` package, the query files as ``traceq/queries``), in the same rounds after this one's, printed
beside it.

Usage: python benchmarks/chrome_floor.py [--source T.json.gz] [--copies 1,8,16] [--rounds 2] [--work DIR]
       [--before SRC]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsys_ingest import in_fresh_process as _fresh
from nsys_ingest import peak_mb
from replicate_trace import replicate

DEFAULT = Path(__file__).resolve().parents[2] / "shared/traces/hta/df_index_resolver/df_index_resolver.json.gz"


def floor(trace: Path) -> dict[str, object]:
    from traceq.readers.chrome.decoder import read_chrome_trace

    start = time.perf_counter()
    decoded = read_chrome_trace(trace)
    seconds = time.perf_counter() - start
    decoded.chunks.close()
    return {"seconds": seconds, "peak_mb": peak_mb()}


class _Stages:
    """The stages an ingest reports, timed (decoding: until the first other stage)."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float]] = [("decoding", time.perf_counter())]

    def stage(self, text: str) -> None:
        name = ("stored report metrics" if text.startswith("storing the report metrics")
                else "stored estimate" if text.startswith("storing the step estimated")
                else "model" if text.startswith(("building the model", "classifying")) else text)  # fmt: skip
        if name != self.marks[-1][0]:
            self.marks.append((name, time.perf_counter()))


class _Progress:
    def __init__(self, stages: _Stages) -> None:
        self.stages = stages

    def __call__(self, n: int) -> None:
        pass

    def stage(self, text: str) -> None:
        self.stages.stage(text)


def ingest(trace: Path, store: Path) -> dict[str, object]:
    from traceq.api import ingest as run  # what `traceq ingest` runs; imported before the clock starts

    stages = _Stages()
    start = time.perf_counter()
    result = run([trace], store=store, jobs=1, progress=lambda label, size: _Progress(stages))
    end = time.perf_counter()
    assert result["status"][0] == "ingested", result["error"][0]
    spent: dict[str, float] = {}
    for (name, t), (_, t_next) in itertools.pairwise([*stages.marks, ("end", end)]):
        spent[name] = spent.get(name, 0.0) + t_next - t
    return {"seconds": end - start, "events": int(result["events"][0]), "stages": spent, "peak_mb": peak_mb()}


def in_fresh_process(what: str, *paths: Path, source: Path | None = None) -> dict:
    return _fresh(what, *paths, script=__file__, source=source)


def _stages(ingests: list[dict], seconds: float) -> str:
    """The ingest stages' medians, each with its share of ``seconds``."""
    stages = {n: statistics.median(r["stages"].get(n, 0.0) for r in ingests) for n in ingests[0]["stages"]}
    return ", ".join(f"{n} {s:.2f} s ({s / seconds:.0%})" for n, s in stages.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT)
    ap.add_argument("--copies", default="1,8,16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", type=Path, help="keep the copies here (default: a temporary folder)")
    ap.add_argument("--before", type=Path, help="another traceq's source (its ingest timed in the same rounds)")
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        what, *paths = args.one
        print(json.dumps(floor(Path(paths[0])) if what == "floor" else ingest(Path(paths[0]), Path(paths[1]))))
        return
    with tempfile.TemporaryDirectory(prefix="traceq-chrome-floor-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"source: {args.source.name}; medians of {args.rounds} alternating rounds (floor, ingest, ...)")
        print(f"{'copies':>6}{'events':>12}{'floor s':>9}{'MiB':>7}{'ingest s':>10}{'MiB':>7}{'x floor':>9}  target 2x")
        for k in (int(x) for x in args.copies.split(",")):
            trace = args.source if k == 1 else work / f"{args.source.name.split('.')[0]}_x{k}.json.gz"
            if not trace.exists():
                replicate(args.source, trace, k)
            floors, ingests, before = [], [], []
            for i in range(args.rounds):
                floors.append(in_fresh_process("floor", trace))
                ingests.append(in_fresh_process("ingest", trace, Path(tmp) / f"store_{k}_{i}"))
                subprocess.run(["rm", "-rf", str(Path(tmp) / f"store_{k}_{i}")], check=True)
                if args.before:
                    before.append(in_fresh_process("ingest", trace, Path(tmp) / f"before_{k}_{i}", source=args.before))
                    subprocess.run(["rm", "-rf", str(Path(tmp) / f"before_{k}_{i}")], check=True)
            f = statistics.median(r["seconds"] for r in floors)
            t = statistics.median(r["seconds"] for r in ingests)
            print(f"{k:>6}{ingests[0]['events']:>12,}{f:>9.2f}{statistics.median(r['peak_mb'] for r in floors):>7,.0f}"
                  f"{t:>10.2f}{statistics.median(r['peak_mb'] for r in ingests):>7,.0f}{t / f:>8.1f}x  "
                  f"{'met' if t <= 2 * f else 'not met'}")  # fmt: skip
            print("        " + _stages(ingests, t))
            print("        ingest range " + " / ".join(f"{r['seconds']:.2f}" for r in ingests)
                  + " s, floor range " + " / ".join(f"{r['seconds']:.2f}" for r in floors) + " s")  # fmt: skip
            if before:
                b = statistics.median(r["seconds"] for r in before)
                runs = " / ".join(f"{r['seconds']:.2f}" for r in before)
                print(f"        before ({args.before.name}): {b:.2f} s ({runs}), "
                      f"{statistics.median(r['peak_mb'] for r in before):,.0f} MiB, {b / f:.1f}x the floor; "
                      f"this one {t / b:.2f}x it: " + _stages(before, b))  # fmt: skip
            if k != 1 and args.work is None:
                trace.unlink()


if __name__ == "__main__":
    main()
