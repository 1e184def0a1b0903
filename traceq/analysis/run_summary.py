"""A run's headline numbers as typed fields, at full precision (the render layer rounds them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Metrics that need a timeline, reported as unavailable for summary-text runs.
TIMELINE_METRICS = ("gpu_busy_ms", "gpu_idle_ms", "gpu_idle_ratio", "launch_bound_ratio", "step_time_ms")


@dataclass(frozen=True)
class CastOverhead:
    """Dtype conversions: calls, CPU and GPU ms per step (summary text: over the whole profile), the CPU's
    share of their time and the host-device round trips per step (None for summary text, which lacks them)."""

    calls: float
    cpu_ms: float | None
    gpu_ms: float | None
    cpu_share: float | None = None
    round_trips: float | None = None


@dataclass(frozen=True)
class OutlierStep:
    """A step much longer than the median, and the cause that grew most over its median (ms)."""

    step: int | None
    rank: int | None
    step_ms: float
    median_step_ms: float
    cause: str
    cause_ms_over_median: float


@dataclass(frozen=True)
class RunSummary:
    """A run's headline numbers per step (means over its windows; ratios in [0, 1]). For summary text only
    ``fp16_coverage``, ``tensor_core_coverage``, ``cast_overhead`` and ``ops_total`` are known."""

    cast_overhead: CastOverhead
    #: how many ops the run has (the report may list fewer)
    ops_total: int
    steps: int | None = None
    step_rule: str | None = None
    #: the median window
    step_time_ms: float | None = None
    #: the mean window: the one step time every format states
    mean_step_time_ms: float | None = None
    gpu_busy_ms: float | None = None
    gpu_kernel_busy_ms: float | None = None
    gpu_idle_ms: float | None = None
    gpu_idle_ratio: float | None = None
    launch_bound_ratio: float | None = None
    host_launch_gap_ms: float | None = None
    gpu_events_per_step: float | None = None
    kernels_per_step: float | None = None
    median_kernel_us: float | None = None
    median_launch_us: float | None = None
    short_kernel_share: float | None = None
    median_queue_depth: float | None = None
    fp16_coverage: float | None = None
    tensor_core_coverage: float | None = None
    compute_ms: float | None = None
    #: multi-rank runs: min, median and max across ranks (:func:`traceq.analysis.ranks.spread`)
    rank_spread: dict[str, Any] | None = None
    outlier_steps: tuple[OutlierStep, ...] = field(default=())
