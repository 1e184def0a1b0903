"""The replay's results: a run's step time estimated without the profiler, and a comparison's verdict on
two such estimates (made by :mod:`traceq.analysis.replay.replayer` and :mod:`traceq.analysis.replay.verdict`),
at full precision."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl


@dataclass
class Estimate:
    """A run's step time without the profiler. ``step_ms`` is the estimate, ``low_ms``..``high_ms`` its
    band (:func:`~traceq.analysis.replay.overhead.band_width`: ``width`` is its natural-log half-width;
    above the traced step by no more than the band's floor), ``traced_ms`` the traced step time (mean analysis window).
    ``per_step``: ``step``, ``traced_ms``, ``unprofiled_ms``, ``low_ms``, ``high_ms``. ``notes``: how it
    was made and what to keep in mind."""

    run_id: str
    traced_ms: float
    step_ms: float
    low_ms: float
    high_ms: float
    per_step: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    width: float = 0.0
    #: what the host CPU time left was multiplied by (1.0: not scaled; a comparison's host-speed scaling)
    host_scale: float = 1.0

    @property
    def profiler_ms(self) -> float:
        """The profiler's estimated cost per step, ms."""
        return self.traced_ms - self.step_ms


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
        if self.uncertain and abs(self.change_pct) >= NO_CHANGE_PCT:
            return ", but the band includes no change: the difference is within the estimate's noise"
        return ""


#: How a report says that it has no estimate without the profiler (its reason follows), and leads with it.
NOT_ESTIMATED = "The step time without the profiler is not estimated"
#: A change in per cent smaller than this rounds to 0.0 %: no change, in words and verdicts.
NO_CHANGE_PCT = 0.05


def change_words(pct: float) -> str:
    """A change of NEW against BASE in per cent, in words whose sign agrees with the number (one that
    rounds to 0.0 % is no change)."""
    if abs(pct) < NO_CHANGE_PCT:
        return "NEW and BASE take the same time"
    return f"NEW is {abs(pct):,.1f}% {'slower' if pct > 0 else 'faster'} than BASE"
