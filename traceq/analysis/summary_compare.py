"""Comparison of two Paddle summary texts (what users paste): op totals over the whole profile, no steps.

Summary text has no timeline, so there is no waterfall: the verdict comes from the CPU and GPU totals of
the ops both tables list, and each finding names one cause with the ops that show it, every op under one
cause only. An op listed by one table only is *absent* from the other (a paste or a row limit may have
cut it), never 0 ms.
"""

from __future__ import annotations

import polars as pl

from traceq._utils.words import count
from traceq.analysis.causes import ALGORITHM_SEARCH, CAST_OVERHEAD, GPU_COMPUTE, LAUNCH_OVERHEAD
from traceq.analysis.findings import Finding
from traceq.analysis.results import Comparison, RunReport
from traceq.errors import TraceqError

#: A longest call this many times its op's average call, where the other run's ratio is far lower, is the
#: signature of algorithm search on new shapes (the first call of a shape tunes, the rest reuse).
SEARCH_MAX_AVG = 5.0
#: ... and NEW's ratio must be at least this many times BASE's (or BASE's the same times NEW's).
SEARCH_RATIO_GROWTH = 3.0
#: An op's CPU time change counts from this many ms over the profile and this share of the CPU total.
MIN_OP_MS, MIN_OP_SHARE = 1.0, 0.01
#: Ops listed under one finding's evidence.
EVIDENCE_OPS = 5
#: The verdict names the bound side only when the ops both tables list hold at least this share of each
#: table's CPU time.
MIN_COVERED = 0.5


#: An op's change: NEW minus BASE CPU time, or where one table lacks it, its time in the other.
_SIZE = pl.coalesce(pl.col("cpu_delta_ms").abs(), pl.col("base_cpu_ms"), pl.col("new_cpu_ms"))


def summary_op_deltas(base: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """Per op of either table: calls, CPU and GPU ms over the profile and the max/avg call-time ratio in
    each, and NEW minus BASE; ``present`` says which tables list it (``both``, ``base``, ``new``)."""
    cols = ["name", "calls", "cpu_incl_ns", "gpu_ns", "cpu_max_ns", "is_cast"]

    def side(ops: pl.DataFrame, tag: str) -> pl.DataFrame:
        return ops.select(cols).select(
            "name",
            pl.col("is_cast").alias(f"is_cast_{tag}"),
            pl.col("calls").alias(f"{tag}_calls"),
            (pl.col("cpu_incl_ns") / 1e6).alias(f"{tag}_cpu_ms"),
            (pl.col("gpu_ns") / 1e6).alias(f"{tag}_gpu_ms"),
            (pl.col("cpu_max_ns") / (pl.col("cpu_incl_ns") / pl.col("calls"))).alias(f"{tag}_max_avg"),
        )

    joined = side(new, "new").join(side(base, "base"), on="name", how="full", coalesce=True)
    return (
        joined.with_columns(
            pl.when(pl.col("base_calls").is_null())
            .then(pl.lit("new"))
            .when(pl.col("new_calls").is_null())
            .then(pl.lit("base"))
            .otherwise(pl.lit("both"))
            .alias("present"),
            pl.coalesce("is_cast_new", "is_cast_base").fill_null(False).alias("is_cast"),
            (pl.col("new_cpu_ms") - pl.col("base_cpu_ms")).alias("cpu_delta_ms"),
            (pl.col("new_gpu_ms") - pl.col("base_gpu_ms")).alias("gpu_delta_ms"),
        )
        .select(
            "name",
            "present",
            "is_cast",
            "base_calls",
            "new_calls",
            "base_cpu_ms",
            "new_cpu_ms",
            "cpu_delta_ms",
            "base_gpu_ms",
            "new_gpu_ms",
            "gpu_delta_ms",
            "base_max_avg",
            "new_max_avg",
        )
        .sort(pl.col("present") == "both", _SIZE, descending=True, nulls_last=True)
    )


def compare_summaries(base: RunReport, new: RunReport) -> Comparison:
    """Compare two summary-text runs: verdict from the totals, one finding per cause, absent ops shown as
    absent. ``base``/``new`` carry their full op tables. Summary text against a trace is refused."""
    if "cpu_max_ns" not in base.ops.columns or "cpu_max_ns" not in new.ops.columns:
        raise TraceqError(
            "one run is Paddle summary text and the other a trace: a comparison takes two traces or two summaries"
        )
    ops = summary_op_deltas(base.ops, new.ops)
    both = ops.filter(pl.col("present") == "both")
    cpu_d, gpu_d = float(both["cpu_delta_ms"].sum()), float(both["gpu_delta_ms"].sum())
    cpu_total = max(float(both["base_cpu_ms"].sum()), float(both["new_cpu_ms"].sum()), 1e-9)
    min_ms = max(MIN_OP_MS, MIN_OP_SHARE * cpu_total)
    flavour = new.run["flavour"]
    findings: list[Finding] = []
    named: set[str] = set()
    for make in (_casts, _search, _host_growth, _gpu_work):
        finding = make(ops.filter(~pl.col("name").is_in(list(named))), base, new, min_ms, flavour)
        if finding is not None:
            findings.append(finding)
            named.update(finding.evidence.get("ops", {}).keys())
    notes = list(new.notes)
    absent = {side: ops.filter(pl.col("present") == side).height for side in ("base", "new")}
    if absent["base"] or absent["new"]:
        notes.append(
            f"{count(absent['new'], 'op')} appear only in NEW's table and {absent['base']:,} only in BASE's: a paste "
            "or a row limit may have cut them, so they are shown as absent, not as 0 ms, and left out of the totals."
        )
    listed = {s: _sum(ops.filter(pl.col("present").is_in(["both", s])), f"{s}_cpu_ms") for s in ("base", "new")}
    covered = min(_sum(both, f"{side}_cpu_ms") / listed[side] if listed[side] else 1.0 for side in ("base", "new"))
    return Comparison(
        base=base,
        new=new,
        step_time_delta_ms=None,
        waterfall=None,
        findings=findings,
        explained_ms=None,
        unexplained_ms=None,
        verdict=summary_verdict(cpu_d, gpu_d, both.height, min_ms, covered),
        op_deltas=ops,
        steps=pl.DataFrame(),
        notes=notes,
    )


def summary_verdict(
    cpu_delta_ms: float, gpu_delta_ms: float, n_ops: int, min_ms: float = MIN_OP_MS, covered: float = 1.0
) -> str:
    """One sentence from the totals of the ops both tables list, its words from the deltas' signs; changes
    both below ``min_ms`` are noise. ``covered``: the smaller share of a table's CPU time those ops hold;
    below :data:`MIN_COVERED` the ops in common are too few to say which side bounds NEW."""
    ops = "op both tables list" if n_ops == 1 else f"{n_ops:,} ops both tables list"
    totals = (
        f"Over the {ops}, NEW's CPU time is {cpu_delta_ms:+,.0f} ms and its GPU time "
        f"{gpu_delta_ms:+,.0f} ms over the profile"
    )
    if n_ops == 0:
        return "The two tables list no op in common: only each table's own ops can be read."
    if covered < MIN_COVERED:
        why = (
            f"they hold only {covered:.0%} of one table's CPU time, too little to say whether NEW is bound by the "
            "CPU or the GPU (the ops only one table lists are left out)"
        )
    elif max(abs(cpu_delta_ms), abs(gpu_delta_ms)) < min_ms:
        why = "both changes are within noise"
    elif cpu_delta_ms > 0 and cpu_delta_ms > abs(gpu_delta_ms):
        why = "the host side grew more than the GPU work: NEW is CPU-bound (host overhead per op)"
    elif gpu_delta_ms > 0 and gpu_delta_ms >= abs(cpu_delta_ms):
        why = "the GPU work grew more than the host side: NEW's kernels take longer"
    elif cpu_delta_ms <= 0 and gpu_delta_ms <= 0:
        why = "both sides shrank: NEW does less work"
    else:  # one side shrank more than the other grew
        grew = "CPU" if cpu_delta_ms > 0 else "GPU"
        fell = "GPU" if grew == "CPU" else "CPU"
        why = f"the {fell} time saved outweighs the {grew} time added"
    return f"{totals}: {why}. Summary text has no timeline, so this is not a step time."


def _casts(ops: pl.DataFrame, base: RunReport, new: RunReport, min_ms: float, flavour: str) -> Finding | None:
    casts = ops.filter(pl.col("is_cast"))
    if casts.is_empty():
        return None
    calls_b, calls_n = _sum(casts, "base_calls"), _sum(casts, "new_calls")
    cpu_b, cpu_n = _sum(casts, "base_cpu_ms"), _sum(casts, "new_cpu_ms")
    if calls_n <= calls_b and cpu_n - cpu_b < min_ms:
        return None
    more = "more" if calls_n >= calls_b else "fewer"
    return Finding(
        id=CAST_OVERHEAD.id,
        title=f"{abs(calls_n - calls_b):,.0f} {more} dtype-cast calls ({calls_b:,.0f} -> {calls_n:,.0f}), CPU time "
        f"{cpu_b:,.1f} -> {cpu_n:,.1f} ms over the profile ({cpu_n - cpu_b:+,.1f} ms)",
        impact_ms=None,
        evidence={"ops": _op_evidence(casts), "cast_calls": [calls_b, calls_n], "cast_cpu_ms": [cpu_b, cpu_n]},
        next_step=CAST_OVERHEAD.next_step(flavour),
    )


def _search(ops: pl.DataFrame, base: RunReport, new: RunReport, min_ms: float, flavour: str) -> Finding | None:
    """Ops whose longest call is far above their average in NEW only (or BASE only), with CPU time grown."""
    ratio = pl.col("new_max_avg") / pl.col("base_max_avg")
    spiky = ops.filter(
        (pl.col("present") == "both") & (pl.col("new_max_avg") >= SEARCH_MAX_AVG)
        & (ratio >= SEARCH_RATIO_GROWTH) & (pl.col("cpu_delta_ms") >= min_ms)
    )  # fmt: skip
    if spiky.is_empty():
        return None
    cpu_d = _sum(spiky, "cpu_delta_ms")
    worst = spiky.row(0, named=True)
    return Finding(
        id=ALGORITHM_SEARCH.id,
        title=f"Algorithm search on new shapes likely: {worst['name']}'s longest call is {worst['new_max_avg']:.0f}x "
        f"its average in NEW against {worst['base_max_avg']:.0f}x in BASE; the {count(spiky.height, 'op')} with this "
        f"signature take {cpu_d:,.1f} ms more CPU time over the profile",
        impact_ms=None,
        evidence={"ops": _op_evidence(spiky, with_ratio=True)},
        next_step=ALGORITHM_SEARCH.next_step(flavour),
    )


def _host_growth(ops: pl.DataFrame, base: RunReport, new: RunReport, min_ms: float, flavour: str) -> Finding | None:
    """Ops whose CPU time grew by more than their GPU time: host cost per call (dispatch, launches)."""
    grown = ops.filter(
        (pl.col("present") == "both") & ~pl.col("is_cast") & (pl.col("cpu_delta_ms") >= min_ms)
        & (pl.col("cpu_delta_ms") > pl.col("gpu_delta_ms").fill_null(0))
    )  # fmt: skip
    if grown.is_empty():
        return None
    cpu_d, their = _sum(grown, "cpu_delta_ms"), "its" if grown.height == 1 else "their"
    return Finding(
        id=LAUNCH_OVERHEAD.id,
        title=f"CPU time of {count(grown.height, 'op')} grew by {cpu_d:,.1f} ms over the profile while {their} GPU "
        f"time changed by {_sum(grown, 'gpu_delta_ms'):+,.1f} ms: host cost per call, not GPU work",
        impact_ms=None,
        evidence={"ops": _op_evidence(grown)},
        next_step=LAUNCH_OVERHEAD.next_step(flavour),
    )


def _gpu_work(ops: pl.DataFrame, base: RunReport, new: RunReport, min_ms: float, flavour: str) -> Finding | None:
    both = ops.filter((pl.col("present") == "both") & (pl.col("gpu_delta_ms").abs() >= min_ms))
    if both.is_empty():
        return None
    gpu_d = _sum(both, "gpu_delta_ms")
    if abs(gpu_d) < min_ms:
        return None
    return Finding(
        id=GPU_COMPUTE.id,
        title=f"GPU time of the ops both tables list {'grew' if gpu_d > 0 else 'fell'} by {abs(gpu_d):,.1f} ms over "
        "the profile",
        impact_ms=None,
        evidence={"ops": _op_evidence(both.sort(pl.col("gpu_delta_ms").abs(), descending=True), gpu=True)},
        next_step=GPU_COMPUTE.next_step(flavour),
    )


def _op_evidence(ops: pl.DataFrame, with_ratio: bool = False, gpu: bool = False) -> dict[str, str]:
    out = {}
    for row in ops.head(EVIDENCE_OPS).iter_rows(named=True):
        calls = f"calls {row['base_calls'] or 0:,} -> {row['new_calls'] or 0:,}"
        if gpu:
            text = f"GPU {row['base_gpu_ms'] or 0:,.1f} -> {row['new_gpu_ms'] or 0:,.1f} ms, {calls}"
        else:
            text = f"CPU {row['base_cpu_ms'] or 0:,.1f} -> {row['new_cpu_ms'] or 0:,.1f} ms, {calls}"
        if with_ratio:
            text += f", longest call / average {row['base_max_avg']:.1f} -> {row['new_max_avg']:.1f}"
        out[row["name"]] = text
    return out


def _sum(frame: pl.DataFrame, col: str) -> float:
    return float(frame[col].fill_null(0).sum())
