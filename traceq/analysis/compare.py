"""``traceq report --compare BASE NEW``: why one run's step is slower (or faster) than another's, by cause.

Each run's step is split into GPU busy parts and GPU idle causes that add up to its window
(:mod:`traceq.analysis.split`); the step-time difference is the sum of the parts' differences, so the
waterfall closes exactly. A part that changed enough to matter becomes a finding with both runs'
evidence and a next step for that cause; what the findings leave out is ``unexplained_ms``. Every title
and the verdict are worded from the signs of the numbers they carry. Positive numbers mean NEW is slower.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from traceq._utils.words import fixed
from traceq.analysis import ranks as rank_views
from traceq.analysis.causes import CAUSES, GPU_COMPUTE
from traceq.analysis.findings import Finding, Part, Waterfall
from traceq.analysis.report import run_report
from traceq.analysis.results import Comparison, RunReport
from traceq.analysis.split import Split
from traceq.analysis.summary_compare import compare_summaries
from traceq.errors import TraceqError
from traceq.querying.engine import Session, stored_metrics
from traceq.store import Store

#: A part is a finding when it changed by at least this many ms per step and this share of the longer
#: step (smaller changes are within the step-to-step noise of a few profiled steps).
MIN_IMPACT_MS = 0.25
MIN_IMPACT_SHARE = 0.02
#: Traces with fewer steps than this give noisy means.
FEW_STEPS = 3


def compare(
    base_ref: str,
    new_ref: str,
    store: Store | str | Path | None = None,
    base_step_ms: float | None = None,
    new_step_ms: float | None = None,
    session: Session | tuple[Session, Session] | None = None,
    lanes: bool = True,
) -> Comparison:
    """Compare two stored runs (run ids or names; :func:`traceq.compare` also takes trace files, ingested
    first): waterfall, findings, verdict. ``base_step_ms``/``new_step_ms``: step times measured without the
    profiler; the verdict then states the real difference and by how much the profiler made the traced one
    larger or smaller.
    Each run's report carries every op. ``session``: one over both runs (and maybe others) whose metric
    results are shared, or BASE's and NEW's (:func:`comparison_sessions`); by default they are opened for
    the two. ``lanes``: each run's representative step's lanes (which only the HTML page draws), as
    :func:`~traceq.analysis.report.run_report` takes them."""
    store = Store.of(store)
    base_id, new_id = store.resolve(base_ref), store.resolve(new_ref)
    measured = _measured(base_step_ms, new_step_ms)
    if session is not None:
        sessions = session if isinstance(session, tuple) else (session, session)
        return _compare(base_id, new_id, store, sessions, measured, lanes)
    with comparison_sessions(store, base_id, new_id) as sessions:
        return _compare(base_id, new_id, store, sessions, measured, lanes)


@contextmanager
def comparison_sessions(store: Store, base_id: str, new_id: str) -> Iterator[tuple[Session, Session]]:
    """The sessions a comparison reads BASE's and NEW's metrics from: one over both runs (both runs'
    metrics in one pass), given twice; or where one run has metrics stored that the other lacks, one per
    run (a session over both would compute them for both: it reads stored results only where every run
    has them)."""
    if stored_metrics(store.runs_dir, base_id) == stored_metrics(store.runs_dir, new_id):
        with Session(store, [base_id, new_id], own_queries=True) as one:
            yield one, one
        return
    with Session(store, [base_id], own_queries=True) as base, Session(store, [new_id], own_queries=True) as new:
        yield base, new


def _measured(base_ms: float | None, new_ms: float | None) -> dict[str, float] | None:
    if base_ms is None and new_ms is None:
        return None
    if base_ms is None or new_ms is None or base_ms <= 0 or new_ms <= 0:
        raise TraceqError("measured step times need both BASE's and NEW's, each above 0 ms")
    return {"base_ms": base_ms, "new_ms": new_ms, "delta_ms": new_ms - base_ms}


def _compare(
    base_id: str,
    new_id: str,
    store: Store,
    sessions: tuple[Session, Session],
    measured: dict[str, float] | None = None,
    lanes: bool = True,
) -> Comparison:
    """The comparison, each run's metrics from its session of ``sessions`` (BASE's, NEW's: one session
    twice, or one per run)."""
    base, new = run_report(base_id, store, sessions[0], lanes), run_report(new_id, store, sessions[1], lanes)
    if not (base.has_timeline and new.has_timeline):
        return compare_summaries(base, new)
    op_deltas = _op_deltas(base.ops, new.ops)
    assert base.split is not None and new.split is not None
    b, n = base.split, new.split
    delta = n.window_ms - b.window_ms
    longer = max(b.window_ms, n.window_ms)
    bp, np_ = b.parts(), n.parts()
    waterfall = Waterfall(tuple(Part(c, CAUSES[c].label, bp[c], np_[c]) for c in bp), delta)
    threshold = max(MIN_IMPACT_MS, MIN_IMPACT_SHARE * longer)
    flavour = new.run["flavour"]
    findings = [
        _change(c, bp[c], np_[c], base.evidence.get(c, {}), new.evidence.get(c, {}), flavour, n.window_ms)
        for c in bp
        if abs(np_[c] - bp[c]) >= threshold
    ]
    findings.sort(key=lambda f: -abs(f.impact_ms or 0.0))
    explained = sum(f.impact_ms or 0.0 for f in findings)
    notes = []
    if measured is None and max(new.summary.launch_bound_ratio or 0, base.summary.launch_bound_ratio or 0) >= 0.2:
        notes.append(
            "Profiled step times include the profiler's own CPU cost per op: a launch-bound run is slowed more "
            "by the profiler, so the traced difference can exceed the difference measured without it."
        )
    if measured is not None:
        measured = {**measured, "traced_delta_ms": delta}
    steps = pl.concat(
        [
            base.steps.select("rank", "step", "window_ns", "busy_ns", "idle_ns").with_columns(run=pl.lit("base")),
            new.steps.select("rank", "step", "window_ns", "busy_ns", "idle_ns").with_columns(run=pl.lit("new")),
        ]
    )
    ranks = pl.DataFrame()
    if not (base.ranks.is_empty() and new.ranks.is_empty()):
        ranks = rank_views.aligned(_per_rank(base, sessions[0]), _per_rank(new, sessions[1]))
        if ranks.null_count().sum_horizontal().item():
            notes.append(
                f"The runs have different ranks (BASE {base.run['n_ranks']}, NEW {new.run['n_ranks']}): "
                "the rank-aligned table compares the ranks both have; the waterfall compares means over all."
            )
    warnings = comparability(base, new)
    return Comparison(
        base=base,
        new=new,
        step_time_delta_ms=delta,
        waterfall=waterfall,
        findings=findings,
        explained_ms=explained,
        unexplained_ms=delta - explained,
        verdict=verdict(delta, b, n, findings, measured, warnings),
        op_deltas=op_deltas,
        steps=steps,
        notes=notes,
        ranks=ranks,
        warnings=warnings,
        measured=measured,
    )


#: A part holding at least this share of NEW's step still calls for its fix, even where it shrank.
STILL_LARGE_SHARE = 0.2


def _change(
    cause: str, b: float, n: float, ev_b: dict[str, Any], ev_n: dict[str, Any], flavour: str | None, step_ms: float
) -> Finding:
    """The finding for one part that changed: its title says which way, by how much, from what to what; a
    part that shrank but still holds a large share of NEW's step (``step_ms``) keeps its fix."""
    d = n - b
    way = "grew" if d > 0 else "fell"
    title = f"{CAUSES[cause].change} {way} by {fixed(abs(d))} ms per step ({fixed(b)} -> {fixed(n)} ms)"
    detail = _mechanism(cause, ev_b, ev_n)
    if detail:
        title += f"; {detail}"
    step = change_next_step(cause, d, n, step_ms, flavour, "traced")
    return Finding(id=cause, title=title, impact_ms=d, evidence=_paired(ev_b, ev_n), next_step=step)


def change_next_step(cause: str, change_ms: float, new_ms: float, step_ms: float, flavour: str | None,
                     basis: str) -> str:  # fmt: skip
    """What to do about a part that changed by ``change_ms`` (NEW minus BASE) and holds ``new_ms`` of NEW's
    ``step_ms``, on the ``basis`` named ("traced", or "estimated" without the profiler): its fix where it grew
    or still holds a large share of the step, "no action needed" only where it shrank and is small."""
    if change_ms > 0:
        return CAUSES[cause].next_step(flavour)
    if cause == GPU_COMPUTE.id:
        return "Kernels got faster: the parts that grew say where the saving went."
    if step_ms > 0 and new_ms >= STILL_LARGE_SHARE * step_ms:
        return (
            f"{CAUSES[cause].label.capitalize()} cost less in NEW than in BASE but still takes {new_ms:.2f} of "
            f"NEW's {step_ms:.2f} ms {basis} step ({new_ms / step_ms:.0%}): "
            f"{_lower_first(CAUSES[cause].next_step(flavour))}"
        )
    return f"No action needed: {CAUSES[cause].label} cost less in NEW than in BASE."


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _paired(ev_b: dict[str, Any], ev_n: dict[str, Any]) -> dict[str, Any]:
    """Both runs' evidence, key by key, as ``[BASE, NEW]``."""
    return {k: [ev_b.get(k), ev_n.get(k)] for k in dict.fromkeys([*ev_b, *ev_n])}


def _mechanism(cause: str, ev_b: dict[str, Any], ev_n: dict[str, Any]) -> str:
    """A count that shows the mechanism before and after (syncs, searches, casts per step: the cause's
    :attr:`~traceq.analysis.causes.Cause.count`), where one does."""
    c = CAUSES[cause].count
    if c is None or (ev_b.get(c.key) is None and ev_n.get(c.key) is None):
        return ""
    return f"{c.of(ev_b):{c.fmt}} -> {c.of(ev_n):{c.fmt}} {c.words}"


def comparability(base: RunReport, new: RunReport) -> list[str]:
    """Why BASE and NEW may not compare like for like, and what can still be compared."""
    out = []
    b, n = base.run, new.run
    if b["devices"] and n["devices"] and b["devices"] != n["devices"]:
        out.append(
            f"BASE ran on {', '.join(b['devices'])} and NEW on {', '.join(n['devices'])}: kernel times differ "
            "by GPU, so compare causes of idle time, not GPU compute."
        )
    if b["flavour"] != n["flavour"]:
        out.append(
            f"BASE was recorded by {b['flavour']} and NEW by {n['flavour']}: the profilers' own CPU costs "
            "differ (nsys adds far less per op than torch.profiler), so launch and Python times do not compare; "
            "GPU busy time does."
        )
    bs, ns = base.summary.steps or 0, new.summary.steps or 0
    whole = [label for label, r in (("BASE", base), ("NEW", new)) if (r.summary.steps or 0) == 1
             and r.summary.step_rule == "whole capture"]  # fmt: skip
    if whole:
        out.append(
            f"{' and '.join(whole)} has no steps: its one window is the whole capture, so 'per step' compares a "
            "capture with a step (profile with steps, or ingest with --steps-from)."
        )
    elif min(bs, ns) < FEW_STEPS:
        out.append(f"BASE has {bs} and NEW {ns} steps: means over so few steps are noisy.")
    b_gpu = (base.summary.gpu_busy_ms or 0) > 0
    n_gpu = (new.summary.gpu_busy_ms or 0) > 0
    if b_gpu != n_gpu:
        out.append(f"{'NEW' if b_gpu else 'BASE'} has no GPU work: only host time and op CPU times compare.")
    return out


def verdict(
    delta: float,
    b: Split,
    n: Split,
    findings: list[Finding],
    measured: dict[str, float] | None = None,
    warnings: list[str] | None = None,
) -> str:
    """The comparison in a sentence or two whose words agree with the signs of their numbers: the traced
    difference, the parts that moved it each way, the measured difference where given, and a caution where
    the runs do not compare like for like."""
    text = _traced(delta, b, n, findings)
    if measured is not None:
        real = measured["delta_ms"]
        times = f"({measured['base_ms']:,.1f} -> {measured['new_ms']:,.1f} ms)"
        head = f"Measured without the profiler, {_moved(real)} {times}"
        if _nil(delta - real):
            text = f"{head}; the traced difference is the same. Traced: {text}"
        elif _nil(real) or _nil(delta) or (real > 0) == (delta > 0):
            size = "larger" if abs(delta) > abs(real) else "smaller"
            text = f"{head}; the profiler made the traced difference {abs(delta - real):,.1f} ms {size}. Traced: {text}"
        else:
            text = (
                f"{head}: the profiler reverses the traced direction, so weigh the causes against this. Traced: {text}"
            )
    if warnings:
        text += " Compare with care: " + " ".join(warnings)
    return text


def _moved(delta: float) -> str:
    """``NEW is 1.2 ms per step slower``, ``... faster``, or the same where it rounds to 0.0 ms."""
    if _nil(delta):
        return "NEW takes the same time per step as BASE"
    return f"NEW is {abs(delta):,.1f} ms per step {'slower' if delta > 0 else 'faster'}"


def _nil(ms: float) -> bool:
    """Whether ``ms`` reads 0.0 to one decimal, as the verdict writes ms per step."""
    return abs(ms) < 0.05


def _traced(delta: float, b: Split, n: Split, findings: list[Finding]) -> str:
    """The traced difference and the findings that moved it each way, largest first."""
    head = f"{_moved(delta)} ({b.window_ms:,.1f} -> {n.window_ms:,.1f} ms)"
    if not findings:
        return f"{head}: within noise, no part changed enough to name."
    same = [f for f in findings if (f.impact_ms or 0.0) * delta > 0][:3]
    against = [f for f in findings if (f.impact_ms or 0.0) * delta < 0][:2]

    def named(group: list[Finding]) -> str:
        items = [f"{CAUSES[f.id].label} {f.impact_ms or 0.0:+,.1f} ms" for f in group]
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

    if not same:
        return f"{head}: the parts that changed ({named(against)}) nearly cancel; the rest is below the threshold."
    if not against:
        return f"{head}: {named(same)}."
    verb = "outweighs" if len(same) == 1 else "outweigh"
    return f"{head}: {named(same)} {verb} {named(against)}."


def _per_rank(report: RunReport, session: Session) -> pl.DataFrame:
    """A run's per-rank table (for a one-rank run, its one rank), from the same query as the report's."""
    if not report.ranks.is_empty():
        return report.ranks
    balance = session.query("rank_balance").filter(pl.col("run_id") == report.run["run_id"])
    return rank_views.per_rank(balance)


def _op_deltas(base: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """Per op name: CPU time and the GPU time it caused (launched by it or beneath it) per step in each run,
    and NEW minus BASE, largest change first (of CPU or GPU time, either way), from each trace's full op
    list (an op in one run only is 0 ms in the other; summary text, where an op may be absent, is
    :func:`traceq.analysis.summary_compare.summary_op_deltas`)."""
    if base.is_empty() and new.is_empty():
        return pl.DataFrame()
    cpu, gpu = ("cpu_incl_ns_per_step", "gpu_incl_ns_per_step") if "cpu_incl_ns_per_step" in new.columns else (
        "cpu_incl_ns", "gpu_ns")  # fmt: skip
    cols = ["name", cpu, gpu]
    joined = new.select(cols).join(base.select(cols), on="name", how="full", coalesce=True, suffix="_base")
    joined = joined.fill_null(0)
    return joined.select(
        "name",
        (pl.col(f"{cpu}_base") / 1e6).alias("base_cpu_ms"),
        (pl.col(cpu) / 1e6).alias("new_cpu_ms"),
        ((pl.col(cpu) - pl.col(f"{cpu}_base")) / 1e6).alias("cpu_delta_ms"),
        (pl.col(f"{gpu}_base") / 1e6).alias("base_gpu_ms"),
        (pl.col(gpu) / 1e6).alias("new_gpu_ms"),
        ((pl.col(gpu) - pl.col(f"{gpu}_base")) / 1e6).alias("gpu_delta_ms"),
    ).sort(_CHANGE_SIZE, "name", descending=[True, False])


#: An op's change: the larger of its CPU and GPU time changes, either way.
_CHANGE_SIZE = pl.max_horizontal(pl.col("cpu_delta_ms").abs(), pl.col("gpu_delta_ms").abs())
