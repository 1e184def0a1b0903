"""What the analysis names: findings with their evidence, and the parts a step-time difference splits into.

The rules that name findings are in :mod:`traceq.analysis.report` (one run), :mod:`traceq.analysis.compare`
(two runs) and :mod:`traceq.analysis.ranks` (the straggler of a multi-rank run); the render layer turns
them into text, and ``to_dict`` into JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Finding:
    """One cause, named when its evidence clears a bar: what it is (``id``), one line saying it, its
    estimated impact in ms per step (None for summary text, which has no steps), the numbers behind it
    and what to try next."""

    id: str
    title: str
    impact_ms: float | None
    evidence: dict[str, Any]
    next_step: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``id``, ``title``, ``impact_ms``, ``evidence``, ``next_step``."""
        return {
            "id": self.id,
            "title": self.title,
            "impact_ms": self.impact_ms,
            "evidence": self.evidence,
            "next_step": self.next_step,
        }


@dataclass(frozen=True)
class Waterfall:
    """The step-time difference NEW - BASE split into parts, mean ms per step (positive: NEW is slower);
    the parts add up to the difference (see :mod:`traceq.analysis.compare` for how each is carved)."""

    gpu_compute: float
    communication: float
    cast_overhead: float
    layout_transforms: float
    optimizer: float
    memory_copies: float
    launch_bound: float
    op_cpu_growth: float
    dependency_idle: float

    def rows(self) -> list[dict[str, Any]]:
        """The JSON form: one ``{"part", "ms_per_step"}`` per part, in the order above."""
        return [{"part": f.name, "ms_per_step": getattr(self, f.name)} for f in fields(self)]
