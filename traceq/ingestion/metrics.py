"""The metric results stored at ingest beside each rank's tables (read back by :mod:`traceq.querying.stored`).

Only ranks of at least :data:`STORE_MIN_EVENTS` events get them: for smaller ones recomputing is
cheaper than storing. The stored results are the same queries of ``queries/`` run over the rank's
tables while they are still in memory, so there is one definition of each metric.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceq.errors import QueryError
from traceq.querying.engine import Session, available_memory
from traceq.querying.files import metric_fingerprint
from traceq.querying.stored import DIAGNOSIS, FINGERPRINT, FOLDER, SUMMARY, stamp_text
from traceq.readers.source import Progress, report_stage
from traceq.store import write_parquet

#: Metrics are stored for ranks with at least this many events. Below it a report computes them from the
#: events in about a second, less than storing them adds to every ingest (benchmarks/README.md,
#: "Constants in the code").
STORE_MIN_EVENTS = 350_000


def stores_metrics(n_events: int) -> bool:
    """Whether a rank of ``n_events`` events gets its metrics stored (not below
    :data:`STORE_MIN_EVENTS`, nor without events, such as summary text)."""
    return n_events >= max(STORE_MIN_EVENTS, 1)


#: The diagnosis (:data:`~traceq.querying.stored.DIAGNOSIS`) is stored too from this many events per rank.
#: It costs about as much as the rest of an ingest, paid once at ingest or by every report: below about
#: 2 M events a report computes it in seconds; above, reports would take tens of seconds and gigabytes
#: each time (README, "Performance"; benchmarks/README.md, "Constants in the code").
DIAGNOSIS_MIN_EVENTS = 2_000_000


def stored_names(n_events: int) -> tuple[str, ...]:
    """The metrics stored for a rank of ``n_events`` events (none where :func:`stores_metrics` says so)."""
    if not stores_metrics(n_events):
        return ()
    return SUMMARY + DIAGNOSIS if n_events >= DIAGNOSIS_MIN_EVENTS else SUMMARY


#: DuckDB's memory limit for the metrics of a rank whose model was built on disk (beyond it, it spills under
#: the system's temporary folder instead of growing with the events) is an eighth of the memory available
#: when they start, within these bounds, bytes: the upper bound keeps the ingest's peak under about 1 GB
#: (where no replay sets it higher: :func:`metrics_memory_limit`), the lower one lets a machine short of
#: memory still finish, more slowly (benchmarks/README.md, eighth and ninth rounds). A query that cannot
#: keep to the limit runs again on fewer DuckDB threads, then without it (see
#: :meth:`traceq.querying.engine.Session.over_ranks`).
BOUNDED_MEMORY_MIN, BOUNDED_MEMORY_MAX = 256 * 10**6, 640 * 10**6


def bounded_memory_limit() -> int:
    """DuckDB's memory limit for the stored metrics of a rank built on disk, bytes, sized from the memory
    available now (see :data:`BOUNDED_MEMORY_MIN`)."""
    return min(max(available_memory() // 8, BOUNDED_MEMORY_MIN), BOUNDED_MEMORY_MAX)


#: The share of the memory a whole-run step will take (:attr:`WholeRunStep.memory`) that the metrics made
#: before it may take where that is more than :func:`bounded_memory_limit`: the step sets the ingest's peak,
#: so the metrics need not spill to keep under a lower one. At 21 copies of an Nsight Systems capture (the
#: replay's 4.6 GB, so 2.3 GB): the report's queries took 12.6 s instead of 16.3 s and wrote 0.5 GB instead
#: of 3.7 GB, the process at 2.5 GB, under the ingest's peak of 3.3 GB (benchmarks/README.md, "Twenty-ninth
#: round").
STEP_MEMORY_SHARE = 0.5


def metrics_memory_limit(bounded: bool, step_memory: int | None = None) -> str | None:
    """DuckDB's memory limit for a rank's stored metrics, as DuckDB reads it (``640MB``): none for a rank
    whose model was built in memory; for one built on disk :func:`bounded_memory_limit`, or
    :data:`STEP_MEMORY_SHARE` of ``step_memory`` (bytes: what the whole-run step after them will take) where
    that is more."""
    if not bounded:
        return None
    limit = max(bounded_memory_limit(), int((step_memory or 0) * STEP_MEMORY_SHARE))
    return f"{limit // 10**6}MB"


#: Metric queries made at once (where this process's share of the cores, Polars' pool, allows): one at a
#: time, DuckDB kept one of two cores busy for most of them (benchmarks/README.md, tenth round).
WORKERS = 2


@dataclass(frozen=True)
class WholeRunStep:
    """A step stored with the metrics of a rank that is a whole run (a one-file run) whose diagnosis is
    stored, and with GPU kernels. The Python API passes the step estimated without the profiler
    (:func:`traceq.analysis.replay.explain.store_estimate` and
    :func:`~traceq.analysis.replay.explain.estimate_memory`); ingest itself knows no analysis. Both are
    module-level functions: the step travels to the ingest's workers by name."""

    #: given the session that made the metrics, the rank's metrics folder, the run's flavour, its events by
    #: kind, and where to name its stage in the ingest's progress (once it knows it has work to do)
    run: Callable[[Session, Path, str, dict[str, int], Callable[[str], None]], None]
    #: given the run's flavour and events by kind: the memory the step will take, bytes (None: it will not
    #: run), a share of which the metrics before it may take (:func:`metrics_memory_limit`)
    memory: Callable[[str, dict[str, int]], int | None]


def save(
    folder: Path,
    n_events: int,
    bounded: bool = False,
    progress: Progress | None = None,
    whole_run: tuple[WholeRunStep, str, dict[str, int]] | None = None,
) -> str | None:
    """Compute and write the stored metrics into one staged rank folder of ``n_events`` events (none
    where :func:`stores_metrics` says so), its fingerprint last. Each result streams from DuckDB into its
    file, so none is held whole. ``bounded``: the rank's model was built on disk, and the metrics keep to
    a memory limit too (:func:`metrics_memory_limit`). ``progress`` hears each metric once it is stored.
    ``whole_run``: where this rank is all of its run, a :class:`WholeRunStep` with the run's flavour and
    events by kind, run after the diagnosis. They are a cache: where one cannot be computed, none is
    stored (reports compute them from the events), and where the whole-run step fails its files are left
    out, the metrics kept; the returned warning says why."""
    names = stored_names(n_events)
    if not names:
        return None
    left_out = None
    if whole_run is not None and not (whole_run[2].get("kernel") and set(DIAGNOSIS) <= set(names)):
        whole_run = None  # (no step: no kernels to replay, or no diagnosis stored)
    limit = metrics_memory_limit(bounded, _step_memory(whole_run))
    (folder / FOLDER).mkdir()
    stored: list[str] = []
    report_stage(progress, f"storing the report metrics: 0 of {len(names)} stored")
    try:
        with Session.over_ranks({0: folder}, memory_limit=limit) as session:

            def write(name: str) -> None:  # as soon as it is made: under a limit, before the next is made
                write_parquet(session.stream(name).drop("run_id", "rank"), folder / FOLDER / f"{name}.parquet")
                stored.append(name)
                report_stage(progress, f"storing the report metrics: {len(stored)} of {len(names)} stored ({name})")

            session.make(names, workers=min(WORKERS, pl.thread_pool_size()), made=write)
            if whole_run is not None:
                left_out = _whole_run_step(session, folder / FOLDER, *whole_run, progress)
    except QueryError as e:
        shutil.rmtree(folder / FOLDER)
        return f"report metrics not stored ({e}); reports compute them from the events"
    (folder / FOLDER / FINGERPRINT).write_text(stamp_text({n: metric_fingerprint(n) for n in stored}))
    return left_out


def _step_memory(whole_run: tuple[WholeRunStep, str, dict[str, int]] | None) -> int | None:
    """What the whole-run step will take (:attr:`WholeRunStep.memory`), or None where there is none or it
    cannot say (whatever it raises: the step is optional, and the metrics then keep to the bounded limit)."""
    if whole_run is None:
        return None
    step, flavour, counts = whole_run
    try:
        return step.memory(flavour, counts)
    except Exception:  # an optional cache must not cost the user the run
        return None


def _whole_run_step(
    session: Session,
    folder: Path,
    step: WholeRunStep,
    flavour: str,
    counts: dict[str, int],
    progress: Progress | None,
) -> str | None:
    """Run ``step`` into the metrics ``folder``; where it fails, whatever the error, what it wrote is
    removed and a warning returned: it is a cache, and the ingest keeps the run (reports compute it, and
    show the error if it is theirs too)."""
    before = set(folder.iterdir())
    try:
        step.run(session, folder, flavour, counts, lambda text: report_stage(progress, text))
    except Exception as e:  # an optional cache must not cost the user the run
        for path in set(folder.iterdir()) - before:
            path.unlink()
        return f"step estimated without the profiler not stored ({type(e).__name__}: {e}); reports replay the run"
    return None
