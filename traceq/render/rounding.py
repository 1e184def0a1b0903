"""How many decimals each number of a report is stated with: the results carry full values, and every
format (JSON, terminal, Markdown, HTML) states them through these rules, so that they read alike."""

from __future__ import annotations

from typing import Any

from traceq.analysis.causes import (
    ALGORITHM_SEARCH,
    ALLOCATOR,
    CAST_OVERHEAD,
    FP32_COMPUTE,
    GPU_COMPUTE,
    HOST_SYNC,
    HOST_UNATTRIBUTED,
    INPUT_PIPELINE,
    LAUNCH_OVERHEAD,
    PYTHON_OVERHEAD,
    STRAGGLER,
    UNEXPLAINED,
)
from traceq.analysis.findings import Finding
from traceq.analysis.replay.estimates import Estimate, Verdict
from traceq.analysis.run_summary import OutlierStep

#: A rule: the decimals of every float in a value (a number, a mapping of numbers or a pair of them), or
#: per key of each row of a list of rows.
Rule = int | dict[str, int]

#: Where the idle time went (a row of a cause's sites, ops or frames): ms and calls per step.
SITE: dict[str, int] = {"idle_ms_per_step": 3, "calls_per_step": 3}
#: A range (annotation) a cause's time lay in: ms and ranges per step.
RANGE: dict[str, int] = {"idle_ms_per_step": 3, "ranges_per_step": 3}
#: An op that searched for algorithms.
SEARCH_OP: dict[str, int] = {"calls_per_step": 2, "ms_per_call": 2, "typical_ms_per_call": 3, "kernels_per_call": 1}

#: Every finding's own parts of the step (ms per step).
_SIDES: dict[str, Rule] = {"gpu_idle_ms_per_step": 3, "gpu_busy_ms_per_step": 3}
#: Each cause's evidence, key by key; keys not listed are stated as they are.
EVIDENCE: dict[str, dict[str, Rule]] = {
    LAUNCH_OVERHEAD.id: {
        "kernels_per_step": 4,
        "median_kernel_us": 2,
        "median_launch_us": 2,
        "kernels_shorter_than_their_launch": 4,
        "ops_the_gpu_waited_on": SITE,
    },
    HOST_SYNC.id: {"sync_calls_per_step": 2, "sites": SITE},
    INPUT_PIPELINE.id: {
        "data_loading_ms_per_step": 3,
        "data_loading_calls": 2,
        "pageable_copies_per_step": 2,
        "pageable_mb_per_step": 3,
        "sites": SITE,
    },
    ALGORITHM_SEARCH.id: {"searching_calls_per_step": 2, "ops": SEARCH_OP},
    ALLOCATOR.id: {"allocator_calls_per_step": 2, "sites": SITE},
    CAST_OVERHEAD.id: {
        "conversions_per_step": 1,
        "cast_op_cpu_ms_per_step": 3,
        "cast_kernel_ms_per_step": 3,
        "round_trips_per_step": 1,
        "idle_in_casts_by_op": SITE,
    },
    PYTHON_OVERHEAD.id: {"frames": SITE, "in_ranges": RANGE},
    HOST_UNATTRIBUTED.id: {"in_ranges": RANGE},
    UNEXPLAINED.id: {"waits_with_work_queued_per_step": 1},
    GPU_COMPUTE.id: {
        "fp16_coverage": 4,
        "tensor_core_coverage": 4,
        "median_kernel_us": 2,
        "ops_still_fp32_ms_per_step": 3,
    },
    FP32_COMPUTE.id: {"ops_still_fp32_ms_per_step": 3},
}
#: A finding's size, its replayed saving and its part of the estimate, ms per step.
MS = 3


def stated(value: Any, rule: Rule) -> Any:
    """``value`` with its floats rounded by ``rule``; lists (a comparison's pairs, lists of rows) and
    mappings of numbers element by element; anything else as it is."""
    if isinstance(value, list):
        return [stated(v, rule) for v in value]
    if isinstance(rule, dict):
        if isinstance(value, dict) and value.keys() & rule.keys():
            return {k: stated(v, rule[k]) if k in rule else v for k, v in value.items()}
        return value
    if isinstance(value, dict):
        return {k: stated(v, rule) for k, v in value.items()}
    return round(value, rule) if isinstance(value, float) else value


def evidence(finding: Finding) -> dict[str, Any]:
    """A finding's evidence as every format states it."""
    rules = {**_SIDES, **EVIDENCE.get(finding.id, {})}
    return {k: stated(v, rules[k]) if k in rules else v for k, v in finding.evidence.items()}


def ms(value: float | None) -> float | None:
    """A value in ms as every format states it."""
    return None if value is None else round(value, MS)


def impact(f: Finding) -> float | None:
    """A finding's size as stated: in ms to a thousandth, but the straggler's, stated in full as its evidence is."""
    return f.impact_ms if f.id == STRAGGLER.id else ms(f.impact_ms)


def outlier(o: OutlierStep) -> dict[str, Any]:
    return {
        "step": o.step,
        "rank": o.rank,
        "step_ms": ms(o.step_ms),
        "median_step_ms": ms(o.median_step_ms),
        "cause": o.cause,
        "cause_ms_over_median": ms(o.cause_ms_over_median),
    }


def estimate(e: Estimate) -> dict[str, Any]:
    """A run's step time without the profiler as every format states it (the JSON form)."""
    return {
        "run_id": e.run_id,
        "traced_ms": ms(e.traced_ms),
        "unprofiled_ms": ms(e.step_ms),
        "low_ms": ms(e.low_ms),
        "high_ms": ms(e.high_ms),
        "band_width": round(e.width, 4),
        "profiler_ms": ms(e.profiler_ms),
        "host_scale": round(e.host_scale, 3),
        "per_step": e.per_step.to_dicts(),
        "notes": e.notes,
    }


def verdict(v: Verdict) -> dict[str, Any]:
    """A comparison's verdict on estimated step times as every format states it (the JSON form)."""
    return {
        "base": estimate(v.base),
        "new": estimate(v.new),
        "change_pct": round(v.change_pct, 2),
        "change_low": round(v.change_low, 2),
        "change_high": round(v.change_high, 2),
        "traced_change_pct": round(v.traced_change_pct, 2),
        "flips": v.flips,
        "uncertain": v.uncertain,
        "host_ratio": None if v.host_ratio is None else round(v.host_ratio, 3),
        "scaled": v.scaled,
        "verdict": v.text,
        "notes": v.notes,
    }
