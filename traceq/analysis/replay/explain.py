"""The replay in reports: each finding's ``what_if_ms``, the step time without the profiler, and the
comparison's verdict on estimated step times.

``report --what-if`` replays the run with each cause the replay models removed or changed
(:data:`~traceq.analysis.replay.whatif.FIXES`) and gives every finding of such a cause the predicted saving
(ms per step, against the step estimated without the profiler). ``report --unprofiled`` adds that
estimate with its band; on a comparison it states the verdict on the estimated step times and says when
it flips the traced one. Step times measured without the profiler (``--base-step-ms``/``--new-step-ms``)
win: the verdict keeps them and the estimate is shown beside them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import overload

import polars as pl

from traceq.analysis.compare import change_next_step, compare, comparison_sessions
from traceq.analysis.findings import Finding
from traceq.analysis.replay.estimates import NO_CHANGE_PCT, NOT_ESTIMATED, Estimate, Verdict, change_words
from traceq.analysis.replay.idle_split import IDLE_PIECES, estimated_split, estimated_waterfall, idle_scale_by_cause
from traceq.analysis.replay.overhead import counts_not_modelled
from traceq.analysis.replay.replayer import QUERIES, Replayer, events_by_kind, timeline_of
from traceq.analysis.replay.stored import stored_estimate, write_estimate
from traceq.analysis.replay.verdict import compare_replayers
from traceq.analysis.report import run_report
from traceq.analysis.results import Comparison, RunReport, Split
from traceq.querying.engine import Session, available_memory
from traceq.querying.files import dependency_order
from traceq.store import Store


def with_what_if(findings: list[Finding], what_if: pl.DataFrame) -> list[Finding]:
    """``findings`` with ``what_if_ms`` set from ``what_if`` (a :meth:`Replayer.what_if` frame) for each
    finding whose id is a cause the replay models (the others unchanged)."""
    saving = dict(zip(what_if["cause"].to_list(), what_if["saving_ms"].to_list(), strict=True))
    return [dataclasses.replace(f, what_if_ms=saving[f.id]) if f.id in saving else f for f in findings]


def with_unprofiled(findings: list[Finding], ms: dict[str, float]) -> list[Finding]:
    """``findings`` with ``unprofiled_ms`` set from ``ms`` (a cause's ms per step, or its change, in the
    step estimated without the profiler) for each finding of a cause it holds."""
    return [dataclasses.replace(f, unprofiled_ms=ms[f.id]) if f.id in ms else f for f in findings]


def with_estimated_changes(
    findings: list[Finding], change: dict[str, float], new_split: Split, step_ms: float, flavour: str | None
) -> list[Finding]:
    """A comparison's ``findings`` with each cause's ``change`` in the step estimated without the profiler
    (``unprofiled_ms``) and the next step that change calls for: a part that fell in the trace but grew
    without the profiler gets its fix, as does one that still holds a large share of NEW's estimated step
    (``new_split``, ``step_ms``), whatever the trace says."""
    out = []
    for f in with_unprofiled(findings, change):
        if f.id in change:
            step = change_next_step(f.id, change[f.id], new_split.part(f.id), step_ms, flavour, "estimated")
            f = dataclasses.replace(f, next_step=step)
        out.append(f)
    return out


def replay_report(
    report: RunReport,
    replayer: Replayer,
    what_if: bool,
    unprofiled: bool,
    session: Session | None = None,
    host_scale: float = 1.0,
) -> RunReport:
    """``report`` with the replay's what-ifs on its findings and the step without the profiler, as asked;
    with the ``session`` the report read, that step split by cause (:func:`split_of_estimate`).
    ``host_scale``: the host speed scaling the estimate was made with (a comparison's)."""
    notes = list(report.notes)
    if report.run.get("n_ranks", 1) > 1:
        notes.append(f"The replay is of rank {replayer.timeline.rank}; the other ranks are not replayed.")
    frame, estimate = pl.DataFrame(), None
    if what_if:
        frame = replayer.what_if()
        notes.append(
            "What-ifs replay the run without the profiler with one cause removed at a time: their savings do "
            "not add up, and launch_overhead and python_overhead share one (CUDA graphs take the host's time "
            "in the step away)."
        )
    findings = with_what_if(report.findings, frame) if what_if else report.findings
    report = dataclasses.replace(report, findings=findings, what_if=frame, notes=notes)
    if not unprofiled:
        return report
    estimate = replayer.unprofiled(host_scale)
    return with_estimate(report, estimate, idle_scale_of(report, replayer, session, host_scale))


def with_estimate(report: RunReport, estimate: Estimate, scale: dict[str, float] | None) -> RunReport:
    """``report`` with the step estimated without the profiler and, where there is a ``scale``
    (:func:`idle_scale_of`), that step split by cause, each finding with its cause's part of it."""
    split = split_of_estimate(report, estimate.step_ms, scale)
    findings = report.findings
    if split is not None:
        findings = with_unprofiled(findings, {c: split.part(c) for c in split.parts()})
    return dataclasses.replace(report, findings=findings, unprofiled=estimate, unprofiled_split=split)


def idle_scale_of(
    report: RunReport, replayer: Replayer, session: Session | None, host_scale: float = 1.0
) -> dict[str, float] | None:
    """How the replay without the profiler scaled each idle cause of ``report``'s run
    (:func:`unprofiled_idle_scale`, from the traced ``_idle_pieces`` of ``session``), or None where its
    estimate is not split: without a session, for a run of several ranks (one is replayed), or where the
    steps are fixed in time."""
    if session is None or report.split is None or report.run.get("n_ranks", 1) != 1:
        return None
    return unprofiled_idle_scale(replayer, session, host_scale)


def unprofiled_idle_scale(replayer: Replayer, session: Session, host_scale: float = 1.0) -> dict[str, float] | None:
    """:func:`idle_scale_by_cause` of the replay without the profiler (``host_scale``: see
    :meth:`~traceq.analysis.replay.replayer.Replayer.unprofiled`), from the traced ``_idle_pieces`` of
    ``session``; None where the steps are fixed in time (an nsys capture's one window, whose end the
    replay cannot move: the time it takes out of gaps would stay in the window as rest)."""
    tl = replayer.timeline
    if tl.fixed_steps:
        return None
    pieces = session.query(IDLE_PIECES)  # made by the report already, unless its metrics were stored
    return idle_scale_by_cause(tl, replayer.unprofiled_replay(replayer.model, host_scale), pieces)


#: Memory a replay takes per event of the run, bytes, rounded up (its timeline, graph and two replays: at
#: most 915 bytes per event for a fresh process that loads and replays a stored run of 1.2-2.9 M events,
#: 580-660 inside an ingest; benchmarks/README.md, "Nineteenth round").
REPLAY_BYTES_PER_EVENT = 1_000
#: The share of the memory available that an ingest lets the replay of its stored estimate take. The rest
#: of an ingest keeps to about 1 GB at any size, but for the metrics made before such a replay, which may
#: take half of what it will (:func:`traceq.ingestion.metrics.metrics_memory_limit`); a run whose replay
#: would need more is left for its reports to replay (the same estimate, computed then).
REPLAY_MEMORY_SHARE = 0.25


def estimate_memory(flavour: str, counts: dict[str, int]) -> int | None:
    """The memory :func:`store_estimate` will take for a run of ``flavour`` with ``counts`` events by kind,
    bytes (:data:`REPLAY_BYTES_PER_EVENT` each), or None where it will not replay the run: that is more
    than the share of the memory available now that an ingest gives it (:data:`REPLAY_MEMORY_SHARE`), or
    the model cannot estimate the run."""
    need = sum(counts.values()) * REPLAY_BYTES_PER_EVENT
    if need > available_memory() * REPLAY_MEMORY_SHARE or counts_not_modelled(flavour, counts):
        return None
    return need


def store_estimate(
    session: Session, folder: Path, flavour: str, counts: dict[str, int], stage: Callable[[str], None]
) -> None:
    """Replay the one run of ``session`` (a rank being ingested, whose diagnosis the session made; its
    ``flavour`` and events by kind, ``counts``, given) and store its estimate without the profiler and
    idle scale in its metrics ``folder`` (:mod:`traceq.analysis.replay.stored`): with :func:`estimate_memory`,
    the :class:`~traceq.ingestion.metrics.WholeRunStep` that :func:`traceq.ingest` and ``traceq ingest`` pass.
    Nothing is stored where :func:`estimate_memory` says the replay will not run; otherwise ``stage`` hears
    that it is being stored."""
    if estimate_memory(flavour, counts) is None:
        return
    stage("storing the step estimated without the profiler")
    (run_id,) = session.runs or [""]
    # of the session's tables only the timeline's blocks and the idle pieces (read again by the idle scale)
    # are kept while the timeline is fetched, the idle pieces alone once it holds its own copies
    session.keep_only({name for name, _ in dependency_order(f"-- Requires: {', '.join(QUERIES)}")} | {IDLE_PIECES})
    with session.memory_limit_lifted():  # the replay has its memory (above): its queries need not spill
        timeline = timeline_of(session, run_id, flavour, counts)
    session.keep_only([IDLE_PIECES])
    replayer = Replayer(timeline)
    write_estimate(folder, replayer.unprofiled(), unprofiled_idle_scale(replayer, session))


def split_of_estimate(report: RunReport, step_ms: float, scale: dict[str, float] | None) -> Split | None:
    """The step of ``report``'s run estimated without the profiler (``step_ms``) split by cause
    (:func:`estimated_split`, each idle cause scaled by ``scale``: :func:`idle_scale_of`), or None
    where there is no scale."""
    if scale is None or report.split is None:
        return None
    return estimated_split(report.split, scale, step_ms)


def explained_report(
    run_id: str,
    store: Store | str | Path | None = None,
    what_if: bool = False,
    unprofiled: bool | None = None,
    lanes: bool = True,
) -> RunReport:
    """The report of a stored run (:func:`~traceq.analysis.report.run_report`, with the representative
    step's ``lanes`` or not) with the replay as asked (:func:`with_replay`), both from one session: the
    replay reuses the report's building blocks."""
    store = Store.of(store)
    with Session(store, [store.resolve(run_id)], own_queries=True) as session:
        return with_replay(run_report(run_id, store, session, lanes), store, what_if, unprofiled, session)


def explained_comparison(
    base_id: str,
    new_id: str,
    store: Store | str | Path | None = None,
    base_step_ms: float | None = None,
    new_step_ms: float | None = None,
    what_if: bool = False,
    unprofiled: bool | None = None,
    lanes: bool = True,
) -> Comparison:
    """The comparison of two stored runs (:func:`~traceq.analysis.compare.compare`) with the replay as
    asked (:func:`with_replay`), both from the comparison's sessions: the replay reuses its building blocks.
    ``lanes``: each run's representative step's lanes, which only the HTML page draws."""
    store = Store.of(store)
    with comparison_sessions(store, store.resolve(base_id), store.resolve(new_id)) as sessions:
        result = compare(base_id, new_id, store, base_step_ms, new_step_ms, session=sessions, lanes=lanes)
        return with_replay(result, store, what_if, unprofiled, sessions)


Sessions = Session | tuple[Session, Session]


def _pair(session: Sessions) -> tuple[Session, Session]:
    """BASE's and NEW's sessions (one report's, or one shared by both runs: the same twice)."""
    return session if isinstance(session, tuple) else (session, session)


@overload
def with_replay(
    result: RunReport,
    store: Store | str | Path | None = ...,
    what_if: bool = ...,
    unprofiled: bool | None = ...,
    session: Sessions | None = ...,
) -> RunReport: ...
@overload
def with_replay(
    result: Comparison,
    store: Store | str | Path | None = ...,
    what_if: bool = ...,
    unprofiled: bool | None = ...,
    session: Sessions | None = ...,
) -> Comparison: ...
def with_replay(
    result: RunReport | Comparison,
    store: Store | str | Path | None = None,
    what_if: bool = False,
    unprofiled: bool | None = None,
    session: Sessions | None = None,
) -> RunReport | Comparison:
    """A run's report or a comparison (of runs in ``store``) with the replay's what-ifs and step times
    without the profiler. ``unprofiled``: None (the default) estimates them wherever the replay can run
    (traces with a timeline and GPU work), True asks for them (a note says why not where it cannot), False
    gives the traced report only. A comparison's verdict then rests on the estimated step times unless
    measured ones were given (they win); each of its findings gets the saving of its fix in NEW, and both
    runs' reports their own what-ifs. ``session``: the session the report or comparison read (a
    comparison's BASE's and NEW's, :func:`~traceq.analysis.compare.comparison_sessions`), whose building
    blocks the replay reuses; by default one is opened."""
    reports = [result] if isinstance(result, RunReport) else [result.base, result.new]
    why_not = _cannot_replay(reports)
    if why_not is None and unprofiled is not False and (unmodelled := _not_modelled(reports, store, session)):
        if what_if:  # asked for: say why there is none
            unmodelled += " The what-ifs replay the same model, so none is made either."
        return dataclasses.replace(result, notes=[unmodelled, *result.notes])  # said whether asked or not
    if unprofiled is None:
        unprofiled = why_not is None
    if not (what_if or unprofiled):
        return result
    if why_not is not None:
        return dataclasses.replace(result, notes=[*result.notes, why_not])
    if session is None:
        run_ids = [r.run["run_id"] for r in reports]
        with Session(Store.of(store), run_ids, own_queries=True) as opened:
            return with_replay(result, store, what_if, unprofiled, opened)
    sessions = _pair(session)
    if isinstance(result, RunReport) and not what_if and (stored := stored_estimate(sessions[0], result.run["run_id"])):
        return with_estimate(result, *stored)  # made at ingest: the run is not replayed again
    replayers = [Replayer.load(s, r.run["run_id"]) for s, r in zip(sessions, reports, strict=False)]
    if isinstance(result, RunReport):
        return replay_report(result, replayers[0], what_if, unprofiled, sessions[0])
    base, new = replayers
    changes: dict[str, object] = {}
    if what_if:
        new_report = replay_report(result.new, new, True, False)
        changes |= {
            "base": replay_report(result.base, base, True, False),
            "new": new_report,
            "findings": with_what_if(result.findings, new_report.what_if),
        }
    if unprofiled:
        verdict = compare_replayers(base, new)
        changes["unprofiled"] = verdict
        changes["verdict"] = unprofiled_verdict(verdict, result)
        changes["notes"] = [*result.notes, *verdict.notes]
        estimates, scales = (verdict.base, verdict.new), (verdict.base_scale, verdict.new_scale)
        sides = zip(reports, replayers, estimates, sessions, scales, strict=True)
        splits = [split_of_estimate(r, e.step_ms, idle_scale_of(r, rp, s, k)) for r, rp, e, s, k in sides]
        n_step = verdict.new.step_ms
        if splits[0] is not None and splits[1] is not None:
            water = estimated_waterfall(splits[0], splits[1])
            findings = changes.get("findings", result.findings)
            changes["unprofiled_waterfall"] = water
            changes["findings"] = with_estimated_changes(
                findings, {p.part: p.delta_ms for p in water.parts}, splits[1], n_step, result.new.run["flavour"]
            )
    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


def _cannot_replay(reports: list[RunReport]) -> str | None:
    """Why the replay cannot run on these reports' runs, or None where it can."""
    if not all(r.has_timeline for r in reports):
        return "Summary text has no timeline to replay."
    if any(not r.summary.kernels_per_step for r in reports):
        return f"{NOT_ESTIMATED}: a run has no GPU work to replay."
    return None


def _not_modelled(reports: list[RunReport], store: Store | str | Path | None, session: Sessions | None) -> str | None:
    """Why the profiler-cost model cannot estimate these reports' runs, or None: :func:`counts_not_modelled`
    of their catalog rows' events by kind (as :func:`estimate_memory` reads them at ingest), read from
    ``session`` (a comparison's: BASE's and NEW's) or else from ``store``'s catalog."""
    if session is None:
        catalog = Store.of(store)
        rows = [catalog.catalog_row(r.run["run_id"]) or {} for r in reports]
    else:
        rows = [s.run_row(r.run["run_id"]) for s, r in zip(_pair(session), reports, strict=False)]
    for r, row in zip(reports, rows, strict=True):
        if why := counts_not_modelled(r.run.get("flavour") or "", events_by_kind(row)):
            return why
    return None


def unprofiled_verdict(verdict: Verdict, result: Comparison) -> str:
    """The comparison's verdict with the estimate without the profiler: first where no step times were
    measured (saying when it flips the traced conclusion), after the measured ones where they were."""
    b, n = verdict.base, verdict.new
    band = f"{verdict.change_low:+,.1f}% to {verdict.change_high:+,.1f}%"
    steps = f"{b.step_ms:,.1f} -> {n.step_ms:,.1f} ms per step"
    head = (
        f"Estimated without the profiler (replay), {change_words(verdict.change_pct)} ({steps}; band {band})"
        f"{verdict.noise}"
    )
    if result.measured is not None:
        real = result.measured["delta_ms"]
        agrees = (real > 0) == (verdict.change_pct > 0)
        return (
            f"{result.verdict} {head}: {'it agrees with' if agrees else 'it disagrees with'} the measured "
            "step times, which the verdict uses."
        )
    traced = verdict.traced_change_pct
    if abs(traced) < NO_CHANGE_PCT:
        head += "; the traced steps say no change" + (
            "." if verdict.uncertain else ": weigh the causes below against the estimate."
        )
    elif verdict.flips and not verdict.uncertain:
        moved = "slower" if traced > 0 else "faster"
        head += (
            f"; the traced steps say NEW is {abs(traced):,.1f}% {moved}: the profiler's own cost flips the traced "
            "conclusion, so weigh the causes below against the estimate."
        )
    elif verdict.uncertain:
        head += f"; the traced steps say {traced:+,.1f}%."
    else:
        head += f"; the traced steps point the same way ({traced:+,.1f}%)."
    return f"{head} Traced: {result.verdict}"
