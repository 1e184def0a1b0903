"""One representative step of a run as lanes to draw: GPU work by class, GPU idle by cause, the host's top-level ops.

The representative step is the analysis window (``_windows``) of the run's first rank whose length is the
median of that rank's windows (the shorter of the two middle ones for an even count, the earlier step on
a tie). Times are ms from the window's start, so two runs' steps line up on one scale. The GPU lanes are
the work of ``_gpu_work`` (clipped to the window) with its kernel class, the idle lanes the pieces of
``_idle_pieces`` (each idle interval cut by cause) with touching pieces of one cause merged, and a host
lane per thread that launched the step's GPU work (:data:`LAUNCHING_SHARE`; without GPU work, the
threads with top-level ops in the window, by their op time) with its top-level ops, clipped to the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceq.query.engine import Session

#: A host thread gets a lane when it launched at least this share of the step's GPU work (at most
#: MAX_HOST_LANES threads, most launches first; Kineto's forward and autograd threads both do).
LAUNCHING_SHARE = 0.05
MAX_HOST_LANES = 4
_MS = 1e6


@dataclass(frozen=True)
class Timeline:
    """A run's representative step: its window and the lanes inside it (times in ms from its start)."""

    run_id: str
    rank: int
    #: the window's step (None: a run without steps, whose one window is its GPU-active span)
    step: int | None
    #: how many windows the median was taken over
    windows: int
    window_ms: float
    #: GPU work: device, stream, kind (kernel, memcpy, memset), kernel_class (memcpy/memset: the kind),
    #: name, start_ms, end_ms
    gpu: pl.DataFrame
    #: GPU idle: device, cause (as in ``idle_causes``), start_ms, end_ms
    idle: pl.DataFrame
    #: the launching threads' top-level ops: pid, tid, name, start_ms, end_ms
    host: pl.DataFrame


def median_window(windows: pl.DataFrame) -> dict[str, object] | None:
    """The row of ``windows`` (``_windows`` rows of one rank) whose length is the median: with an even
    count the shorter middle one, the earlier on a tie. None for no windows."""
    if windows.is_empty():
        return None
    ordered = windows.with_columns((pl.col("win_end") - pl.col("win_start")).alias("_len")).sort("_len", "win_start")
    return ordered.row((ordered.height - 1) // 2, named=True)


def timeline(session: Session, run_id: str) -> Timeline | None:
    """The representative step of ``run_id`` (None where the run has no window: summary text)."""
    windows = session.query("_windows").filter(pl.col("run_id") == run_id)
    if windows.is_empty():
        return None
    rank = int(windows["rank"].min())
    mine = windows.filter(pl.col("rank") == rank)
    w = median_window(mine)
    assert w is not None
    start, end, step = int(w["win_start"]), int(w["win_end"]), w["step"]
    keys = f"run_id = {_quote(run_id)} AND rank = {rank}"
    in_step = f"step IS NOT DISTINCT FROM {'NULL' if step is None else int(step)}"
    gpu = session.sql(
        f"""-- Requires: _gpu_work
        SELECT g.device, e.stream, g.kind, coalesce(g.kernel_class, g.kind) AS kernel_class, e.name,
               g.start_ns, g.end_ns
        FROM (SELECT * FROM _gpu_work WHERE {keys} AND {in_step}) g
        JOIN events e ON e.run_id = g.run_id AND e.rank = g.rank AND e.event_id = g.event_id
        ORDER BY g.device, e.stream, g.start_ns"""
    )
    idle = session.sql(
        f"""-- Requires: _idle_pieces
        SELECT device, cause, piece_start AS start_ns, piece_end AS end_ns
        FROM _idle_pieces WHERE {keys} AND {in_step} AND piece_end > piece_start
        ORDER BY device, piece_start"""
    )
    threads = session.sql(
        f"""-- Requires: _gpu_work
        SELECT l.pid, l.tid, count(*) AS n
        FROM (SELECT launch_id FROM _gpu_work WHERE {keys} AND {in_step}) g
        JOIN events l ON l.run_id = {_quote(run_id)} AND l.rank = {rank} AND l.event_id = g.launch_id
        GROUP BY ALL ORDER BY n DESC, l.pid, l.tid"""
    )
    if threads.is_empty():
        threads = session.sql(
            f"""SELECT pid, tid, sum(least(ts_ns + dur_ns, {end}) - greatest(ts_ns, {start})) AS n
            FROM events WHERE {keys} AND kind = 'op' AND depth = 0 AND ts_ns < {end} AND ts_ns + dur_ns > {start}
            GROUP BY ALL ORDER BY n DESC, pid, tid"""
        )
    threads = threads.filter(pl.col("n") >= LAUNCHING_SHARE * pl.col("n").sum()).head(MAX_HOST_LANES)
    pairs = " OR ".join(f"(pid = {int(p)} AND tid = {int(t)})" for p, t in threads.select("pid", "tid").iter_rows())
    host = session.sql(
        f"""SELECT pid, tid, name, greatest(ts_ns, {start}) AS start_ns, least(ts_ns + dur_ns, {end}) AS end_ns
        FROM events
        WHERE {keys} AND kind = 'op' AND depth = 0 AND ({pairs or "false"})
          AND ts_ns < {end} AND ts_ns + dur_ns > {start}
        ORDER BY pid, tid, ts_ns"""
    )
    return Timeline(
        run_id=run_id,
        rank=rank,
        step=None if step is None else int(step),
        windows=mine.height,
        window_ms=(end - start) / _MS,
        gpu=_relative(gpu, start),
        idle=_relative(_merged(idle), start),
        host=_relative(host, start),
    )


def _merged(idle: pl.DataFrame) -> pl.DataFrame:
    """Pieces of one device and cause that touch (a gap cut where the host's calls change) as one."""
    if idle.is_empty():
        return idle
    gap = pl.col("start_ns") > pl.col("end_ns").shift(1)
    changed = (pl.col("cause") != pl.col("cause").shift(1)) | gap
    return (
        idle.sort("device", "start_ns")
        .with_columns(changed.fill_null(True).cum_sum().over("device").alias("_run"))
        .group_by("device", "_run", maintain_order=True)
        .agg(pl.col("cause").first(), pl.col("start_ns").min(), pl.col("end_ns").max())
        .drop("_run")
    )


def _relative(frame: pl.DataFrame, start: int) -> pl.DataFrame:
    """``start_ns``/``end_ns`` as ``start_ms``/``end_ms`` from the window's start."""
    return frame.with_columns(
        ((pl.col("start_ns") - start) / _MS).alias("start_ms"), ((pl.col("end_ns") - start) / _MS).alias("end_ms")
    ).drop("start_ns", "end_ns")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
