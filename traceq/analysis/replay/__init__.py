"""Replay of a run's timeline: the traced steps reproduced, the steps without the profiler, what a fix saves.

>>> from traceq.analysis.replay import Replayer, compare_replayers  # doctest: +SKIP
>>> with Session(store, [run_id], own_queries=True) as s:           # doctest: +SKIP
...     r = Replayer.load(s, run_id)        # loads the run once for several replays
>>> r.unprofiled()                          # Estimate: step_ms, low_ms, high_ms, per_step, notes
>>> r.what_if()                             # cause, fix, step_ms, saving_ms, saving_low, saving_high
>>> r.reproduce()                           # step, traced_ms, replayed_ms, diff_ms, diff_pct

The reports' use of it is :mod:`traceq.analysis.replay.explain`; the parts (timeline, graph, engine,
overhead model, scenarios) are in their own modules.
"""

from traceq.analysis.replay.engine import replay
from traceq.analysis.replay.estimates import Estimate, Verdict
from traceq.analysis.replay.graph import build_graph
from traceq.analysis.replay.overhead import overhead_scenario
from traceq.analysis.replay.replayer import Replayer, load_timeline, replayer, reproduce, unprofiled, what_if
from traceq.analysis.replay.scenario import Scenario
from traceq.analysis.replay.verdict import compare_replayers
from traceq.analysis.replay.whatif import FIXES, SCENARIOS

__all__ = [
    "FIXES",
    "SCENARIOS",
    "Estimate",
    "Replayer",
    "Scenario",
    "Verdict",
    "build_graph",
    "compare_replayers",
    "load_timeline",
    "overhead_scenario",
    "replay",
    "replayer",
    "reproduce",
    "unprofiled",
    "what_if",
]
