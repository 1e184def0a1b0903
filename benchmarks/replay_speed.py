"""Benchmark: the replay of a 10-step, ~100 k-event run against the 1 s target.

The run is a real H200 trace: the Conformer at batch 4 with AMP (10 profiler steps, 114 k events), or
any chrome trace given, optionally replicated in time (``replicate_trace.py``) to reach more steps. It is
ingested into a temporary store; then, each timed ``--repeat`` times (median and max reported):

- load: the timeline's frames from the store in a new session (the query files ``replay_host``,
  ``replay_gpu``, ``replay_steps``, ``_windows``, ``_search_calls``),
- build: the recorded dependencies (slices, waits, GPU constraints), once per run,
- replay: one replay of the trace unchanged, and one without the profiler (scenario and replay),
- what-if: the eight cause scenarios over the estimate and its band (24 replays).

The target is build + the unprofiled replay (what a first ``unprofiled`` answer costs once the run is
loaded); the line says whether it was met.

Usage: python benchmarks/replay_speed.py [TRACE.json.gz] [--copies K] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import traceq
from traceq.analysis.replay import Replayer, build_graph, load_timeline, overhead_scenario, replay
from traceq.query.engine import Session
from traceq.store import Store

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = Path(os.environ.get("TRACEQ_SHARED", ROOT.parent / "shared")) / "traces/kineto/conformer_fp16_b4.json.gz"
TARGET_S = 1.0


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """Median and max seconds of ``repeat`` calls of ``fn``, and its last result."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), max(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--copies", type=int, default=1, help="replicate the trace's steps this many times")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as work:
        source = Path(a.trace)
        if a.copies > 1:
            from replicate_trace import replicate

            source = Path(work) / "replicated.json.gz"
            replicate(Path(a.trace), source, a.copies)
        traceq.ingest([str(source)], store=Path(work) / "store")
        store = Store(Path(work) / "store")
        run_id = store.catalog()["run_id"][0]
        def load_once() -> object:  # a session of its own each time: the query tables are made once per session
            with Session(store, [run_id], use_stored=False, own_queries=True) as s:
                return load_timeline(s, run_id)

        load = timed(load_once, a.repeat)
        tl = load[2]
        build = timed(lambda: build_graph(tl), a.repeat)
        g = build[2]
        traced = timed(lambda: replay(g), a.repeat)
        unprof = timed(lambda: replay(g, overhead_scenario(g)), a.repeat)
        r = Replayer(tl)
        whatif = timed(lambda: Replayer(tl).what_if(), max(1, a.repeat // 2))
    print(f"run: {source.name}, {tl.n_steps} steps, {tl.n_events} events, {g.nodes.height} host nodes, "
          f"{g.items.height} GPU events, {g.barriers.height} waits")  # fmt: skip
    print(f"traced step {r.traced().step_ms:.2f} ms, unprofiled {unprof[2].step_ms:.2f} ms")
    for label, (med, worst, _) in [
        ("load (SQL)", load), ("build", build), ("replay (traced)", traced), ("replay (unprofiled)", unprof),
        ("what-if (8 causes x 3 models, build included)", whatif),
    ]:  # fmt: skip
        print(f"  {label:48s} median {med:6.3f} s   max {worst:6.3f} s")
    total = build[0] + unprof[0]
    verdict = "met" if total < TARGET_S else "NOT met"
    print(f"build + unprofiled replay: {total:.3f} s (target {TARGET_S:.0f} s: {verdict})")


if __name__ == "__main__":
    main()
