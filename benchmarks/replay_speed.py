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

``--compare``: what the estimate costs a comparison, the reports leading with it. Two real H200 traces
(default the Conformer at batch 4 recorded with shapes, FP32 and FP16 AMP, 3 profiled steps each) are
replicated in time (``--copies``, default 2: 58 k and 68 k events) and ingested; then ``traceq report
--compare A B --format json`` with ``--traced-only`` (the floor: the traced report) and without (the
default: the estimate without the profiler leads) run in fresh processes, alternating, ``--rounds``
times. Printed: the medians, their ratio against the 1.5x target, and the replay's parts in one process
(its shared queries, fetching, loading, building and the replays of the comparison, medians of ``--repeat``).

Usage: python benchmarks/replay_speed.py [TRACE.json.gz] [--copies K] [--repeat 5]
       python benchmarks/replay_speed.py --compare [BASE.json.gz NEW.json.gz] [--copies 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import traceq
from traceq.analysis.replay import Replayer, build_graph, load_timeline, overhead_scenario, replay
from traceq.analysis.replay.replayer import SHARED
from traceq.querying.engine import Session
from traceq.store import Store

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = Path(os.environ.get("TRACEQ_SHARED", ROOT.parent / "shared")) / "traces/kineto/conformer_fp16_b4.json.gz"
TARGET_S = 1.0
KINETO = DEFAULT.parent
PAIR = (KINETO / "conformer_fp32_b4_shapes.json.gz", KINETO / "conformer_fp16_b4_shapes.json.gz")
#: A comparison leading with the estimate takes at most this many times the traced-only one.
COMPARE_TARGET = 1.5


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """Median and max seconds of ``repeat`` calls of ``fn``, and its last result."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), max(times), out


def compare_cost(pair: list[Path], copies: int, rounds: int, repeat: int) -> None:
    """``report --compare`` with and without ``--traced-only`` in fresh processes (see the module doc)."""
    from report_speed import timed as cli

    from traceq.analysis.compare import compare, comparison_sessions
    from traceq.analysis.replay.verdict import compare_replayers

    with tempfile.TemporaryDirectory(prefix="replay-compare-bench-") as work:
        store, names = Path(work) / "store", []
        for source in pair:
            path = Path(work) / f"{source.name.split('.')[0]}_x{copies}.json.gz"
            if copies > 1:
                from replicate_trace import replicate

                replicate(source, path, copies)
            else:
                path.write_bytes(source.read_bytes())
            traceq.ingest([str(path)], store=store)
            names.append(path.name.split(".")[0])
        events = {r["name"]: sum(json.loads(r["events_by_kind"]).values())
                  for r in Store(store).catalog().iter_rows(named=True)}  # fmt: skip
        args = ("report", "--compare", *names, "--format", "json", "--store", str(store))
        floor, default = [], []
        for _ in range(rounds):  # alternating: traced-only, default, traced-only, ...
            floor.append(cli(*args, "--traced-only")["wall"])
            default.append(cli(*args)["wall"])
        st = Store(store)
        ids = [st.resolve(n) for n in names]

        def replay_parts() -> tuple[float, float, float]:
            with comparison_sessions(st, *ids) as sessions:
                compare(*ids, st, session=sessions)
                t = time.perf_counter()
                for s in sessions:
                    s.make(SHARED)  # the fetched ones are read by the load, as a report's replay reads them
                made = time.perf_counter()
                base, new = (Replayer.load(s, i) for s, i in zip(sessions, ids, strict=True))
                loaded = time.perf_counter()
                compare_replayers(base, new)
                return made - t, loaded - made, time.perf_counter() - loaded

        parts = [replay_parts() for _ in range(repeat)]
    f, d = statistics.median(floor), statistics.median(default)
    print(f"report --compare {names[0]} ({events[names[0]]:,} events) {names[1]} ({events[names[1]]:,} events), "
          f"fresh processes, medians of {rounds} alternating rounds")  # fmt: skip
    print(f"  {'--traced-only (the floor)':<44}{f:7.2f} s")
    print(f"  {'default (the estimate leads)':<44}{d:7.2f} s   {d / f:.2f}x the floor "
          f"(target {COMPARE_TARGET}x: {'met' if d <= COMPARE_TARGET * f else 'NOT met'})")  # fmt: skip
    print(
        f"  the replay's part in one process (medians of {repeat}): its shared queries "
        f"{statistics.median(p[0] for p in parts):.3f} s, fetch, load and build "
        f"{statistics.median(p[1] for p in parts):.3f} s, replays {statistics.median(p[2] for p in parts):.3f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="*", default=[str(DEFAULT)])
    ap.add_argument("--copies", type=int, default=None, help="replicate the trace's steps this many times")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--compare", action="store_true", help="the estimate's cost to report --compare")
    ap.add_argument("--rounds", type=int, default=5, help="--compare: alternating rounds of the two commands")
    a = ap.parse_args()
    if a.compare:
        pair = [Path(t) for t in a.trace] if len(a.trace) == 2 else list(PAIR)
        compare_cost(pair, a.copies or 2, a.rounds, a.repeat)
        return
    a.trace, a.copies = a.trace[0], a.copies or 1
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
