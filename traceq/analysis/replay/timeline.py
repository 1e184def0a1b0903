"""One rank of one run: the compact frames the replay reads (loaded by :mod:`traceq.analysis.replay.replayer` from
the query files ``replay_host``, ``replay_gpu``, ``replay_steps``, ``_windows`` and ``_search_calls``).

Times are rebased on the rank's first host range or GPU work (``t0_ns``) so that they fit a float exactly.
Host events are the ranges of host threads (ops, stages, Python functions, annotations, runtime calls,
steps); GPU work is kernels, copies and sets, each with its launch call where it was captured. Each host
event carries the idle cause ``_host_marks`` gives it (its own, before nesting), and calls that searched
for an algorithm carry their typical call from ``_search_calls``: the what-if scenarios are built from these.

Steps are the steps table's (the model's one rule: profiler steps, else a user's step ranges such as NVTX
``train_step 3``, else the stretches between optimizer steps). A stretch between optimizer steps runs
from one optimizer step's end to the next's, as replayed; a step bounded by no host range (an Nsight
Systems capture's one window) keeps its recorded window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceq.errors import QueryError
from traceq.schema import KINDS

#: The kind the readers store for ranges where the host blocked on a full launch queue (``schema.KINDS``).
QUEUE_FULL = "queue_full"
#: A host event's kind in the timeline: one byte per event instead of a string.
KIND = pl.Enum(list(KINDS))


@dataclass
class Timeline:
    """The events of one rank of one run that a replay needs.

    ``host``: one row per host range, in event id order (``row`` 0..n-1, its position; the graph's node sort
    and the launches' search rely on that order), ``thread`` index (into ``threads``), ``ts``/``end``
    rebased ns, ``kind`` (:data:`KIND`), name, step, depth, ``cause`` from ``_host_marks``, ``search`` for
    algorithm-search calls).
    ``gpu``: one row per GPU event, in time order (``item``, its position; ``lane`` = device and stream
    index, ``ts``/``end``, ``launch_row`` = the host row of its launch call or null, ``step`` of its launch,
    ``kernel_class``).
    ``steps``: ``step``, ``row`` (the step's host range; null where the step is no host range), ``thread``,
    ``ts``, ``end``, and for a step that is no host range ``after_row`` and ``until_row``: the host ranges
    whose ends bound it (the optimizer steps around a stretch between them). A step with none of these rows
    (the one window of an nsys capture) keeps its recorded ``ts``..``end``.
    ``windows``: the traced analysis windows of ``_windows`` (rebased). ``waits``: the ranges where the host
    blocked on a full launch queue (``replay_host`` rows of kind :data:`QUEUE_FULL`). ``counts``: events per
    kind (instants included) for the profiler-overhead model.
    """

    run_id: str
    rank: int
    flavour: str
    t0_ns: int
    host: pl.DataFrame
    gpu: pl.DataFrame
    steps: pl.DataFrame
    windows: pl.DataFrame
    waits: pl.DataFrame
    counts: dict[str, int]
    searches: pl.DataFrame
    threads: list[tuple[int, int]] = field(default_factory=list)
    #: the thread that holds the steps (the training loop's thread)
    main_thread: int = 0

    @property
    def n_steps(self) -> int:
        return self.steps.height

    @property
    def fixed_steps(self) -> bool:
        """Whether the steps are fixed in time (no host range of their own, nor between two: an nsys
        capture's one window), so that a replay cannot move their bounds."""
        return (
            bool(self.steps.height)
            and self.steps.select(pl.col("row").is_null() & pl.col("until_row").is_null()).to_series().all()
        )

    @property
    def between_ranges(self) -> bool:
        """Whether the steps are no host ranges but run between two host ranges' ends (the stretches between
        optimizer steps)."""
        return bool(self.steps.height) and self.steps["row"].is_null().all() and not self.fixed_steps

    @property
    def n_events(self) -> int:
        return sum(self.counts.values())

    @property
    def shaped(self) -> bool:
        """Whether op ranges carry the input shapes the profiler recorded (``replay_host``'s ``shaped``)."""
        return bool(self.host["shaped"].any()) if "shaped" in self.host.columns else False

    @property
    def stacks(self) -> bool:
        """Whether Python stacks were recorded (``python`` events)."""
        return self.counts.get("python", 0) > 0


def timeline_from_frames(
    run_id: str,
    rank: int,
    flavour: str,
    counts: dict[str, int],
    host: pl.DataFrame,
    gpu: pl.DataFrame,
    steps: pl.DataFrame,
    windows: pl.DataFrame,
    searches: pl.DataFrame,
) -> Timeline:
    """The timeline of ``run_id`` (rank ``rank``) from the rows of ``replay_host``, ``replay_gpu``,
    ``replay_steps``, ``_windows`` and ``_search_calls`` (any runs and ranks, in any order: this
    one's are kept, in time order)."""

    def own(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter((pl.col("run_id") == run_id) & (pl.col("rank") == rank)).drop("run_id", "rank")

    host, gpu, steps, windows, searches = (own(f) for f in (host, gpu, steps, windows, searches))
    t0 = min((v for v in (host["ts_ns"].min(), gpu["ts_ns"].min()) if v is not None), default=None)
    if t0 is None:
        raise QueryError(f"{run_id}: no events to replay")
    t0 = int(t0)  # type: ignore[arg-type]

    def rebased(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(ts=pl.col("ts_ns") - t0, end=pl.col("end_ns") - t0).drop("ts_ns", "end_ns")

    queue_full = pl.col("kind") == QUEUE_FULL
    waits = rebased(host.filter(queue_full)).select("ts", "end").sort("ts")
    host = rebased(host.filter(~queue_full)).with_columns(pl.col("kind").cast(KIND)).sort("event_id")  # (sorts bytes)
    gpu = rebased(gpu).sort("ts", "event_id")
    steps = rebased(steps).select("step", "event_id", "ts", "end").sort("ts")
    windows = windows.select("step", win_start=pl.col("win_start") - t0, win_end=pl.col("win_end") - t0).sort(
        "win_start"
    )
    searches = searches.select("event_id", "typical_ns", "kernels", "typical_kernels")
    return _assemble(run_id, rank, flavour, t0, host, gpu, steps, windows, waits, counts, searches)


def _assemble(
    run_id: str,
    rank: int,
    flavour: str,
    t0: int,
    host: pl.DataFrame,
    gpu: pl.DataFrame,
    steps: pl.DataFrame,
    windows: pl.DataFrame,
    waits: pl.DataFrame,
    counts: dict[str, int],
    searches: pl.DataFrame,
) -> Timeline:
    """Index threads, lanes and rows; link launches to host rows; find the steps."""
    host = host.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    threads = host.select("pid", "tid").unique(maintain_order=True).sort("pid", "tid")
    threads = threads.with_row_index("thread").with_columns(pl.col("thread").cast(pl.Int64))
    # joins that keep the rows' order (host rows by id, GPU work by time): no sort after them
    host = host.join(threads, on=["pid", "tid"], how="left", maintain_order="left").drop("pid", "tid")
    host = host.with_columns(search=pl.col("event_id").is_in(searches["event_id"].implode()))
    launch_row = _positions(host["event_id"], gpu["launch_id"])  # a host row's number is its position
    gpu = gpu.with_columns(
        launch_row=launch_row,
        launch_thread=host["thread"].gather(launch_row),
        device=pl.col("device").fill_null(0),
        stream=pl.col("stream").fill_null(0),
    )
    lanes = gpu.select("device", "stream").unique().sort("device", "stream").with_row_index("lane")
    lanes = lanes.with_columns(pl.col("lane").cast(pl.Int64))
    gpu = gpu.join(lanes, on=["device", "stream"], how="left", maintain_order="left")
    gpu = gpu.with_row_index("item").with_columns(pl.col("item").cast(pl.Int64))
    on_host = steps.join(host.select("event_id", "row", "thread"), on="event_id", how="inner").select(
        "step", "row", "thread", "ts", "end", after_row=pl.lit(None, pl.Int64), until_row=pl.lit(None, pl.Int64)
    )
    if on_host.height == 0:  # steps that are no host ranges: between host ranges' ends, else fixed in time
        on_host = _anchored(steps, host)
    steps = on_host
    if steps.height and steps["thread"].drop_nulls().len():
        main = int(steps["thread"].mode().sort()[0])
    else:
        busiest = host.filter(pl.col("kind") == "op").group_by("thread").len().sort("len", descending=True)
        main = int(busiest["thread"][0]) if busiest.height else 0
        if steps.height == 0:
            gpu = gpu.with_columns(step=pl.lit(None, pl.Int32))
    return Timeline(
        run_id=run_id,
        rank=rank,
        flavour=flavour,
        t0_ns=t0,
        host=host,
        gpu=gpu,
        steps=steps,
        windows=windows,
        waits=waits,
        counts=counts,
        searches=searches,
        threads=[(int(p), int(t)) for p, t in threads.select("pid", "tid").iter_rows()],
        main_thread=main,
    )


def _anchored(steps: pl.DataFrame, host: pl.DataFrame) -> pl.DataFrame:
    """Steps that are no host ranges, each between the ends of two host ranges of one thread where every
    step's bounds are such ends (the stretches between optimizer steps end where an optimizer step ends):
    ``after_row`` ends where the step starts, ``until_row`` where it ends, the outermost range where several
    end at that instant. Otherwise (an nsys capture's one window) every step is fixed in time: all three
    rows null."""
    fixed = steps.select(
        "step",
        row=pl.lit(None, pl.Int64),
        thread=pl.lit(None, pl.Int64),
        ts="ts",
        end="end",
        after_row=pl.lit(None, pl.Int64),
        until_row=pl.lit(None, pl.Int64),
    )
    if steps.height == 0:
        return fixed
    bounds = pl.concat([steps["ts"], steps["end"]]).unique().implode()
    ends = (
        host.filter(pl.col("end").is_in(bounds) & (pl.col("end") > pl.col("ts")))
        .sort("end", "depth", "row", nulls_last=True)
        .unique("end", keep="first", maintain_order=True)
        .select("end", "row", "thread")
    )
    after = ends.rename({"end": "ts", "row": "after_row", "thread": "after_thread"})
    until = ends.rename({"row": "until_row", "thread": "until_thread"})
    anchored = steps.select("step", "ts", "end").join(after, on="ts", how="left").join(until, on="end", how="left")
    threads = pl.concat([anchored["after_thread"], anchored["until_thread"]])
    if threads.null_count() or threads.n_unique() != 1:
        return fixed
    return anchored.select(
        "step",
        row=pl.lit(None, pl.Int64),
        thread="until_thread",
        ts="ts",
        end="end",
        after_row="after_row",
        until_row="until_row",
    )


def _positions(ids: pl.Series, wanted: pl.Series) -> pl.Series:
    """The position of each of ``wanted`` in ``ids`` (each id once), null where it is not there: a binary
    search of the ids (a timeline's host rows are in id order; others are sorted first), where a join would
    hash all of them (2 M host rows for 0.7 M launches)."""
    if ids.len() == 0:
        return pl.Series(values=[None] * wanted.len(), dtype=pl.Int64)
    order = None if ids.is_sorted() else ids.arg_sort().cast(pl.Int64)
    keys = ids if order is None else ids.gather(order)
    at = keys.search_sorted(wanted, side="left").cast(pl.Int64).clip(upper_bound=keys.len() - 1)
    return pl.select(pl.when(keys.gather(at) == wanted).then(at if order is None else order.gather(at))).to_series()
