"""What the analysis names: findings with their evidence, and the parts a step-time difference splits into.

The rules that name findings are in :mod:`traceq.analysis.report` (one run), :mod:`traceq.analysis.compare`
(two runs) and :mod:`traceq.analysis.ranks` (the straggler of a multi-rank run); the causes they name are
declared in :mod:`traceq.analysis.causes`; the render layer turns them into text and JSON
(:mod:`traceq.render.json_form`), rounding their numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Finding:
    """One cause, named when its evidence clears a bar: what it is (``id``, a cause id), one line saying
    it, its estimated impact in ms per step (for a comparison NEW minus BASE, positive: NEW is slower;
    None for summary text, which has no steps), the numbers behind it and what to try next.
    ``what_if_ms``: where a replay was asked for (``report --what-if``) and can model the cause, the step
    time it predicts the fix saves, ms per step without the profiler (for a comparison, in NEW).
    ``unprofiled_ms``: where the step estimated without the profiler was split by cause, the cause's ms per
    step in it (for a comparison, its change NEW minus BASE)."""

    id: str
    title: str
    impact_ms: float | None
    evidence: dict[str, Any]
    next_step: str
    what_if_ms: float | None = None
    unprofiled_ms: float | None = None


@dataclass(frozen=True)
class Part:
    """One part of a step-time difference: a cause's mean ms per step in BASE and in NEW."""

    part: str
    label: str
    base_ms: float
    new_ms: float

    @property
    def delta_ms(self) -> float:
        return self.new_ms - self.base_ms


#: The label of a waterfall's parts below its threshold, summed.
OTHER = "other (parts below the threshold)"
#: A waterfall shows the parts that changed by at least this share of the longer step (a run's, the parts
#: of at least this share of its step); the rest is summed as "other".
WATERFALL_MIN_SHARE = 0.005


@dataclass(frozen=True)
class Waterfall:
    """The step-time difference NEW - BASE split into parts (mean ms per step, positive: NEW is slower).

    ``parts`` add up to the difference exactly; :meth:`shown` keeps those that changed by at least a share
    of the step, the rest summed as ``other``."""

    parts: tuple[Part, ...]
    delta_ms: float

    def shown(self, min_ms: float) -> tuple[list[Part], Part]:
        """The parts that changed by at least ``min_ms``, largest change first, and the rest summed into one
        part (:data:`OTHER`: BASE's and NEW's ms of the parts left out, so that each column adds up)."""
        kept = sorted((p for p in self.parts if abs(p.delta_ms) >= min_ms), key=lambda p: -abs(p.delta_ms))
        rest = [p for p in self.parts if abs(p.delta_ms) < min_ms]
        return kept, Part("other", OTHER, sum(p.base_ms for p in rest), sum(p.new_ms for p in rest))
