"""Replay of a run's timeline: the traced steps reproduced, the steps without the profiler, what a fix saves.

>>> from traceq.analysis.replay import unprofiled, what_if, reproduce, compare_unprofiled  # doctest: +SKIP
>>> with Session(store, [run_id], use_stored=False) as s:                          # doctest: +SKIP
...     est = unprofiled(s, run_id)         # Estimate: step_ms, low_ms, high_ms, per_step, notes
...     fixes = what_if(s, run_id)          # cause, fix, step_ms, saving_ms, saving_low, saving_high
...     check = reproduce(s, run_id)        # step, traced_ms, replayed_ms, diff_ms, diff_pct

:class:`Replayer` loads a run once for several of these.
"""

from traceq.analysis.replay.api import Estimate, Replayer, load_timeline, replayer, reproduce, unprofiled, what_if
from traceq.analysis.replay.compare import Verdict, compare_replayers, compare_unprofiled
from traceq.analysis.replay.engine import Replay, replay
from traceq.analysis.replay.explain import with_replay, with_what_if
from traceq.analysis.replay.graph import Graph, build_graph
from traceq.analysis.replay.overhead import OverheadModel, overhead_scenario
from traceq.analysis.replay.scenario import Scenario
from traceq.analysis.replay.timeline import Timeline
from traceq.analysis.replay.whatif import FIXES, SCENARIOS

__all__ = [
    "FIXES",
    "SCENARIOS",
    "Estimate",
    "Graph",
    "OverheadModel",
    "Replay",
    "Replayer",
    "Scenario",
    "Timeline",
    "Verdict",
    "build_graph",
    "compare_replayers",
    "compare_unprofiled",
    "load_timeline",
    "overhead_scenario",
    "replay",
    "replayer",
    "reproduce",
    "unprofiled",
    "what_if",
    "with_replay",
    "with_what_if",
]
