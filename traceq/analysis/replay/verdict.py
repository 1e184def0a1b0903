"""Which run is faster without the profiler: the verdict of a comparison on estimated step times.

Both runs are estimated without the profiler's cost (:mod:`traceq.analysis.replay.overhead`). Where their hosts ran
the same trivial ops at clearly different speeds (by more than ``HOST_RATIO``: beyond the step-to-step
variation seen inside single traces), the slower trace's remaining host time is scaled to the faster
one's speed, and the result says so: without that a Conformer's fp32 trace, whose host ran 1.4x slower
than its fp16 trace's, would say AMP won where it lost by 37% without the profiler. The verdict flips the
traced one when the signs of the two differences disagree; it is uncertain when the band of the
difference (the two runs' bands combined, :data:`~traceq.analysis.replay.overhead.RATIO_SHARE`) includes
no change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from traceq.analysis.replay.overhead import RATIO_SHARE
from traceq.analysis.replay.replayer import Estimate, Replayer
from traceq.analysis.replay.speed import speed_ratio

#: Host speed ratio between two traces above which the slower one is scaled to the faster one's speed.
HOST_RATIO = 1.2


@dataclass
class Verdict:
    """A comparison's traced and unprofiled step times. ``change_pct``: NEW against BASE without the
    profiler (positive: NEW slower), with ``change_low``..``change_high``; ``traced_change_pct`` the same
    on traced steps; ``flips``: whether the two disagree on which run is faster; ``host_ratio``: how much
    slower NEW's host ran the trivial ops than BASE's; ``scaled``: which run's host time was scaled."""

    base: Estimate
    new: Estimate
    change_pct: float
    change_low: float
    change_high: float
    traced_change_pct: float
    flips: bool
    uncertain: bool
    host_ratio: float | None
    scaled: str | None
    notes: list[str] = field(default_factory=list)
    #: what each side's host CPU time was multiplied by (1.0: not scaled), for its replay
    base_scale: float = 1.0
    new_scale: float = 1.0

    @property
    def text(self) -> str:
        band = f"{self.change_low:+,.1f}% to {self.change_high:+,.1f}%"
        out = f"{change_words(self.change_pct)} without the profiler (band {band}){self.noise}"
        if self.flips:
            traced = "slower" if self.traced_change_pct > 0 else "faster"
            out += f"; the traced steps say NEW is {abs(self.traced_change_pct):,.1f}% {traced}: the profiler flips it"
        return out

    @property
    def noise(self) -> str:
        """The clause a verdict adds where the band includes no change but the estimate is not 0.0 %."""
        if self.uncertain and abs(self.change_pct) >= 0.05:
            return ", but the band includes no change: the difference is within the estimate's noise"
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.to_dict(),
            "new": self.new.to_dict(),
            "change_pct": round(self.change_pct, 2),
            "change_low": round(self.change_low, 2),
            "change_high": round(self.change_high, 2),
            "traced_change_pct": round(self.traced_change_pct, 2),
            "flips": self.flips,
            "uncertain": self.uncertain,
            "host_ratio": None if self.host_ratio is None else round(self.host_ratio, 3),
            "scaled": self.scaled,
            "verdict": self.text,
            "notes": self.notes,
        }


def change_words(pct: float) -> str:
    """A change of NEW against BASE in per cent, in words whose sign agrees with the number (one that
    rounds to 0.0 % is no change)."""
    if abs(pct) < 0.05:
        return "NEW and BASE take the same time"
    return f"NEW is {abs(pct):,.1f}% {'slower' if pct > 0 else 'faster'} than BASE"


def compare_replayers(base: Replayer, new: Replayer, normalize_host: bool = True) -> Verdict:
    """The verdict of ``new`` against ``base`` (see the module doc)."""
    ratio = speed_ratio(new.timeline, base.timeline)
    scale_base = scale_new = 1.0
    scaled = None
    notes = []
    if normalize_host and ratio is not None and max(ratio, 1 / ratio) > HOST_RATIO:
        if ratio > 1:
            scale_new, scaled = 1 / ratio, "new"
        else:
            scale_base, scaled = ratio, "base"
        notes.append(
            f"the {scaled} trace's host ran the same trivial ops {max(ratio, 1 / ratio):.2f}x slower than the other's; "
            f"its host time was scaled to the other's speed"
        )
    b, n = base.unprofiled(scale_base), new.unprofiled(scale_new)
    ratio_est = n.step_ms / b.step_ms
    change = (ratio_est - 1) * 100
    # the two runs' bands combined as independent errors of their log step times, less what cancels
    width = RATIO_SHARE * math.hypot(b.width, n.width)
    low, high = (ratio_est * math.exp(-width) - 1) * 100, (ratio_est * math.exp(width) - 1) * 100
    traced = (n.traced_ms / b.traced_ms - 1) * 100
    flips = (change > 0) != (traced > 0)
    uncertain = low < 0 < high
    return Verdict(b, n, change, low, high, traced, flips, uncertain, ratio, scaled, notes, scale_base, scale_new)
