"""``ingest``: read trace files into the store, one run per file, each run written atomically."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from traceq import __version__
from traceq.errors import InputError, TraceqError
from traceq.readers import ReadResult, read_trace, sniff_format
from traceq.readers.source import file_sha256, head_bytes
from traceq.store import Store

ProgressFactory = Callable[[Path, int], Callable[[int], None] | None]
"""Given a file and its size, returns a callback fed with bytes consumed (or None for no progress)."""

_NAME_SUFFIXES = (".gz", ".json", ".trace", ".pt", ".paddle_trace", ".sqlite", ".txt")

INGEST_COLUMNS = {
    "path": pl.String,
    "status": pl.String,
    "run_id": pl.String,
    "name": pl.String,
    "events": pl.Int64,
    "steps": pl.Int64,
    "summary": pl.String,
    "warnings": pl.String,
}


def expand_inputs(paths: Iterable[str | Path]) -> list[Path]:
    """Files to ingest: each file as given; for a directory, every trace file directly inside it."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = [f for f in sorted(p.iterdir()) if f.is_file() and _looks_like_trace(f)]
            if not found:
                raise InputError(p, "directory holds no trace files")
            out += found
        else:
            out.append(p)
    return out


def _looks_like_trace(path: Path) -> bool:
    """Whether a file in a directory is an input (JSON that is not a trace, e.g. a config, is left out)."""
    try:
        fmt = sniff_format(path)
        if fmt != "chrome_json":
            return True
        head = head_bytes(path, 1 << 16).lstrip()
    except (TraceqError, OSError):
        return False
    return head.startswith(b"[") or b'"traceEvents"' in head


def run_name(path: Path) -> str:
    """Default run name: the file name without trace extensions."""
    name = path.name
    while True:
        for suffix in _NAME_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return name


def ingest(
    paths: Iterable[str | Path],
    store: Store | str | Path | None = None,
    name: str | None = None,
    progress: ProgressFactory | None = None,
    on_error: Callable[[TraceqError], None] | None = None,
) -> pl.DataFrame:
    """Ingest trace files (or directories of them) into ``store``.

    Each file becomes one run, written atomically; content already stored (same sha256) is reported
    as ``duplicate`` and not written again. A file that cannot be read raises :class:`InputError`, or,
    when ``on_error`` is given, is passed to it and skipped, leaving other files unaffected.

    Returns
    -------
    pl.DataFrame
        One row per input file: ``path``, ``status`` (``ingested``/``duplicate``/``failed``),
        ``run_id``, ``name``, ``events``, ``steps``, ``summary`` (one line), ``warnings`` (JSON list).
    """
    store = store if isinstance(store, Store) else Store(store)
    files = expand_inputs(paths)
    rows = []
    for path in files:
        label = name if name and len(files) == 1 else (f"{name}:{run_name(path)}" if name else run_name(path))
        try:
            rows.append(_ingest_one(path, store, label, progress))
        except TraceqError as e:
            if on_error is None:
                raise
            on_error(e)
            rows.append({"path": str(path), "status": "failed", "summary": str(e)})
    return pl.DataFrame(rows, schema=INGEST_COLUMNS)


def _ingest_one(path: Path, store: Store, name: str, progress: ProgressFactory | None) -> dict[str, object]:
    sniff_format(path)
    digest = file_sha256(path)
    run_id = "r" + digest[:12]
    existing = store.find_hash(digest)
    if existing is not None:
        return {
            "path": str(path),
            "status": "duplicate",
            "run_id": existing["run_id"],
            "name": existing["name"],
            "events": existing["n_events"],
            "steps": existing["n_steps"],
            "summary": f"already stored as {existing['name']} ({existing['run_id']}); not ingested again",
            "warnings": "[]",
        }
    size = path.stat().st_size
    callback = progress(path, size) if progress else None
    result = read_trace(path, callback)
    row = catalog_row(path, digest, size, name, result)
    written = store.write_run(run_id, row, {_rank(result): result.tables})
    status = "ingested" if written else "duplicate"
    return {
        "path": str(path),
        "status": status,
        "run_id": run_id,
        "name": name,
        "events": result.tables.events.height,
        "steps": result.tables.steps.height,
        "summary": summary_line(result),
        "warnings": json.dumps(result.warnings),
    }


def _rank(result: ReadResult) -> int:
    rank = result.distributed.get("rank")
    return int(rank) if isinstance(rank, int) and rank >= 0 else 0


def catalog_row(path: Path, digest: str, size: int, name: str, result: ReadResult) -> pl.DataFrame:
    """The ``runs`` row describing ``result``."""
    ev = result.tables.events
    by_kind = dict(ev.group_by("kind").len().sort("kind").iter_rows())
    ends = ev.select(pl.col("ts_ns").min().alias("start"), (pl.col("ts_ns") + pl.col("dur_ns")).max().alias("end"))
    return pl.DataFrame(
        {
            "name": [name],
            "source_path": [str(path.resolve())],
            "source_hash": [digest],
            "source_bytes": [size],
            "source_format": [result.source_format],
            "flavour": [result.flavour],
            "profiler_version": [result.profiler_version],
            "devices": [json.dumps(result.devices)],
            "distributed": [json.dumps(result.distributed)],
            "clock_offset_ns": [result.clock_offset_ns],
            "ingested_at": [datetime.now(UTC)],
            "traceq_version": [__version__],
            "n_events": [ev.height],
            "events_by_kind": [json.dumps(by_kind)],
            "n_steps": [result.tables.steps.height],
            "start_ns": [ends["start"][0]],
            "end_ns": [ends["end"][0]],
            "warnings": [json.dumps(result.warnings)],
        }
    )


def summary_line(result: ReadResult) -> str:
    """``events by kind, steps, devices, time span`` in one line (for summary text: its tables)."""
    ev = result.tables.events
    if ev.is_empty() and not result.tables.summary_cells.is_empty():
        ops = result.tables.op_stats
        sections = result.tables.summary_cells["section"].unique(maintain_order=True).to_list()
        return (
            f"{result.profiler_version}: {len(sections)} tables ({', '.join(sections)}); "
            f"{ops.filter(pl.col('row_type') == 'op').height:,} op rows, "
            f"{ops.filter(pl.col('row_type') == 'kernel').height + result.tables.kernel_stats.height:,} kernel rows; "
            "no timeline, so time-based metrics need a trace"
        )
    counts = ev.group_by("kind").len().sort("len", descending=True)
    kinds = ", ".join(f"{k} {n:,}" for k, n in counts.iter_rows())
    span_ns = ev.select((pl.col("ts_ns") + pl.col("dur_ns")).max() - pl.col("ts_ns").min()).item() or 0
    gpus = sorted({str(d.get("name")) for d in result.devices if d.get("name")})
    devices = ev.filter(pl.col("device").is_not_null())["device"].n_unique()
    dev_text = (_plural(devices, "GPU") if devices else "no GPU events") + (f" ({', '.join(gpus)})" if gpus else "")
    return (
        f"{result.profiler_version}: {ev.height:,} events ({kinds}); "
        f"{_plural(result.tables.steps.height, 'step')}; {dev_text}; span {span_ns / 1e6:,.1f} ms"
    )


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"
