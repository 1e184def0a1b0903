"""The replay's Python API: reproduce the traced steps, estimate them without the profiler, ask what a fix
would save. Everything returns polars frames or dataclasses at full precision (reports round them as they
write them)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import polars as pl

from traceq._utils.words import count
from traceq.analysis.replay.engine import Replay, Scenario, replay
from traceq.analysis.replay.estimates import Estimate
from traceq.analysis.replay.graph import Graph, build_graph
from traceq.analysis.replay.overhead import (
    BAND_FLOOR,
    NSYS_CAPTURES,
    NSYS_FLAVOUR,
    NSYS_PLAIN_CAPTURES,
    SEARCH_FLAVOUR,
    SEARCH_HIGH,
    SEARCH_INFLATION,
    SEARCH_LOW,
    OverheadModel,
    band_width,
    model_for,
    overhead_scenario,
)
from traceq.analysis.replay.speed import step_spread
from traceq.analysis.replay.timeline import Timeline, timeline_from_frames
from traceq.analysis.replay.whatif import CHANGES, FIXES, SCENARIOS
from traceq.querying.engine import Session

#: The query files whose rows of one run a replay fetches, read once (:meth:`Session.fetch`: no table made).
FETCHED = ("replay_host", "replay_gpu", "replay_steps")
#: The query files a replay reads as the session's tables (made once per session, for all its runs; a
#: report reads them too).
SHARED = ("_windows", "_search_calls")
#: Every query file a replay reads.
QUERIES = FETCHED + SHARED


def load_timeline(session: Session, run_id: str, rank: int | None = None) -> Timeline:
    """Load ``run_id`` (rank ``rank``; by default its lowest rank) from ``session`` (whose runs must
    include it)."""
    run = session.run_row(run_id)
    return timeline_of(session, run_id, run.get("flavour") or "", events_by_kind(run), rank)


def events_by_kind(run: dict[str, Any]) -> dict[str, int]:
    """A catalog row's events by kind (its JSON column read)."""
    return json.loads(run.get("events_by_kind") or "{}")


def timeline_of(
    session: Session, run_id: str, flavour: str, counts: dict[str, int], rank: int | None = None
) -> Timeline:
    """:func:`load_timeline` of a run whose catalog row is not in ``session`` (one being ingested): its
    ``flavour`` and events by kind (``counts``) given."""
    host_query, *others = FETCHED
    host = session.fetch(host_query, run_id)
    if rank is None:  # a one-file run keeps the rank its trace declares
        rank = host["rank"].min()  # type: ignore[assignment]
        rank = 0 if rank is None else int(rank)  # type: ignore[arg-type]
    frames = [session.fetch(name, run_id, rank) for name in others]
    shared = [session.query(name) for name in SHARED]
    return timeline_from_frames(run_id, rank, flavour, counts, host, *frames, *shared)


class Replayer:
    """One rank of one run, loaded and analysed once, for several replays."""

    def __init__(self, timeline: Timeline, model: OverheadModel | None = None) -> None:
        self.timeline = timeline
        self.graph: Graph = build_graph(timeline)
        self.model = model or model_for(timeline.flavour, timeline.shaped)
        self._cache: dict[str, Replay] = {}
        self._estimates: dict[float, Estimate] = {}

    @classmethod
    def load(
        cls, session: Session, run_id: str, rank: int | None = None, model: OverheadModel | None = None
    ) -> Replayer:
        return cls(load_timeline(session, run_id, rank), model)

    def run(self, scenario: Scenario | None = None) -> Replay:
        """Replay under ``scenario`` (the trace unchanged by default)."""
        return replay(self.graph, scenario)

    def _cached(self, key: str, make: Any) -> Replay:
        if key not in self._cache:
            self._cache[key] = self.run(make())
        return self._cache[key]

    def traced(self) -> Replay:
        return self._cached("traced", lambda: None)

    def unprofiled_replay(self, model: OverheadModel | None = None, host_scale: float = 1.0) -> Replay:
        model = model or self.model
        return self._cached(
            f"unprofiled:{model}:{host_scale}", lambda: overhead_scenario(self.graph, model, host_scale=host_scale)
        )

    def reproduce(self) -> pl.DataFrame:
        """Per step: the traced window (``_windows``; for steps from NVTX ranges, the same rule computed on
        the recorded times), the unchanged replay's, and their difference."""
        traced = self.timeline.windows.select("step", traced_ms=(pl.col("win_end") - pl.col("win_start")) / 1e6)
        replayed = self.traced().windows.select("step", replayed_ms="ms")
        out = traced.join(replayed, on="step", how="full", coalesce=True, nulls_equal=True).sort("step")
        return out.with_columns(
            diff_ms=pl.col("replayed_ms") - pl.col("traced_ms"),
            diff_pct=(pl.col("replayed_ms") - pl.col("traced_ms")) / pl.col("traced_ms") * 100,
        )

    def unprofiled(self, host_scale: float = 1.0) -> Estimate:
        """The step time without the profiler's host cost, with its band; ``host_scale`` multiplies the
        host CPU time left (a host-speed normalisation against another trace). Made once per scale."""
        if host_scale not in self._estimates:
            self._estimates[host_scale] = self._unprofiled(host_scale)
        return self._estimates[host_scale]

    def _unprofiled(self, host_scale: float) -> Estimate:
        base = self.traced()
        mid = self.unprofiled_replay(self.model, host_scale)
        steps = mid.windows["ms"]
        cv = float(steps.std() / steps.mean()) if steps.len() > 1 and steps.mean() else 0.0  # type: ignore[operator]
        width = band_width(base.step_ms, mid.step_ms, cv) + self._search_width(mid.step_ms, host_scale)
        low_f, high_f = self._alpha_span(mid.step_ms, host_scale)
        low_f, high_f = min(low_f, math.exp(-width)), max(high_f, math.exp(width))
        cap_f = math.exp(BAND_FLOOR)  # without the profiler a step is not slower than traced, but for noise
        per_step = (
            base.windows.select("step", traced_ms="ms")
            .join(mid.windows.select("step", unprofiled_ms="ms"), on="step", how="left")
            .with_columns(
                low_ms=pl.col("unprofiled_ms") * low_f,
                high_ms=pl.min_horizontal(
                    pl.col("unprofiled_ms") * high_f, pl.max_horizontal("traced_ms", "unprofiled_ms") * cap_f
                ),
            )
        )
        tl = self.timeline
        notes = [
            f"replayed {count(tl.n_steps, 'step')} of {count(tl.n_events, 'event')}; profiler cost per host "
            f"transition taken from the trace (alpha={self.model.alpha:g}); the band (x{low_f:.2f} to "
            f"x{high_f:.2f}) "
            + (
                "is the wider of the calibration's errors, which grow with the share of the traced step removed, "
                "and the range of alpha below"
                if tl.flavour == NSYS_FLAVOUR
                else "grows with the share of the traced step removed, as the calibration's errors did"
            ),
        ]
        if tl.stacks:
            notes.append(
                "Python stacks were recorded: the tracer's cost is large and less certain "
                f"(pure Python time less {self.model.beta:g})"
            )
        if tl.flavour == NSYS_FLAVOUR:
            kind, n = ("op ranges with input shapes", NSYS_CAPTURES) if tl.shaped else (
                "op ranges without shapes", NSYS_PLAIN_CAPTURES)  # fmt: skip
            notes.append(
                f"Nsight Systems capture: the estimate removes the host cost of its NVTX {kind} and traced CUDA calls "
                f"with the alpha that {n} such captures measured without nsys needed (their median; the band spans "
                f"{self.model.alpha_low:g} to {self.model.alpha_high:g}, the range of their needs rounded out)"
            )
        if self._searched():
            notes.append(
                f"{count(int(tl.host['search'].sum()), 'call')} searched for algorithms: their host time is taken as "
                f"{SEARCH_INFLATION:g}x shorter without torch.profiler (the runs measured took {SEARCH_LOW:g}x to "
                f"{SEARCH_HIGH:g}x), and the band spans that range"
            )
        if host_scale != 1.0:
            notes.append(f"host CPU time scaled by {host_scale:.3f} to the speed of the trace it is compared with")
        if tl.fixed_steps:  # windows fixed in time (see timeline)
            notes.append(
                "no steps on the host: the one window is the capture's span, which a replay cannot shorten"
                if tl.steps.height == 1
                else f"the {tl.steps.height} steps are bounded by no host range: the replay keeps their bounds as "
                "traced, so it cannot shorten them"
            )
        elif tl.between_ranges:
            notes.append(
                f"the {tl.steps.height} steps are the stretches between optimizer steps: each runs from one "
                "optimizer step's end to the next's, as replayed"
            )
        spread = step_spread(tl)
        if spread is not None and spread > 0.15:
            notes.append(
                f"host speed varied {spread:.0%} between steps (the same trivial ops took that much longer in the "
                "slowest step than in the fastest): compare runs traced under the same load"
            )
        return Estimate(
            run_id=tl.run_id,
            traced_ms=base.step_ms,
            step_ms=mid.step_ms,
            low_ms=mid.step_ms * low_f,
            high_ms=min(mid.step_ms * high_f, max(base.step_ms, mid.step_ms) * cap_f),
            per_step=per_step,
            notes=notes,
            width=width,
            host_scale=host_scale,
        )

    def _searched(self) -> bool:
        """Whether the profiler's slowing of algorithm searches is taken out of this run (see ``overhead``)."""
        tl = self.timeline
        return self.model.search > 1 and tl.flavour == SEARCH_FLAVOUR and bool(tl.host["search"].any())

    def _alpha_span(self, step_ms: float, host_scale: float) -> tuple[float, float]:
        """For an Nsight Systems capture, the estimates at the ends of ``alpha``'s range over ``step_ms``:
        the band spans them where they lie beyond the calibration's errors. (1, 1) for other traces, whose
        band is the calibration's errors alone."""
        if self.timeline.flavour != NSYS_FLAVOUR or step_ms <= 0:
            return 1.0, 1.0
        more, less = (replace(self.model, alpha=a) for a in (self.model.alpha_high, self.model.alpha_low))
        low, high = (self._step_ms(m, host_scale) / step_ms for m in (more, less))
        return min(low, 1.0), max(high, 1.0)

    def _search_width(self, step_ms: float, host_scale: float) -> float:
        """What the range of the search factor adds to the band's log half-width (0 without searches)."""
        if not self._searched() or step_ms <= 0:
            return 0.0
        ends = (replace(self.model, search=f) for f in (SEARCH_LOW, SEARCH_HIGH))
        return max(abs(math.log(self._step_ms(m, host_scale) / step_ms)) for m in ends)

    def _step_ms(self, model: OverheadModel, host_scale: float) -> float:
        """The step time of the replay without the profiler under ``model``, the replay not kept (a band's
        end: only its step time is read, and each replay holds times for every node and GPU event)."""
        return self.run(overhead_scenario(self.graph, model, host_scale=host_scale)).step_ms

    def what_if(self, causes: list[str] | None = None) -> pl.DataFrame:
        """Per cause: the unprofiled step time with that cause removed or changed (``FIXES``), and the saving
        against the unprofiled step time, with its band (the same scenario over the band's models)."""
        causes = list(SCENARIOS) if causes is None else causes
        unknown = [c for c in causes if c not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown causes {unknown}; known: {sorted(SCENARIOS)}")
        models = (self.model, *self.model.band())
        bases = [overhead_scenario(self.graph, m) for m in models]
        base_ms = [self.unprofiled_replay(m).step_ms for m in models]
        rows = []
        for cause in causes:
            change = CHANGES[cause](self.graph)
            outs = [self.run(change.apply(self.graph, b, cause)) for b in bases]
            savings = [b - o.step_ms for b, o in zip(base_ms, outs, strict=True)]
            rows.append(
                {
                    "cause": cause,
                    "fix": FIXES[cause],
                    "step_ms": outs[0].step_ms,
                    "saving_ms": savings[0],
                    "saving_low": min(savings),
                    "saving_high": max(savings),
                    "saving_pct": savings[0] / base_ms[0] * 100 if base_ms[0] else None,
                    "notes": change.note,
                }
            )
        return pl.DataFrame(rows)


def replayer(session: Session, run_id: str, rank: int | None = None, model: OverheadModel | None = None) -> Replayer:
    """A :class:`Replayer` for ``run_id`` (a run id of the session's store) and ``rank``."""
    return Replayer.load(session, run_id, rank, model)


def reproduce(session: Session, run_id: str, rank: int | None = None) -> pl.DataFrame:
    """Per step: traced window, unchanged replay, difference (ms and %)."""
    return replayer(session, run_id, rank).reproduce()


def unprofiled(session: Session, run_id: str, rank: int | None = None, model: OverheadModel | None = None) -> Estimate:
    """The step time without the profiler (see :meth:`Replayer.unprofiled`)."""
    return replayer(session, run_id, rank, model).unprofiled()


def what_if(
    session: Session,
    run_id: str,
    causes: list[str] | None = None,
    rank: int | None = None,
    model: OverheadModel | None = None,
) -> pl.DataFrame:
    """Predicted step time and saving per cause (see :meth:`Replayer.what_if`)."""
    return replayer(session, run_id, rank, model).what_if(causes)
