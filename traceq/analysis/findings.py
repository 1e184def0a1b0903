"""Findings: a cause, its size and the evidence for it, with the next step to take."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Finding:
    """One finding: ``id`` is a cause id (:mod:`traceq.analysis.causes`), ``impact_ms`` its ms per step
    (for a comparison, NEW minus BASE: positive means NEW is slower because of it)."""

    id: str
    title: str
    impact_ms: float | None
    evidence: dict[str, Any] = field(default_factory=dict)
    next_step: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
