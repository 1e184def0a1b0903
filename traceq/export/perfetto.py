"""Perfetto export: runs' trace events and traceq's analysis as tracks, in the Chrome Trace Event Format.

The file is the JSON that Perfetto's importer (ui.perfetto.dev, trace_processor) and chrome://tracing
read: ``{"displayTimeUnit": "ms", "traceq": {...}, "traceEvents": [...]}`` holding

- a "traceq analysis" process per run (and rank) with the tracks ``steps`` (a slice per analysis
  window: its host window, GPU busy and idle time, idle time by cause), ``GPU d idle by cause`` (a slice
  per stretch of idle time of one cause and call, named by its cause's label in
  :mod:`traceq.analysis.causes`, with the call it is charged to), a ``GPU d busy`` counter,
  ``casts · THREAD`` (the cast-family ops of a host thread) and ``finding: ID`` (a slice over the windows
  a finding concerns, its evidence in the args);
- each run's own events: host ops, runtime calls, annotations and Python frames as ``X`` slices on
  their threads, allocator and marker instants as thread-scoped ``i`` events, and GPU kernels, copies
  and sets on a track per stream in a process per GPU; each launched GPU event as a flow from the
  launching call (``s`` inside the call, ``f`` inside the GPU event, bound to it with ``bp: "e"``);
- ``M`` events naming every process and thread, with sort indices (which chrome://tracing uses).

Rules kept for Perfetto's JSON importer (from its tokenizer and parser): times are microseconds written
with exactly three decimals, which it reads digit by digit as whole nanoseconds, and never negative (it
drops such events); pids and tids are integers below 2**32; no top-level value of an event is an array;
the top-level strings of an event have no control characters; what would not nest on a track goes on a
track beside it (see the query ``_event_lanes``). Several runs (a comparison) are separate processes, each
run's times shifted so that the first analysis windows of all runs start at one instant: 0 where no run has
events before its first window, else the longest such lead (Perfetto shows no negative times). The
file's ``traceq`` key records each run's shift, so the original times can be recovered, and the idle
cause of each idle slice's name (``idle_causes``).

Events stream out of DuckDB in batches, are formatted by Polars a batch at a time and written as they
come: the file is never held whole. An event keeps its own category where traceq's chrome reader maps
that category back to the event's kind, else gets one that does (``KIND_CATEGORY``), and a launch
correlation and the GPU work's device and stream are added to args that lack them, so the file reads
back into traceq with the same events and launch links; their args lose the whitespace between tokens.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import duckdb
import polars as pl

from traceq._utils.outputs import atomic_output, check_output, starts_with
from traceq.analysis.causes import CAUSES, IDLE_CAUSES
from traceq.model.categories import with_kind
from traceq.querying.engine import Session
from traceq.querying.files import query_text, requires
from traceq.readers.source import is_gzip
from traceq.schema import GPU_WORK_KINDS

#: A chrome category for each event kind that traceq's reader (and Perfetto) reads back as that kind.
KIND_CATEGORY: dict[str, str] = {
    "step": "user_annotation",
    "op": "cpu_op",
    "op_inner": "OperatorInner",
    "python": "python_function",
    "annotation": "user_annotation",
    "gpu_annotation": "gpu_user_annotation",
    "runtime": "cuda_runtime",
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "sync": "cuda_sync",
    "memory": "allocate",
    "marker": "marker",
    "other": "other",
}

#: Slice names of the idle causes of ``_idle_pieces``: each cause's label, as the reports name it.
CAUSE_NAMES: dict[str, str] = {cause: CAUSES[cause].label for cause in IDLE_CAUSES}

#: A finding: a mapping or an object (a dataclass, say) with ``id``, ``title``, ``impact_ms``,
#: ``evidence``, and optionally ``next_step`` and ``steps`` (the step numbers it concerns; all by default).
Finding = Any
#: Findings for :func:`write_perfetto`: a sequence (shown with the last run) or a mapping run id -> sequence.
Findings = Sequence[Finding] | Mapping[str, Sequence[Finding]] | None

#: Rows formatted at a time.
BATCH_ROWS = 1 << 16

#: Control characters and DEL: Perfetto's tokenizer refuses them raw in an event's top-level strings,
#: and its older versions refuse the \\u escapes JSON writes for them there too.
_CONTROL = r"[\x00-\x1f\x7f]"
_CONTROL_RE = re.compile(_CONTROL)
#: JSON's whitespace between tokens, or a string (group 1, kept as it is).
_JSON_SPACE = r'("(?:[^"\\]|\\.)*")|[ \t\r\n]+'
#: Source ids at or above this (or negative) get a tid of their own from here up.
_TID_LIMIT = 1 << 31
#: Track-name suffix of each lane of a source track (see the query ``_event_lanes``).
_LANES = {0: "", 1: " · sync", 2: " · overlapping", 3: " · annotations"}
_SIDES = ("analysis", "gpu", "host")
_KEY = ["rank", "side", "proc", "thread", "lane"]
_PLACEMENT = {"rank": pl.Int64, "side": pl.String, "proc": pl.Int64, "thread": pl.Int64, "lane": pl.Int32,
              "out_pid": pl.Int64, "out_tid": pl.Int64}  # fmt: skip


@dataclass
class PerfettoExport:
    """What :func:`write_perfetto` wrote."""

    path: Path
    #: trace events written, all phases
    events: int = 0
    #: the runs' own events
    original: int = 0
    #: launch flows (each an ``s`` and an ``f`` event)
    flows: int = 0
    #: events of the analysis processes (slices, counters, instants)
    analysis: int = 0
    #: per run id and rank: ns subtracted from the run's times
    shifts_ns: dict[str, dict[int, int]] = field(default_factory=dict)
    seconds: float = 0.0
    #: what an existing file at ``path`` was (see :func:`traceq.export.export`), or None
    replaced: str | None = None


#: How every Perfetto export of traceq begins (before its ``traceq`` info).
_HEAD = b'{"displayTimeUnit": "ms", "traceq":'


def is_perfetto_export(path: Path) -> str | None:
    """ "a traceq Perfetto export" if the file is one (its first bytes, gunzipped where it is gzip)."""
    try:
        gz = is_gzip(path)
    except OSError:
        return None
    return "a traceq Perfetto export" if starts_with(path, (_HEAD,), gzipped=gz) else None


def write_perfetto(
    session: Session, run_ids: Sequence[str], path: str | Path, findings: Findings = None, force: bool = False
) -> PerfettoExport:
    """Write the runs ``run_ids`` of ``session`` (one run, or BASE and NEW of a comparison) to ``path``
    as Chrome Trace Event Format JSON for Perfetto UI and chrome://tracing, gzip-compressed when ``path``
    ends in ``.gz``. ``findings`` (see :data:`Findings`) become marked ranges with their evidence.

    Everything read comes from the session's query files, each over all of its runs: the analysis
    (``_windows``, ``gpu_busy``, ``idle_causes``, ``_idle_stretches``, ``_cast_events``, ``_top_ops``) and the
    layout (``_run_starts``, ``_event_categories``, ``_thread_names``, ``_event_processes``, ``_trace_events``),
    besides the catalog; a session opened with ``own_queries=True`` computes them faster."""
    started = time.perf_counter()
    run_ids = list(dict.fromkeys(run_ids))
    if not run_ids:
        raise ValueError("write_perfetto needs at least one run id")
    path = Path(path)
    replaced = check_output(path, session.store, force=force, made_by_traceq=is_perfetto_export)
    layout = _Layout.of(session, run_ids)
    result = PerfettoExport(path=path, shifts_ns={r: dict(s) for r, s in layout.shifts.items()}, replaced=replaced)
    with _open(path) as out:
        writer = _ArrayWriter(out, {"runs": layout.info(), "idle_causes": {n: c for c, n in CAUSE_NAMES.items()}})
        for run_id in run_ids:
            wanted = _findings_of(findings, run_ids, run_id)
            result.analysis += writer.write(_analysis_events(session, layout, run_id, wanted))
        for run_id in run_ids:
            ends = _FlowEnds()
            result.original += writer.write(_original_events(session, layout, run_id, ends))
            result.flows += writer.write(ends.flows(layout, run_id)) // 2
        meta = writer.write(layout.metadata_events())  # last: tracks are made as their events are met
        writer.close()
    result.events = result.analysis + result.original + 2 * result.flows + meta
    result.seconds = time.perf_counter() - started
    return result


# -- layout: processes, threads and time base ------------------------------------------------------------


@dataclass
class _Process:
    pid: int
    name: str
    order: tuple[Any, ...]
    threads: dict[int, str] = field(default_factory=dict)
    #: next tid for a track with no usable id of its own
    spare: int = _TID_LIMIT

    def new_thread(self, name: str, wanted: int | None = None) -> int:
        """A thread named ``name``: tid ``wanted`` where that is a free id below 2**31, else the next
        free one from 2**31 (source tracks) or from 1 (analysis tracks, ``wanted`` None)."""
        if wanted is None or not 0 <= wanted < _TID_LIMIT or wanted in self.threads:
            wanted = self.spare if wanted is not None else len(self.threads) + 1
            while wanted in self.threads:
                wanted += 1
            if wanted >= _TID_LIMIT:
                self.spare = wanted + 1
        self.threads[wanted] = name
        return wanted


@dataclass
class _Layout:
    """Output pids and tids, names, and each run's shift; tracks are added as their events are met."""

    labels: dict[str, str]
    names: dict[str, str]
    devices: dict[str, dict[int, str]]
    ranks: dict[str, list[int]]
    #: per run id and rank: ns subtracted from every time
    shifts: dict[str, dict[int, int]]
    #: per run id: its events' categories and those of :data:`KIND_CATEGORY` (their kinds: ``with_kind``)
    categories: dict[str, set[str]]
    #: per run id and rank: host thread names by (pid, tid)
    thread_names: dict[tuple[str, int], dict[tuple[int, int], str]]
    processes: dict[tuple[str, int, str, int], _Process] = field(default_factory=dict)
    #: per run id: output pid and tid of each source track (columns of :data:`_KEY`, out_pid, out_tid)
    placement: dict[str, pl.DataFrame] = field(default_factory=dict)
    #: analysis tracks by (run id, rank, key)
    tracks: dict[tuple[str, int, Any], int] = field(default_factory=dict)

    @classmethod
    def of(cls, session: Session, run_ids: list[str]) -> _Layout:
        mine = pl.col("run_id").is_in(run_ids)
        runs = session.sql("select * from runs").filter(mine)
        missing = set(run_ids) - set(runs["run_id"].to_list())
        if missing:
            raise ValueError(f"not in this session: {', '.join(sorted(missing))}")
        names = dict(zip(runs["run_id"], runs["name"], strict=True))
        devices = {r: _device_names(d) for r, d in zip(runs["run_id"], runs["devices"], strict=True)}
        labels = {run_ids[0]: ""} if len(run_ids) == 1 else _labels(run_ids)
        bases = session.query("_run_starts").filter(mine).sort("run_id", "rank")
        lead = max((max(0, f - m) for m, f in bases.select("min_ts", "first_win").iter_rows()), default=0)
        shifts: dict[str, dict[int, int]] = {r: {} for r in run_ids}
        for run_id, rank, first in bases.select("run_id", "rank", "first_win").iter_rows():
            shifts[run_id][rank] = first - lead
        categories = session.query("_event_categories")
        cats_of = {}
        for run_id in run_ids:
            cats = _of_run(categories, run_id)["category"].drop_nulls().to_list()
            cats_of[run_id] = {*cats, *KIND_CATEGORY.values()}
        threads = session.query("_thread_names").filter(mine).select("run_id", "rank", "pid", "tid", "name")
        thread_names: dict[tuple[str, int], dict[tuple[int, int], str]] = {}
        for run_id, rank, pid, tid, name in threads.iter_rows():
            thread_names.setdefault((run_id, rank), {})[(pid, tid)] = name
        layout = cls(labels, names, devices, {}, shifts, cats_of, thread_names)
        processes = session.query("_event_processes")
        for k, run_id in enumerate(run_ids):
            procs = _of_run(processes, run_id).select("rank", "side", "proc")
            layout.ranks[run_id] = sorted({*shifts[run_id], *procs["rank"]}) or [0]
            for rank in layout.ranks[run_id]:
                layout.process(k, run_id, rank, "analysis", 0)
            for rank, side, proc in procs.sort(pl.all()).iter_rows():
                layout.process(k, run_id, rank, side, proc)
            layout.placement[run_id] = pl.DataFrame(schema=_PLACEMENT)
        return layout

    def process(self, order: int, run_id: str, rank: int, side: str, proc: int) -> _Process:
        key = (run_id, rank, side, proc)
        if key not in self.processes:
            label = self.labels[run_id]
            prefix = f"{label} {self.names[run_id]}" if label else self.names[run_id]
            if len(self.ranks.get(run_id, [])) > 1:
                prefix += f" · rank {rank}"
            if side == "analysis":
                what = "traceq analysis"
            elif side == "gpu":
                device = self.devices[run_id].get(proc)
                what = f"GPU {proc}" + (f" ({device})" if device else "")
            else:
                what = f"process {proc}" if proc >= 0 else "process ?"
            pid = len(self.processes) + 1
            self.processes[key] = _Process(pid, f"{prefix} · {what}", (order, rank, _SIDES.index(side), proc))
        return self.processes[key]

    def track(self, run_id: str, rank: int, name: str, key: Any = None) -> tuple[int, int]:
        """(pid, tid) of the analysis track ``key`` (by default its ``name``) of ``run_id``'s rank
        ``rank``, made (named ``name``) when first asked."""
        process = self.processes[(run_id, rank, "analysis", 0)]
        full = (run_id, rank, name if key is None else key)
        if full not in self.tracks:
            self.tracks[full] = process.new_thread(name)
        return process.pid, self.tracks[full]

    def place(self, run_id: str, batch: pl.DataFrame) -> pl.DataFrame:
        """``batch`` (columns of :data:`_KEY`) with the output pid and tid of its tracks (``out_pid``,
        ``out_tid``, made for tracks not met before) and its rank's shift."""
        known = self.placement[run_id]
        new = batch.select(_KEY).unique().join(known, on=_KEY, how="anti")
        if new.height:
            rows = []
            for rank, side, proc, thread, lane in new.sort(_KEY).iter_rows():
                process = self.processes[(run_id, rank, side, proc)]
                if side == "gpu":
                    name = f"stream {thread}" if thread >= 0 else "stream ?"
                else:
                    named = self.thread_names.get((run_id, rank), {}).get((proc, thread))
                    name = named or (f"thread {thread}" if thread >= 0 else "thread ?")
                tid = process.new_thread(name + _LANES[lane], thread if lane == 0 else -1)
                rows.append((rank, side, proc, thread, lane, process.pid, tid))
            made = pl.DataFrame(rows, schema=known.schema, orient="row")
            known = self.placement[run_id] = pl.concat([known, made])
        shifts = self.shifts[run_id]
        return batch.join(known, on=_KEY, how="left").with_columns(
            pl.col("rank").replace_strict(shifts, default=0, return_dtype=pl.Int64).alias("shift")
        )

    def metadata_events(self) -> Iterator[dict[str, Any]]:
        for order, process in enumerate(sorted(self.processes.values(), key=lambda p: p.order)):
            yield _meta("process_name", process.pid, 0, {"name": process.name})
            yield _meta("process_sort_index", process.pid, 0, {"sort_index": order})
            for k, (tid, name) in enumerate(_thread_order(process.threads)):
                yield _meta("thread_name", process.pid, tid, {"name": name})
                yield _meta("thread_sort_index", process.pid, tid, {"sort_index": k})

    def info(self) -> list[dict[str, Any]]:
        """Each run as the file records it: add ``shift_ns`` (per rank) to a time for the run's own clock."""
        return [
            {"run_id": r, "name": self.names[r], "label": self.labels[r],
             "shift_ns": {str(k): v for k, v in self.shifts[r].items()}}
            for r in self.labels
        ]  # fmt: skip


def _thread_order(threads: dict[int, str]) -> list[tuple[int, str]]:
    """A process's threads by tid, each source track's lanes right after it."""
    by_name = {name: tid for tid, name in threads.items()}

    def key(item: tuple[int, str]) -> tuple[int, int]:
        tid, name = item
        for lane, suffix in _LANES.items():
            if suffix and name.endswith(suffix) and name[: -len(suffix)] in by_name:
                return by_name[name[: -len(suffix)]], lane
        return tid, 0

    return sorted(threads.items(), key=key)


def _labels(run_ids: list[str]) -> dict[str, str]:
    if len(run_ids) == 2:
        return dict(zip(run_ids, ("BASE", "NEW"), strict=True))
    return {r: f"RUN {k + 1}" for k, r in enumerate(run_ids)}


def _device_names(devices: str | None) -> dict[int, str]:
    try:
        parsed = json.loads(devices or "[]")
    except ValueError:
        return {}
    return {
        d["id"]: d["name"]
        for d in (parsed if isinstance(parsed, list) else [])
        if isinstance(d, dict) and isinstance(d.get("id"), int) and isinstance(d.get("name"), str)
    }


# -- the runs' own events ---------------------------------------------------------------------------------


@dataclass
class _FlowEnds:
    """The two ends of each launch flow, gathered while the events are written (a few ints per GPU event
    and runtime call), joined into flows after them."""

    calls: list[pl.DataFrame] = field(default_factory=list)
    launched: list[pl.DataFrame] = field(default_factory=list)

    def add(self, frame: pl.DataFrame) -> None:
        middle = (pl.col("ts_ns") - pl.col("shift") + pl.col("dur_ns").fill_null(0) // 2).alias("at")
        ends = ["rank", "out_pid", "out_tid", middle]
        self.calls.append(frame.filter(pl.col("kind") == "runtime").select(*ends, "event_id"))
        gpu = pl.col("kind").is_in(GPU_WORK_KINDS) & pl.col("launch_id").is_not_null()
        self.launched.append(frame.filter(gpu).select(*ends, "event_id", "launch_id"))

    def flows(self, layout: _Layout, run_id: str) -> Iterator[_Text]:
        """``s`` at the middle of the launching call, ``f`` at the middle of the GPU event (ids unique in
        the file: the run, rank and GPU event)."""
        if not self.launched or not self.calls:
            return
        calls = pl.concat(self.calls).rename({"event_id": "launch_id"})
        self.calls = []
        pairs = pl.concat(self.launched).join(calls, on=["rank", "launch_id"], suffix="_call")
        self.launched = []
        block = list(layout.shifts).index(run_id)
        ids = pl.col("event_id") + pl.col("rank") * (1 << 36) + block * (1 << 44) + 1
        for offset in range(0, pairs.height, BATCH_ROWS):
            part = pairs.slice(offset, BATCH_ROWS)
            lines = []
            for ph, suffix, tail in (("s", "_call", '"}'), ("f", "", '","bp":"e"}')):
                line = pl.concat_str(
                    pl.lit(f'{{"ph":"{ph}","ts":'), _us(pl.col("at" + suffix)),
                    pl.lit(',"pid":'), pl.col("out_pid" + suffix), pl.lit(',"tid":'), pl.col("out_tid" + suffix),
                    pl.lit(',"id":'), ids, pl.lit(',"cat":"ac2g","name":"launch'), pl.lit(tail),
                )  # fmt: skip
                lines.append(part.select(line.str.join(",\n")).item())
            yield _Text(",\n".join(lines), 2 * part.height)


def _original_events(session: Session, layout: _Layout, run_id: str, ends: _FlowEnds) -> Iterator[_Text]:
    """The run's events (``_trace_events``) as JSON text, a rank and then a batch at a time; their flow ends
    go to ``ends``."""
    categories = layout.categories[run_id]
    for rank in layout.ranks[run_id]:
        for batch in _batches(session, "_trace_events", run_id, rank):
            frame = layout.place(run_id, batch)
            ends.add(frame)
            yield _Text(_event_text(frame, categories), frame.height)


def _event_text(frame: pl.DataFrame, categories: set[str]) -> str:
    instant = pl.col("kind").is_in(["memory", "marker"])
    frame = frame.with_columns(
        pl.when(instant).then(pl.lit("i")).otherwise(pl.lit("X")).alias("ph"),
        pl.col("category").fill_null("").alias("cat"),
        _clean(pl.col("name")).alias("name"),
    )
    frame = with_kind(frame, categories, "read_kind")
    # the event's own category where it reads back as its kind, else one that does
    canonical = pl.col("kind").replace_strict(KIND_CATEGORY, default="other")
    cat = pl.when(pl.col("read_kind") == pl.col("kind")).then(_clean(pl.col("cat"))).otherwise(canonical)
    name_cat = pl.struct(name=pl.col("name"), cat=cat).struct.json_encode().str.strip_prefix("{").str.strip_suffix("}")
    dur = pl.when(instant).then(pl.lit(',"s":"t"')).otherwise(pl.concat_str(pl.lit(',"dur":'), _us(pl.col("dur_ns"))))
    line = pl.concat_str(
        pl.lit('{"ph":"'), pl.col("ph"), pl.lit('","ts":'), _us(pl.col("ts_ns") - pl.col("shift")), dur,
        pl.lit(',"pid":'), pl.col("out_pid"), pl.lit(',"tid":'), pl.col("out_tid"), pl.lit(","), name_cat,
        pl.lit(',"args":'), _args(), pl.lit("}"),
    )  # fmt: skip
    return frame.select(line.str.join(",\n")).item()


def _args() -> pl.Expr:
    """The event's own args (a JSON object), with a launch correlation and the GPU work's device and
    stream added where they are missing (nsys keeps them in columns), so that the file reads back the same.
    The correlation added is the launching call's event id (``link``): unique in the rank, where nsys's
    own ids repeat across processes. The args are written without the whitespace between their tokens
    (a profiler's pretty-printing: a tenth of a Kineto trace)."""
    args = pl.col("args").fill_null("{}").str.replace_all(_JSON_SPACE, "$1")
    args = (
        pl.when(args.str.starts_with("{") & args.str.ends_with("}"))
        .then(args)
        .otherwise(pl.concat_str(pl.lit('{"args":'), args, pl.lit("}")))
    )
    extra = pl.concat_str(
        _added("link", r'"correlation(?: id)?"\s*:', args, key="correlation"),
        _added("add_device", r'"device"\s*:', args, key="device"),
        _added("add_stream", r'"stream"\s*:', args, key="stream"),
    )
    rest = args.str.slice(1).str.strip_chars_start()
    return (
        pl.when(extra == "")
        .then(args)
        .when(rest.str.starts_with("}"))
        .then(pl.concat_str(pl.lit("{"), extra.str.strip_suffix(","), rest))
        .otherwise(pl.concat_str(pl.lit("{"), extra, rest))
    )


def _added(column: str, present: str, args: pl.Expr, key: str | None = None) -> pl.Expr:
    missing = pl.col(column).is_not_null() & ~args.str.contains(present)
    text = pl.concat_str(pl.lit(f'"{key or column}":'), pl.col(column).cast(pl.String), pl.lit(","))
    return pl.when(missing).then(text).otherwise(pl.lit(""))


def _batches(session: Session, name: str, run_id: str, rank: int) -> Iterator[pl.DataFrame]:
    """The rows of ``run_id``'s rank ``rank`` in the result of the query file ``name``, a batch at a time:
    its SQL runs as it is read (never made into a table: the events with their args), the blocks it
    requires made first (on the session's connection: consume one query's batches before the next query)."""
    text = query_text(name)
    session.make(requires(text))
    rows = (duckdb.ColumnExpression("run_id") == duckdb.ConstantExpression(run_id)) & (
        duckdb.ColumnExpression("rank") == duckdb.ConstantExpression(rank)
    )
    reader = session.con.sql(text).filter(rows).to_arrow_reader(BATCH_ROWS)
    for batch in reader:
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        if frame.height:
            yield frame


def _us(ns: pl.Expr) -> pl.Expr:
    """Nanoseconds (>= 0) as microseconds with three decimals, exact."""
    ns = ns.fill_null(0).clip(0)
    return pl.concat_str((ns // 1000).cast(pl.String), pl.lit("."), (ns % 1000).cast(pl.String).str.zfill(3))


def _clean(text: pl.Expr) -> pl.Expr:
    return text.fill_null("").str.replace_all(_CONTROL, "\ufffd")


# -- the analysis tracks ----------------------------------------------------------------------------------


def _analysis_events(
    session: Session, layout: _Layout, run_id: str, findings: Sequence[Finding]
) -> Iterator[dict[str, Any] | _Text]:
    """The analysis events of ``run_id``: steps and busy counters, idle by cause, casts, findings."""
    windows = session.query("_windows").filter(pl.col("run_id") == run_id).sort("rank", "win_start")
    if windows.is_empty():
        yield from _no_timeline(session, layout, run_id)
        return
    busy = session.query("gpu_busy").filter(pl.col("run_id") == run_id)
    causes = session.query("idle_causes").filter(pl.col("run_id") == run_id)
    for rank in layout.ranks[run_id]:
        mine = windows.filter(pl.col("rank") == rank)
        if mine.height:
            yield from _step_slices(layout, run_id, rank, mine, busy, causes)
    yield from _idle_slices(session, layout, run_id)
    yield from _cast_slices(session, layout, run_id)
    first = windows.filter(pl.col("rank") == windows["rank"].min())
    yield from _finding_slices(layout, run_id, int(first["rank"][0]), first, findings)


def _step_slices(
    layout: _Layout, run_id: str, rank: int, windows: pl.DataFrame, busy: pl.DataFrame, causes: pl.DataFrame
) -> Iterator[dict[str, Any]]:
    pid, tid = layout.track(run_id, rank, "steps")
    shift = layout.shifts[run_id][rank]
    by_window: dict[Any, dict[int, dict[str, Any]]] = {}
    for b in busy.filter(pl.col("rank") == rank).sort("device").iter_rows(named=True):
        by_window.setdefault(b["step"], {})[b["device"]] = {
            "gpu_busy_ms": _ms(b["busy_ns"]),
            "gpu_idle_ms": _ms(b["idle_ns"]),
            "idle_ratio": b["idle_ratio"],
            "idle_by_cause_ms": {},
        }
    for step, device, cause, ns in (
        causes.filter(pl.col("rank") == rank).sort("idle_ns", descending=True)
        .select("step", "device", "cause", "idle_ns").iter_rows()
    ):  # fmt: skip
        if device in by_window.get(step, {}):
            by_window[step][device]["idle_by_cause_ms"][cause] = _ms(ns)
    devices = sorted({d for per in by_window.values() for d in per})
    for w in windows.iter_rows(named=True):
        step = w["step"]
        args: dict[str, Any] = {"step": step, "window_ms": _ms(w["win_end"] - w["win_start"])}
        if w["host_start"] is not None:
            args |= {
                "host_start_ms": _ms(w["host_start"] - shift),
                "host_end_ms": _ms(w["host_end"] - shift),
                "host_ms": _ms(w["host_end"] - w["host_start"]),
            }
        per_device = by_window.get(step, {})
        if len(devices) == 1 and per_device:
            args |= next(iter(per_device.values()))
        elif per_device:
            args["gpus"] = {f"GPU {d}": v for d, v in per_device.items()}
        name = f"step {step}" if step is not None else "GPU-active span"
        yield _slice(name, "traceq.step", pid, tid, w["win_start"] - shift, w["win_end"] - w["win_start"], args)
    starts = dict(zip(windows["step"], windows["win_start"], strict=True))
    for device in devices:
        counter = f"GPU {device} busy"
        for b in busy.filter((pl.col("rank") == rank) & (pl.col("device") == device)).iter_rows(named=True):
            if b["step"] in starts:
                percent = 100.0 * b["busy_ns"] / b["window_ns"] if b["window_ns"] else 0.0
                yield _counter(counter, pid, tid, starts[b["step"]] - shift, percent)
        yield _counter(counter, pid, tid, windows["win_end"].max() - shift, 0.0)


def _idle_slices(session: Session, layout: _Layout, run_id: str) -> Iterator[_Text]:
    """A slice per stretch of idle time of one cause and call (``_idle_stretches``) on its GPU's idle
    track, named by its cause (the file's ``traceq.idle_causes`` maps the names back). Its args say
    where it is charged: the call and the ops around it, the Python frame, and the host thread where no
    call is named (a call's thread is the one it runs on); its step is the steps track's slice above it."""
    stretches = _of_run(session.query("_idle_stretches"), run_id).sort("rank", "device", "piece_start")
    stretches = stretches.with_columns(pl.when(pl.col("call").is_null()).then(pl.col("thread")).alias("thread"))
    args = _args_text("call", "op", "top_op", "frame", "thread")
    name = pl.col("cause").replace_strict(CAUSE_NAMES, default=pl.col("cause"))
    for (rank, device), part in stretches.group_by("rank", "device", maintain_order=True):
        pid, tid = layout.track(run_id, rank, f"GPU {device} idle by cause")
        ts = pl.col("piece_start") - layout.shifts[run_id][rank]
        yield _slices_text(part, name, "traceq.idle", pid, tid, ts, pl.col("ns"), args)


def _cast_slices(session: Session, layout: _Layout, run_id: str) -> Iterator[_Text]:
    """The cast-family ops (``_cast_events``) of each host thread on a track of their own."""
    casts = _of_run(session.query("_cast_events"), run_id).sort("rank", "event_id")
    args = _args_text("conversion", "input_dtypes", "input_shapes")
    for (rank, src_pid, src_tid), part in casts.group_by("rank", "pid", "tid", maintain_order=True):
        name = layout.thread_names.get((run_id, rank), {}).get((src_pid, src_tid)) or f"thread {src_tid}"
        hosts = [k for k in layout.processes if k[:3] == (run_id, rank, "host")]
        name += f" (process {src_pid})" if len(hosts) > 1 else ""
        pid, tid = layout.track(run_id, rank, f"casts · {name}", ("casts", src_pid, src_tid))
        ts = pl.col("ts_ns") - layout.shifts[run_id][rank]
        yield _slices_text(part, pl.col("name"), "traceq.cast", pid, tid, ts, pl.col("dur_ns"), args)


def _of_run(frame: pl.DataFrame, run_id: str) -> pl.DataFrame:
    """The rows of ``run_id`` in a query's result over the session's runs."""
    return frame.filter(pl.col("run_id") == run_id)


def _finding_slices(
    layout: _Layout, run_id: str, rank: int, windows: pl.DataFrame, findings: Sequence[Finding]
) -> Iterator[dict[str, Any]]:
    """A slice per finding over the windows of the steps it concerns (all where it names none)."""
    shift = layout.shifts[run_id][rank]
    for finding in findings:
        fields = _finding_fields(finding)
        ident = str(fields.get("id") or "finding")
        pid, tid = layout.track(run_id, rank, f"finding: {ident}")
        steps = fields.get("steps")
        if steps is None and isinstance(fields.get("evidence"), Mapping):
            steps = fields["evidence"].get("steps")
        chosen = windows
        if isinstance(steps, Sequence) and not isinstance(steps, str):
            chosen = windows.filter(pl.col("step").is_in([s for s in steps if isinstance(s, int)]))
            chosen = chosen if chosen.height else windows
        start, end = chosen["win_start"].min(), chosen["win_end"].max()
        args = {k: v for k, v in fields.items() if k != "title"}
        yield _slice(str(fields.get("title") or ident), "traceq.finding", pid, tid, start - shift, end - start, args)


def _no_timeline(session: Session, layout: _Layout, run_id: str) -> Iterator[dict[str, Any]]:
    """A run without timed events (Paddle summary text): one instant saying so, with its top ops."""
    ops = _of_run(session.query("_top_ops"), run_id)
    ops = ops.sort("cpu_total_ns", descending=True, nulls_last=True, maintain_order=True)
    rows = ops.select("name", "cpu_total_ns", "gpu_total_ns", "calls").iter_rows()
    top = {n: {"cpu_ms": _ms(c), "gpu_ms": _ms(g), "calls": k} for n, c, g, k in rows}
    args = {"note": "no timeline: the run has no timed events (a summary table)", "top_ops": top}
    pid, tid = layout.track(run_id, layout.ranks[run_id][0], "summary")
    yield {"ph": "i", "ts": _Micros(0), "s": "t", "pid": pid, "tid": tid, "name": "no timeline",
           "cat": "traceq.summary", "args": _plain(args)}  # fmt: skip


def _findings_of(findings: Findings, run_ids: list[str], run_id: str) -> Sequence[Finding]:
    if findings is None:
        return []
    if isinstance(findings, Mapping):
        return findings.get(run_id, [])
    return findings if run_id == run_ids[-1] else []


def _finding_fields(finding: Finding) -> dict[str, Any]:
    """A finding's fields as a dict: a mapping as is, a dataclass's fields, or an object's attributes."""
    if isinstance(finding, Mapping):
        return dict(finding)
    if dataclasses.is_dataclass(finding) and not isinstance(finding, type):
        return dataclasses.asdict(finding)
    keys = ("id", "title", "impact_ms", "evidence", "next_step", "steps")
    return {k: getattr(finding, k) for k in keys if hasattr(finding, k)}


# -- JSON -------------------------------------------------------------------------------------------------


@dataclass
class _Text:
    """Events already written as JSON text (a batch formatted by Polars)."""

    text: str
    rows: int


class _Micros:
    """A time in microseconds, written with exactly three decimals (whole nanoseconds)."""

    __slots__ = ("ns",)

    def __init__(self, ns: int) -> None:
        self.ns = max(int(ns), 0)

    def __repr__(self) -> str:
        return f"{self.ns // 1000}.{self.ns % 1000:03d}"


def _slices_text(
    frame: pl.DataFrame, name: pl.Expr, cat: str, pid: int, tid: int, ts: pl.Expr, dur: pl.Expr, args: pl.Expr
) -> _Text:
    """``X`` slices of ``frame``'s rows on one track as JSON text (``args`` a JSON object's text)."""
    line = pl.concat_str(
        pl.lit('{"ph":"X","ts":'), _us(ts), pl.lit(',"dur":'), _us(dur), pl.lit(f',"pid":{pid},"tid":{tid},'),
        pl.struct(_clean(name).alias("name"), pl.lit(cat).alias("cat")).struct.json_encode()
        .str.strip_prefix("{").str.strip_suffix("}"),
        pl.lit(',"args":'), args, pl.lit("}"),
    )  # fmt: skip
    return _Text(frame.select(line.str.join(",\n")).item() if frame.height else "", frame.height)


def _args_text(*columns: str) -> pl.Expr:
    """The JSON object of a slice's args: ``columns`` with their values, those that are null left out
    (a slice's length is its ``dur``)."""
    fields = [
        pl.when(pl.col(c).is_not_null()).then(
            pl.struct(c).struct.json_encode().str.strip_prefix("{").str.strip_suffix("}")
        )
        for c in columns
    ]
    return pl.concat_str(pl.lit("{"), pl.concat_str(fields, separator=",", ignore_nulls=True), pl.lit("}"))


def _ms_expr(column: str) -> pl.Expr:
    return (pl.col(column) / 1e6).round(6)


def _slice(name: str, cat: str, pid: int, tid: int, ts: int, dur: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "X", "ts": _Micros(ts), "dur": _Micros(dur), "pid": pid, "tid": tid,
            "name": _CONTROL_RE.sub("\ufffd", name), "cat": cat, "args": _plain(args)}  # fmt: skip


def _counter(name: str, pid: int, tid: int, ts: int, value: float) -> dict[str, Any]:
    return {"ph": "C", "ts": _Micros(ts), "pid": pid, "tid": tid, "name": name, "cat": "traceq.busy",
            "args": {"percent": round(value, 3)}}  # fmt: skip


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "pid": pid, "tid": tid, "name": name, "args": args}


def _ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 6)


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data: mappings with string keys, lists, finite numbers, strings."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, pl.Series):
        return _plain(value.to_list())
    if isinstance(value, Iterable):
        return [_plain(v) for v in value]
    return str(value)


def _event_json(event: dict[str, Any]) -> str:
    """One event as compact JSON, its times (:class:`_Micros`) as exact microsecond numbers."""
    parts = []
    for key, value in event.items():
        text = (
            repr(value)
            if isinstance(value, _Micros)
            else json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        )
        parts.append(f"{json.dumps(key)}:{text}")
    return "{" + ",".join(parts) + "}"  # fmt: skip


class _ArrayWriter:
    """Writes ``{"displayTimeUnit": "ms", "traceq": info, "traceEvents": [`` events ``]}`` in chunks."""

    def __init__(self, out: IO[bytes], info: dict[str, Any]) -> None:
        self.out = out
        self.first = True
        head = json.dumps({"displayTimeUnit": "ms", "traceq": _plain(info)}, ensure_ascii=False)
        out.write((head[:-1] + ',"traceEvents":[\n').encode())

    def write(self, events: Iterable[dict[str, Any] | _Text], chunk: int = 4096) -> int:
        """Write ``events`` (dicts, ``chunk`` at a time, or formatted text); returns how many."""
        n, lines = 0, []
        for event in events:
            if isinstance(event, _Text):
                self._block(event.text, event.rows)
                n += event.rows
                continue
            lines.append(_event_json(event))
            if len(lines) == chunk:
                self._block(",\n".join(lines), len(lines))
                n, lines = n + len(lines), []
        self._block(",\n".join(lines), len(lines))
        return n + len(lines)

    def _block(self, text: str, rows: int) -> None:
        if rows:
            self.out.write((text if self.first else ",\n" + text).encode())
            self.first = False

    def close(self) -> None:
        self.out.write(b"\n]}\n")


@contextmanager
def _open(path: Path) -> Iterator[IO[bytes]]:
    """A temporary file beside ``path`` (:func:`~traceq._utils.outputs.atomic_output`), gzip-compressed (fast
    level) when ``path`` ends in ``.gz``, renamed to ``path`` when the block completes (removed if it fails)."""
    with atomic_output(path) as tmp:
        stream: IO[bytes]
        if path.name.endswith(".gz"):
            try:
                from isal import igzip

                stream = igzip.open(tmp, "wb", compresslevel=1)  # type: ignore[assignment]
            except ImportError:  # pragma: no cover - isal is a dependency
                stream = gzip.open(tmp, "wb", compresslevel=1)  # type: ignore[assignment]  # noqa: SIM115
        else:
            stream = open(tmp, "wb", buffering=1 << 20)  # noqa: SIM115 - closed below
        try:
            yield stream
        finally:
            stream.close()
