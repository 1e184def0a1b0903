"""The ops a report lists: the first of its op table (ordered by CPU time, the most first), cut once for
every format."""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from traceq.analysis.results import Comparison, RunReport
from traceq.render.formats import TOP_OPS

Result = TypeVar("Result", RunReport, Comparison)


def listed(result: Result, top: int | None = TOP_OPS) -> Result:
    """``result`` with each run's op table cut to its first ``top`` ops (None: every op); its
    ``summary.ops_total`` still says how many there are, and a comparison's per-op changes stay whole."""
    if top is None:
        return result
    if isinstance(result, Comparison):
        return replace(result, base=listed(result.base, top), new=listed(result.new, top))
    return replace(result, ops=result.ops.head(top))
