"""What a replay changes: the :class:`Scenario` that the profiler-cost model and the what-ifs build and the
engine replays."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl


@dataclass
class Scenario:
    """How a replay differs from the trace. ``W``: CPU time of each slice after each node (``None``: the
    recorded ``W0``); ``barrier_on``: which waits still wait (``None``: all); ``dropped``: GPU events left
    out (``None``: none); ``lat_shift``: ns added to each GPU event's launch latency (``None``: 0);
    ``notes``: what was changed, in words."""

    name: str = "traced"
    W: pl.Series | None = None
    barrier_on: list[bool] | None = None
    dropped: list[bool] | None = None
    lat_shift: list[float] | None = None
    notes: list[str] = field(default_factory=list)
