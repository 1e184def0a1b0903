"""The canonical trace model: every table, column and event kind, declared once.

Readers emit these tables, the store writes them, the SQL layer exposes them and the README documents
them from this module (``python -m traceq.schema`` prints the Markdown reference). Times are int64
nanoseconds on one clock per run. ``run_id`` (and ``rank``) are not columns inside the Parquet files:
they are hive partition keys of the store layout and appear as columns when the store is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Polars is imported where a type is made: the catalog is read without it where it can be
    import polars as pl

#: The producers a run's ``flavour`` names (the catalog's ``flavour`` column): torch.profiler's chrome traces,
#: paddle.profiler's (chrome traces and summary text), Nsight Systems exports.
KINETO, PADDLE, NSYS = "kineto", "paddle", "nsys"

#: Event kinds: the enumerated vocabulary of ``events.kind``. Analyses see only these.
KINDS: dict[str, str] = {
    "step": "a profiler step window (`ProfilerStep#N`, `ProfileStep#N`)",
    "op": "a framework operator on a host thread (PyTorch `cpu_op`, Paddle `Operator`)",
    "op_inner": "a stage inside an operator (Paddle `OperatorInner`, `*KernelLaunch`: infer_shape, compute)",
    "python": "a Python function range (PyTorch `python_function`)",
    "annotation": "a host range set by the user or the framework (`record_function`, Paddle Forward/Backward)",
    "gpu_annotation": "a user range projected on a GPU stream (PyTorch `gpu_user_annotation`); not GPU work",
    "runtime": "a CUDA/HIP runtime or driver API call on a host thread (`cudaLaunchKernel`, `cuLaunchKernelEx`)",
    "kernel": "a GPU kernel execution",
    "memcpy": "a GPU memory copy",
    "memset": "a GPU memory set",
    "sync": "a GPU-side synchronisation record (PyTorch `cuda_sync`); waiting, not GPU work",
    "memory": "an allocator instant event (allocate/free)",
    "marker": "any other instant event",
    "queue_full": "the host blocked on a full launch queue (CUPTI's `Command Buffer Full`); a wait, not a range",
    "other": "any other duration event (profiler overhead, trace spans, unknown categories)",
}

#: Kinds that occupy a GPU engine: the GPU "busy" set.
GPU_WORK_KINDS: tuple[str, ...] = ("kernel", "memcpy", "memset")
#: Host kinds that form the operator hierarchy (nesting, parents, depth).
OP_TREE_KINDS: tuple[str, ...] = ("op", "op_inner")


@dataclass(frozen=True)
class Column:
    """One column of a canonical table."""

    name: str
    #: its Polars data type: the type's name and arguments (``("Int64",)``, ``("Datetime", "us", "UTC")``,
    #: ``("List", ("String",))``)
    type: tuple[str | tuple[str, ...], ...]
    doc: str
    #: Whether the column holds JSON text (written as JSON values, not strings, in JSON output).
    json: bool = False

    @property
    def dtype(self) -> pl.DataType:
        return _polars_type(self.type)

    @property
    def numeric(self) -> bool:
        """Whether the column holds numbers (shown right-aligned)."""
        return self.type[0] in ("Int64", "Int32", "Float64")


def _polars_type(spec: tuple[str | tuple[str, ...], ...]) -> pl.DataType:
    """The Polars data type a :attr:`Column.type` names."""
    import polars as pl

    name, *args = spec
    return getattr(pl, str(name))(*(_polars_type(a) if isinstance(a, tuple) else a for a in args))


@dataclass(frozen=True)
class Table:
    """One canonical table: its columns in storage order."""

    name: str
    doc: str
    columns: tuple[Column, ...]

    @property
    def schema(self) -> pl.Schema:
        import polars as pl

        return pl.Schema({c.name: c.dtype for c in self.columns})

    def conform(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Return ``frame`` with exactly this table's columns, in order and types (missing ones null)."""
        import polars as pl

        exprs = [
            (pl.col(c.name) if c.name in frame.columns else pl.lit(None)).cast(c.dtype).alias(c.name)
            for c in self.columns
        ]
        return frame.select(exprs)

    def empty(self) -> pl.DataFrame:
        import polars as pl

        return pl.DataFrame(schema=self.schema)


_I64, _I32, _STR, _BOOL = ("Int64",), ("Int32",), ("String",), ("Boolean",)

EVENTS = Table(
    "events",
    "One row per trace event (host ranges, API calls, GPU work, instants), in the order the source lists "
    "them; `event_id` numbers them in time order.",
    (
        Column(
            "event_id", _I64, "id within the rank: 0..n-1 by start (longest first on ties); other columns refer to it"
        ),
        Column("kind", _STR, "event kind, one of the `kind` vocabulary below"),
        Column("category", _STR, "the source's own category (`cat`, nsys table), verbatim"),
        Column("name", _STR, "event name (Paddle's `[12.3 us]` suffix removed)"),
        Column("ts_ns", _I64, "start time, ns, on the run's clock"),
        Column("dur_ns", _I64, "duration, ns (0 for instants)"),
        Column("pid", _I64, "host process id; for GPU events the device id the source gave as pid"),
        Column(
            "tid",
            _I64,
            "host thread id (Paddle's `(C++)`/`(Python)` threads are one OS thread); "
            "for GPU events the stream the source gave as tid",
        ),
        Column("device", _I32, "GPU index of GPU events"),
        Column("stream", _I64, "GPU stream of GPU events"),
        Column("correlation", _I64, "launch correlation id (runtime calls and the GPU work they launched)"),
        Column("external_id", _I64, "PyTorch `External id` (links ops, launches and GPU work)"),
        Column("step", _I32, "profiler step number the event belongs to (GPU work: the step of its launch)"),
        Column(
            "parent_id",
            _I64,
            "innermost enclosing `op`/`op_inner` event on the same host thread (ops, stages, API calls)",
        ),
        Column("depth", _I32, "number of enclosing `op`/`op_inner` events (0 = top level; ops, stages, API calls)"),
        Column(
            "op_id",
            _I64,
            "innermost `op` enclosing this event (itself for ops; GPU work: via its launch); "
            "where no op encloses it, the innermost `annotation`",
        ),
        Column(
            "top_op_id",
            _I64,
            "outermost `op` enclosing this event (depth-0 op; itself for top-level ops); "
            "where no op encloses it, the innermost `annotation`",
        ),
        Column("launch_id", _I64, "GPU work: the runtime/driver call that launched it"),
        Column("bytes", _I64, "bytes copied or set (memcpy, memset)"),
        Column("input_dtypes", ("List", _STR), "input dtypes of an op, where the profiler recorded them"),
        Column("input_shapes", _STR, "input shapes of an op as JSON, where the profiler recorded them", json=True),
        Column("args", _STR, "all of the event's original args, as JSON", json=True),
    ),
)

STEPS = Table(
    "steps",
    "One row per profiler step: its host window.",
    (
        Column("step", _I32, "step number (N of `ProfilerStep#N`)"),
        Column("name", _STR, "step event name"),
        Column("ts_ns", _I64, "window start, ns"),
        Column("dur_ns", _I64, "window length, ns"),
        Column("event_id", _I64, "the step's event in `events`"),
    ),
)

THREADS = Table(
    "threads",
    "Names of host threads and GPU streams, as the source labelled them.",
    (
        Column("pid", _I64, "process id (device id for GPU streams)"),
        Column("tid", _I64, "thread id (stream id for GPU streams)"),
        Column("name", _STR, "thread or stream name"),
    ),
)

_F64 = ("Float64",)
_FIVE = ("total", "avg", "max", "min")

OP_STATS = Table(
    "op_stats",
    "Paddle summary text: one row per Operator Summary row (ops, their stages, the kernels under them).",
    (
        Column("thread", _STR, "the table's thread (`All threads merged` or a thread id)"),
        Column("row", _I64, "row number in the text (order of the table)"),
        Column("name", _STR, "row name as printed (kernel names may end with `...`)"),
        Column("op", _STR, "the framework op the row belongs to (`conv2d dygraph` -> `conv2d`)"),
        Column("parent", _STR, "name of the enclosing row (the op for stages, the stage for kernels)"),
        Column("depth", _I32, "indent level: 0 op, 1 stage or kernel launched directly, 2 kernel"),
        Column("row_type", _STR, "`op`, `stage` (infer_shape, compute, ...) or `kernel` (no CPU time)"),
        Column("calls", _I64, "calls"),
        *(Column(f"cpu_{s}_ns", _F64, f"CPU time {s}, ns") for s in _FIVE),
        Column("cpu_ratio", _F64, "CPU Ratio(%) as printed"),
        *(Column(f"gpu_{s}_ns", _F64, f"GPU time {s}, ns") for s in _FIVE),
        Column("gpu_ratio", _F64, "GPU Ratio(%) as printed"),
        Column("flops", _I64, "FLOPs column (Paddle 2.5+), where printed"),
        Column("truncated", _BOOL, "whether the printed name was cut with `...`"),
    ),
)

KERNEL_STATS = Table(
    "kernel_stats",
    "Paddle summary text: the Kernel Summary table.",
    (
        Column("row", _I64, "row number in the text"),
        Column("name", _STR, "kernel name as printed (template arguments kept, argument list dropped)"),
        Column("calls", _I64, "calls"),
        *(Column(f"gpu_{s}_ns", _F64, f"GPU time {s}, ns") for s in _FIVE),
        Column("gpu_ratio", _F64, "GPU Ratio(%) as printed"),
        Column("truncated", _BOOL, "whether the printed name was cut with `...`"),
    ),
)

SUMMARY_CELLS = Table(
    "summary_cells",
    "Paddle summary text: every cell of every table (Device, Overview, Model, Distribution, Operator, "
    "Kernel, UserDefined, Memory), long form.",
    (
        Column("section", _STR, "table title (`Overview Summary`, `Memory Summary - Place(cpu)`, ...)"),
        Column("thread", _STR, "thread sub-title, where the table has one"),
        Column("row", _I64, "row number in the text"),
        Column("name", _STR, "the row's first cell"),
        Column("depth", _I32, "indent level of the row"),
        Column("column", _STR, "column header (five-value cells split: `CPU Total`, ..., `CPU Ratio(%)`)"),
        Column("text", _STR, "the cell as printed"),
        Column("value", _F64, "the cell as a number (times in ns), where it is one"),
        Column("unit", _STR, "`ns` for time cells"),
    ),
)

KERNEL_CLASS_TABLE = Table(
    "kernel_classes",
    "One row per distinct kernel name of the run (trace kernels and summary kernel rows), classified by the "
    "one rule table in `traceq/model/kernel_classes.py`; join on `name`.",
    (
        Column("name", _STR, "kernel name as in `events.name`, `op_stats.name` or `kernel_stats.name`"),
        Column("precision", _STR, "fp32, tf32, fp16, bf16, fp8, int8, fp64 or unknown"),
        Column("tensor_core", _BOOL, "whether the kernel runs on tensor cores"),
        Column(
            "kernel_class",
            _STR,
            "gemm, conv, attention, elementwise, reduction, cast, layout, optimizer, memcpy, memset, comm or other",
        ),
    ),
)

#: ``source_format`` of Paddle summary text: op tables, no timeline.
SUMMARY_FORMAT = "paddle_summary"
#: Columns describing where a rank's data came from: shared by ``runs`` (the whole run) and ``sources`` (one rank).
_SOURCE_PATH = Column("source_path", _STR, "absolute path of the ingested file (multi-rank run: of its first rank)")
_SOURCE_HASH = Column(
    "source_hash", _STR, "sha256 of the file's bytes (multi-rank run: of its ranks' hashes in rank order)"
)
_SOURCE_BYTES = Column("source_bytes", _I64, "size of the file(s), bytes")
_SOURCE_FORMAT = Column("source_format", _STR, f"input format: `chrome_json`, `nsys_sqlite`, `{SUMMARY_FORMAT}`")
_HAS_TIMELINE = Column(
    "has_timeline",
    _BOOL,
    "whether the source is a timeline of events (a trace); false: op tables only (summary text). Null in runs "
    "written before it was kept: those are timelines where they have events",
)
_FLAVOUR = Column("flavour", _STR, "producer: `kineto` (torch.profiler), `paddle` (paddle.profiler), `nsys`")
_PROFILER_VERSION = Column("profiler_version", _STR, "version the file declares (schemaVersion etc.)")
_DEVICES = Column("devices", _STR, "device properties as JSON (list of objects), where recorded", json=True)
_DISTRIBUTED = Column("distributed", _STR, "distributed info as JSON (rank, world size), where recorded", json=True)
_CLOCK_OFFSET = Column(
    "clock_offset_ns",
    _I64,
    "add to `ts_ns` for Unix-epoch ns, where the source says (Kineto `baseTimeNanoseconds`; Paddle times "
    "are epoch already: 0)",
)
_N_EVENTS = Column("n_events", _I64, "rows in `events`")
_N_STEPS = Column("n_steps", _I64, "rows in `steps`")
_STEP_RULE = Column(
    "step_rule",
    _STR,
    "what found the steps: profiler steps, user ranges named like steps (`train_step 7`), ranges matching "
    "--steps-from, the stretches between optimizer steps, or none (one window)",
)
_START = Column("start_ns", _I64, "first event start, ns")
_END = Column("end_ns", _I64, "last event end, ns")
_WARNINGS = Column("warnings", _STR, "what the reader could not read or had to repair, JSON list of strings", json=True)

#: Where a rank's data came from, and its size: in ``runs`` for the whole run, in ``sources`` per rank.
_SOURCE_COLUMNS = (
    _SOURCE_PATH, _SOURCE_HASH, _SOURCE_BYTES, _SOURCE_FORMAT, _HAS_TIMELINE, _FLAVOUR, _PROFILER_VERSION, _DEVICES,
    _DISTRIBUTED, _CLOCK_OFFSET,
)  # fmt: skip
_COUNT_COLUMNS = (_N_EVENTS, _N_STEPS, _STEP_RULE, _START, _END, _WARNINGS)

RUNS = Table(
    "runs",
    "The catalog: one row per ingested run (a multi-rank run's files are listed per rank in `sources`).",
    (
        Column("name", _STR, "run name (given at ingest, else the file name)"),
        Column("n_ranks", _I64, "ranks (trace files) in the run"),
        *_SOURCE_COLUMNS,
        Column("ingested_at", ("Datetime", "us", "UTC"), "when the run was ingested"),
        Column("traceq_version", _STR, "traceq version that wrote the run"),
        Column("events_by_kind", _STR, "rows per kind, JSON object", json=True),
        *_COUNT_COLUMNS,
        Column(
            "files",
            _STR,
            "the run's files as written: path under the run's folder -> [bytes, crc32], JSON object (sizes are "
            "checked whenever the store is read, checksums by `traceq check`; null in runs written before it was kept)",
        ),
    ),
)

SOURCES = Table(
    "sources",
    "One row per rank: the file the rank was read from and how its rank number was found.",
    (
        Column(
            "rank_from",
            _STR,
            "where the rank number came from: `distributedInfo` (Kineto), `file_name` (e.g. `rank3`), "
            "`file_order` (the order given; a directory's files in natural order), `single` (a one-file run)",
        ),
        *_SOURCE_COLUMNS,
        *_COUNT_COLUMNS,
    ),
)

#: Tables stored per rank of a run, in the order they are written.
RANK_TABLES: tuple[Table, ...] = (
    EVENTS, STEPS, THREADS, KERNEL_CLASS_TABLE, OP_STATS, KERNEL_STATS, SUMMARY_CELLS, SOURCES,
)  # fmt: skip
TABLES: dict[str, Table] = {t.name: t for t in (RUNS, *RANK_TABLES)}
#: The columns, of any table, that hold JSON text.
JSON_COLUMNS: frozenset[str] = frozenset(c.name for t in TABLES.values() for c in t.columns if c.json)


@dataclass
class RunTables:
    """The per-rank tables of one run, as the readers give them and the store writes them."""

    #: A LazyFrame where the events are written as they are produced (chunk by chunk); see :meth:`collect`.
    events: pl.DataFrame | pl.LazyFrame
    steps: pl.DataFrame
    threads: pl.DataFrame
    op_stats: pl.DataFrame = field(default_factory=OP_STATS.empty)
    kernel_stats: pl.DataFrame = field(default_factory=KERNEL_STATS.empty)
    #: A LazyFrame where a large summary's cells wait in a spill folder; see :meth:`collect`.
    summary_cells: pl.DataFrame | pl.LazyFrame = field(default_factory=SUMMARY_CELLS.empty)
    kernel_classes: pl.DataFrame = field(default_factory=KERNEL_CLASS_TABLE.empty)

    def collect(self) -> RunTables:
        """These tables with ``events`` in memory (a summary's cells waiting in a spill folder stay there:
        they are only written)."""
        import polars as pl

        if isinstance(self.events, pl.LazyFrame):
            self.events = self.events.collect()
        return self


def has_timeline(run: Mapping[str, Any]) -> bool:
    """Whether a catalog row's run is a timeline of events (a trace), not op tables only (summary text):
    its ``has_timeline`` flag, or for a run written before the flag was kept, whether it has events."""
    flag = run.get("has_timeline")
    return bool(run["n_events"]) if flag is None else bool(flag)


#: The keys every table has from the store's folder names (``rank``: all but ``runs``), with their meaning.
KEYS: dict[str, str] = {
    "run_id": "run id (hive partition key of the store)",
    "rank": "rank of the trace within the run (hive partition key)",
}


def keys_of(table: Table) -> dict[str, str]:
    """The folder-name keys of ``table`` (:data:`KEYS`), with their meaning."""
    return {k: v for k, v in KEYS.items() if k == "run_id" or table.name != "runs"}


def markdown_reference() -> str:
    """The model as Markdown tables (used for the README)."""
    out = []
    for table in TABLES.values():
        out.append(f"#### `{table.name}`\n{table.doc}\n\n| column | type | meaning |\n|---|---|---|")
        keys = keys_of(table)
        out += [f"| `{k}` | {'String' if k == 'run_id' else 'Int64'} | {v} |" for k, v in keys.items()]
        out += [f"| `{c.name}` | {c.dtype} | {c.doc} |" for c in table.columns]
        out.append("")
    out.append("#### `kind` vocabulary\n\n| kind | meaning |\n|---|---|")
    out += [f"| `{k}` | {v} |" for k, v in KINDS.items()]
    return "\n".join(out) + "\n"


def update_readme(path: str = "README.md") -> None:
    """Rewrite the README's model section (everything from the first table heading) from this module."""
    from pathlib import Path

    readme = Path(path)
    text = readme.read_text()
    start = text.index(f"#### `{next(iter(TABLES))}`")
    readme.write_text(text[:start] + markdown_reference())


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--update-readme"]:
        update_readme()
    else:
        print(markdown_reference())
