"""The replay's results as text: a finding's predicted saving, the what-if table and the step time without
the profiler, for the terminal, Markdown and HTML reports alike."""

from __future__ import annotations

from typing import Any

import polars as pl

#: The heading of the replay's what-if table.
WHAT_IF_TITLE = "What each fix would save (replay without the profiler, ms per step)"


def saving_text(ms: float) -> str:
    """A predicted saving in words whose sign agrees with the number."""
    if abs(ms) < 0.005:
        return "the step would not change (0.00 ms/step)"
    return f"the step would be {abs(ms):,.2f} ms/step {'shorter' if ms > 0 else 'longer'}"


def unprofiled_text(ms: float, change: bool) -> str:
    """A cause's part of the step estimated without the profiler, as "words: value": its ms per step, or
    for a comparison its change NEW minus BASE, in words whose sign agrees with the number."""
    if not change:
        return f"without the profiler (estimated): {ms:,.2f} ms per step"
    if abs(ms) < 0.005:
        return "without the profiler (estimated): no change (0.00 ms per step)"
    return f"without the profiler (estimated): {abs(ms):,.2f} ms per step {'more' if ms > 0 else 'less'} in NEW"


def what_if_table(frame: pl.DataFrame) -> pl.DataFrame:
    """The replay's what-ifs as printed: each cause's fix, the step without the profiler with the fix,
    and the saving with its band (ms per step)."""
    if frame.is_empty():
        return pl.DataFrame()
    return frame.select(
        "cause",
        "fix",
        pl.col("step_ms").round(2).alias("step with fix ms"),
        pl.col("saving_ms").round(2).alias("what_if_ms"),
        pl.format("{} to {}", pl.col("saving_low").round(2), pl.col("saving_high").round(2)).alias("band ms"),
        pl.col("saving_pct").round(1).alias("saving %"),
    )


def unprofiled_lines(estimate: dict[str, Any]) -> list[str]:
    """A run's step time without the profiler, in lines whose words agree with their numbers."""
    traced, step = estimate["traced_ms"], estimate["unprofiled_ms"]
    cost = traced - step
    lines = [
        f"estimated {step:,.2f} ms per step (band {estimate['low_ms']:,.2f} to {estimate['high_ms']:,.2f}) against "
        f"{traced:,.2f} ms traced: {_taken_out(estimate)} about {cost:,.2f} ms per step ({cost / traced:.0%})"
        if traced and cost >= 0
        else f"estimated {step:,.2f} ms per step against {traced:,.2f} ms traced"
    ]
    return lines + [f"note: {note}" for note in estimate.get("notes", [])]


def _taken_out(estimate: dict[str, Any]) -> str:
    """What the difference between a traced step and its estimate is: the profiler's cost, and the host
    speed where a comparison scaled this run's host time to the other's."""
    if estimate.get("host_scale", 1.0) != 1.0:
        return "the profiler's cost and the host-speed scaling take"
    return "the profiler's own cost is"
