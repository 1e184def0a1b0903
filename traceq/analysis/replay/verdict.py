"""Which run is faster without the profiler: the verdict of a comparison on estimated step times.

Both runs are estimated without the profiler's cost (:mod:`traceq.analysis.replay.overhead`). Where their hosts ran
the same trivial ops at clearly different speeds (by more than ``HOST_RATIO``: beyond the step-to-step
variation seen inside single traces), the slower trace's remaining host time is scaled to the faster
one's speed, and the result says so: without that a Conformer's fp32 trace, whose host ran 1.4x slower
than its fp16 trace's, would say AMP won where it lost by 37% without the profiler. The verdict flips the
traced one when the signs of the two differences disagree (neither rounding to no change); it is
uncertain when the band of the difference (the two runs' bands combined,
:data:`~traceq.analysis.replay.overhead.RATIO_SHARE`; for Nsight Systems captures their whole bands)
includes no change.
"""

from __future__ import annotations

import math

from traceq.analysis.replay.estimates import NO_CHANGE_PCT, Estimate, Verdict
from traceq.analysis.replay.overhead import NSYS_FLAVOUR, RATIO_SHARE
from traceq.analysis.replay.replayer import Replayer
from traceq.analysis.replay.speed import speed_ratio

#: Host speed ratio between two traces above which the slower one is scaled to the faster one's speed.
HOST_RATIO = 1.2


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
    # the two runs' bands combined as independent errors of their log step times, less what cancels; for
    # Nsight Systems captures nothing cancels: the alpha a capture needs varies within a pair (1.15 and 1.93
    # on leaseM's Conformer b4 pair), so each run's whole band, its alpha's range included, counts
    if NSYS_FLAVOUR in (base.timeline.flavour, new.timeline.flavour):
        width = math.hypot(_log_half_width(b), _log_half_width(n))
    else:
        width = RATIO_SHARE * math.hypot(b.width, n.width)
    low, high = (ratio_est * math.exp(-width) - 1) * 100, (ratio_est * math.exp(width) - 1) * 100
    traced = (n.traced_ms / b.traced_ms - 1) * 100
    flips = min(abs(change), abs(traced)) >= NO_CHANGE_PCT and (change > 0) != (traced > 0)
    uncertain = low < 0 < high
    return Verdict(b, n, change, low, high, traced, flips, uncertain, ratio, scaled, notes, scale_base, scale_new)


def _log_half_width(estimate: Estimate) -> float:
    """The wider side of an estimate's band, as a natural-log half-width."""
    if estimate.step_ms <= 0 or estimate.low_ms <= 0:
        return estimate.width
    return max(math.log(estimate.step_ms / estimate.low_ms), math.log(estimate.high_ms / estimate.step_ms))
