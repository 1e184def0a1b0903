"""``ingest``: read trace files into the store (a run per file, or one multi-rank run), runs written atomically."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from traceq._utils.jobs import default_jobs
from traceq._version import __version__
from traceq.errors import InputError, StoreError, TraceqError, as_text
from traceq.ingestion.executors import Executor, run_tasks
from traceq.ingestion.metrics import WholeRunStep
from traceq.ingestion.ranks import assign_ranks, natural_key
from traceq.ingestion.run_refs import comparable, looks_like_a_file, picked_refs, stored_id
from traceq.ingestion.task import FileTask, ingest_file
from traceq.readers import sniff_format
from traceq.readers.source import Identity, file_sha256, head_bytes, identity
from traceq.store import NameTaken, RunWriter, Store, name_problem

ProgressFactory = Callable[[str, int], Callable[[int], None] | None]
"""Given a label and a total of bytes, returns a callback fed with bytes done (or None for no progress)."""

_NAME_SUFFIXES = (".gz", ".json", ".trace", ".pt", ".paddle_trace", ".sqlite", ".txt")

INGEST_COLUMNS = {
    "path": pl.String,
    "status": pl.String,
    "run_id": pl.String,
    "name": pl.String,
    "rank": pl.Int64,
    "events": pl.Int64,
    "steps": pl.Int64,
    "summary": pl.String,
    "warnings": pl.String,
    "seconds": pl.Float64,
    "peak_rss_bytes": pl.Int64,
    "worker": pl.String,
}


#: A directory's files with these endings that are not traces are reported as skipped (others, such as
#: a README or a script, are left out silently).
_TRACE_LIKE = (".json", ".gz", ".trace", ".sqlite", ".txt")


def expand_inputs(paths: Iterable[str | Path], skipped: list[tuple[Path, str]] | None = None) -> list[Path]:
    """Files to ingest: each file as given; for a directory, every trace file directly inside it.

    A directory's trace-like files (``.json``, ``.gz``, ``.txt``, ...) that are not traces are appended to
    ``skipped`` with the reason, so that a corrupt rank of a job folder is not left out unnoticed; a
    directory with none but such files is refused naming them.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found, passed = [], []
            for f in sorted(p.iterdir(), key=natural_key):
                if not f.is_file():
                    continue
                reason = _not_a_trace(f)
                if reason is None:
                    found.append(f)
                elif f.name.endswith(_TRACE_LIKE):
                    passed.append((f, reason))
            if not found:
                named = "; ".join(f"{f.name}: {why}" for f, why in passed)
                raise InputError(p, "directory holds no trace files" + (f" (skipped {named})" if named else ""))
            if skipped is not None:
                skipped += passed
            out += found
        else:
            out.append(p)
    return out


def _not_a_trace(path: Path) -> str | None:
    """Why a file in a directory is not an input (None if it is): JSON that is not a trace, e.g. a
    config, or a file no format recognises."""
    try:
        fmt = sniff_format(path)
        if fmt != "chrome_json":
            return None
        head = head_bytes(path, 1 << 16).lstrip()
    except TraceqError as e:
        return str(e).removeprefix(f"{path}: ")
    except OSError as e:
        return e.strerror or str(e)
    if head.startswith(b"[") or b'"traceEvents"' in head:
        return None
    return "JSON without a traceEvents array (not a chrome trace)"


def run_name(path: Path) -> str:
    """Default run name: the file name without trace extensions (its bytes that are not UTF-8 as U+FFFD)."""
    name = as_text(path.name)
    while True:
        for suffix in _NAME_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return name


@dataclass
class _Run:
    """One run to write: its name and files (one file, or a multi-rank run's files)."""

    name: str
    files: list[Path]
    multi_rank: bool
    digests: list[str] = field(default_factory=list)
    identities: list[Identity] = field(default_factory=list)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    writer: RunWriter | None = None
    #: the pattern of the ranges that are its steps, where given
    steps_from: str | None = None
    #: whether ``name`` was given (``--name``: refused if taken) or made from the file's name (made free)
    named: bool = False


def ingest(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    store: Store | str | Path | None = None,
    name: str | None = None,
    progress: ProgressFactory | None = None,
    on_error: Callable[[TraceqError], None] | None = None,
    jobs: int | None = None,
    executor: Executor = "local",
    steps_from: str | None = None,
    whole_run_step: WholeRunStep | None = None,
) -> pl.DataFrame:
    """Ingest trace files (or directories of them) into ``store``: one path (a ``str`` or a ``Path``) or a
    list of them.

    ``steps_from``: a regular expression naming the host ranges that are the steps (the runs found so are
    other runs than the same files ingested without it). Without ``name`` (or with one file) each file
    becomes one run. With ``name`` and several files or a
    directory, the files become one multi-rank run, ranked by :func:`traceq.ingestion.ranks.assign_ranks`.
    Files are read in parallel by ``executor``: ``local`` uses ``jobs`` processes (default all cores),
    ``ray`` runs one Ray task per file; each task writes its rank partition itself and every run is
    published atomically once all its ranks are written. Content already stored (same sha256) is
    reported as ``duplicate`` and not read again. A file that cannot be read raises
    :class:`InputError`, or, when ``on_error`` is given, is passed to it: its run is not stored, other
    runs are unaffected. ``whole_run_step``: what else a one-file run that stores its diagnosis stores
    with it (:class:`~traceq.ingestion.metrics.WholeRunStep`; :func:`traceq.ingest` passes the step
    estimated without the profiler).

    Returns
    -------
    pl.DataFrame
        One row per input file: ``path``, ``status`` (``ingested``/``duplicate``/``failed``, or
        ``skipped`` for a directory's ``.json``/``.gz``/``.sqlite``/``.txt`` file that is not a trace),
        ``run_id``, ``name``, ``rank``, ``events``, ``steps``, ``summary`` (one line), ``warnings``
        (JSON list), ``seconds`` (reading and writing it), ``worker`` (host:pid of the process that did)
        and ``peak_rss_bytes`` (that process's peak memory so far).
    """
    store = Store.of(store)
    listed = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else list(map(Path, paths))
    skipped: list[tuple[Path, str]] = []
    files = expand_inputs(listed, skipped)
    runs = _plan(files, name, multi_rank=bool(name) and (len(files) > 1 or any(p.is_dir() for p in listed)))
    if runs and runs[0].multi_rank:  # a job folder's file that is not a trace may be a missing rank: say so
        runs[0].notes += [f"left out {p}: {reason}" for p, reason in skipped]
    rows: dict[Path, dict[str, Any]] = {}

    def fail(run: _Run, error: TraceqError, culprit: Path | None) -> None:
        if on_error is None:
            raise error
        on_error(error)
        for path in run.files:
            text = str(error) if path == culprit or culprit is None else f"not stored: {culprit} failed"
            rows[path] = {"path": as_text(path), "status": "failed", "name": run.name, "summary": text}

    for run in runs:
        try:
            for path in run.files:
                sniff_format(path)
        except InputError as e:
            fail(run, e, Path(e.path))
            continue
    live = [r for r in runs if not any(p in rows for p in r.files)]
    _hash_files(live, jobs)
    todo: list[tuple[_Run, int]] = []
    stored = {row["source_hash"]: row for row in store.catalog().iter_rows(named=True)}
    for run in live:
        run.steps_from = steps_from
        existing = stored.get(_run_hash(run.digests, run.multi_rank, steps_from))
        if existing is not None:
            for path in run.files:
                rows[path] = _duplicate_row(path, existing)
        elif run.named and (problem := name_problem(store, run.name)) is not None:
            fail(run, NameTaken(problem), None)  # (checked again under the store's lock at commit)
        else:
            todo += [(run, i) for i in range(len(run.files))]
    # Runs are committed in the order of their files (a directory's by name), whichever worker ends first,
    # so that the runs ingested last are the same from one ingest of the same files to the next.
    in_order = list({id(r): r for r, _ in todo}.values())
    committed = 0
    here = socket.gethostname()
    try:
        for run in in_order:
            run.writer = store.begin_run()
        tasks = [
            FileTask(str(r.files[i]), r.digests[i], str(r.writer.dir), f"part-{i}", steps_from,  # type: ignore[union-attr]
                     r.identities[i], here, whole_run_step if len(r.files) == 1 else None)
            for r, i in todo
        ]  # fmt: skip
        for k, result in _run_tasks(tasks, jobs, executor, progress):
            run, i = todo[k]
            run.results[i] = result
            while committed < len(in_order) and len(in_order[committed].results) == len(in_order[committed].files):
                _finish(in_order[committed], store, rows, fail)
                committed += 1
    finally:
        for run, _ in todo:
            if run.writer is not None:
                run.writer.discard()
    left_out = [{"path": as_text(p), "status": "skipped", "summary": reason} for p, reason in skipped]
    return pl.DataFrame([*(rows[p] for p in files if p in rows), *left_out], schema=INGEST_COLUMNS)


def _plan(files: list[Path], name: str | None, multi_rank: bool) -> list[_Run]:
    if multi_rank:
        return [_Run(as_text(name), files, True, named=True)]
    if name and len(files) == 1:
        return [_Run(as_text(name), files, False, named=True)]
    return [_Run(run_name(p), [p], False) for p in files]


def _hash_files(runs: list[_Run], jobs: int | None) -> None:
    """sha256 of every file, with the file's identity before it was read (the task reading it checks that
    the file it reads is still that one); threads suffice (hashlib releases the GIL on large reads)."""
    files = [p for r in runs for p in r.files]
    with ThreadPoolExecutor(max_workers=max(1, min(jobs or default_jobs(), len(files) or 1))) as pool:
        found = iter(list(pool.map(_identified_sha256, files)))
    for run in runs:
        run.identities, run.digests = map(list, zip(*(next(found) for _ in run.files), strict=True))


def _identified_sha256(path: Path) -> tuple[Identity, str]:
    return identity(path), file_sha256(path)


def _run_hash(digests: list[str], multi_rank: bool, steps_from: str | None = None) -> str:
    """The run's content hash: the file's; for a multi-rank run, over its files' hashes (in any order);
    with ``steps_from`` (other steps, so another run), over that too."""
    joined = ("ranks:" + ",".join(sorted(digests))).encode()
    digest = digests[0] if not multi_rank else hashlib.sha256(joined).hexdigest()
    if steps_from is None:
        return digest
    return hashlib.sha256(f"{digest}\0steps_from:{steps_from}".encode()).hexdigest()


def _run_tasks(
    tasks: list[FileTask], jobs: int | None, executor: Executor, progress: ProgressFactory | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Run the file tasks; byte-level progress when they run here, per-file progress in parallel."""
    if executor == "local" and (jobs == 1 or len(tasks) <= 1 or (jobs is None and default_jobs() == 1)):
        for k, task in enumerate(tasks):
            callback = progress(Path(task.path).name, Path(task.path).stat().st_size) if progress else None
            yield k, ingest_file(task, callback)
        return
    sizes = [Path(t.path).stat().st_size for t in tasks]
    callback = progress(f"reading {len(tasks)} files", sum(sizes)) if progress else None
    for k, result in run_tasks(ingest_file, tasks, jobs, executor):
        if callback:
            callback(sizes[k])
        yield k, result


def _finish(run: _Run, store: Store, rows: dict[Path, dict[str, Any]], fail: Callable[..., None]) -> None:
    """All of a run's files are read: rank them, then commit the run (or drop it if a file failed)."""
    for i, result in sorted(run.results.items()):
        if result["error_in"] == "store":
            raise StoreError(result["error"])
        if result["error"]:
            fail(run, InputError(run.files[i], result["error"].split(": ", 1)[-1]), run.files[i])
            return
    results = [run.results[i] for i in range(len(run.files))]
    declared = [r["declared_rank"] for r in results]
    if run.multi_rank:
        ranks, rank_from, warnings = assign_ranks(run.files, declared)
        warnings = run.notes + warnings
    else:
        ranks, rank_from, warnings = [declared[0] or 0], "distributedInfo" if declared[0] is not None else "single", []
    sources = pl.DataFrame(
        [{**r["source"], "rank": rank, "rank_from": rank_from} for r, rank in zip(results, ranks, strict=True)]
    )
    run_id = "r" + _run_hash(run.digests, run.multi_rank, run.steps_from)[:12]
    row = _catalog_row(run, results, ranks, warnings)
    assert run.writer is not None
    try:
        parts = {f"part-{i}": rank for i, rank in enumerate(ranks)}
        written = run.writer.commit(run_id, row, parts, sources, name_given=run.named)
    except NameTaken as e:  # given to another run meanwhile
        fail(run, e, None)
        return
    except OSError as e:
        raise StoreError(f"{store.root}: cannot write the store: {e.strerror or e}") from None
    name = run.writer.name or run.name
    for path, result, rank in zip(run.files, results, ranks, strict=True):
        rows[path] = {
            "path": as_text(path),
            "status": "ingested" if written else "duplicate",
            "run_id": run_id,
            "name": name,
            "rank": rank,
            "events": result["source"]["n_events"],
            "steps": result["source"]["n_steps"],
            "summary": result["summary"],
            "warnings": json.dumps((warnings if rank == min(ranks) else []) + json.loads(result["source"]["warnings"])),
            "seconds": result["seconds"],
            "peak_rss_bytes": result["peak_rss_bytes"],
            "worker": result["worker"],
        }


def _catalog_row(run: _Run, results: list[dict[str, Any]], ranks: list[int], warnings: list[str]) -> pl.DataFrame:
    """The ``runs`` row: the lowest rank's source details, counts and spans over all ranks."""
    first = results[ranks.index(min(ranks))]["source"]
    by_kind: dict[str, int] = {}
    for r in results:
        for kind, n in r["events_by_kind"].items():
            by_kind[kind] = by_kind.get(kind, 0) + n
    starts = [r["source"]["start_ns"] for r in results if r["source"]["start_ns"] is not None]
    ends = [r["source"]["end_ns"] for r in results if r["source"]["end_ns"] is not None]
    all_warnings = list(warnings)
    for r, rank in zip(results, ranks, strict=True):
        prefix = f"rank {rank}: " if run.multi_rank else ""
        all_warnings += [prefix + w for w in json.loads(r["source"]["warnings"])]
    return pl.DataFrame(
        {
            **{
                k: [first[k]]
                for k in ("source_format", "has_timeline", "flavour", "profiler_version", "devices", "distributed")
            },
            "name": [run.name],
            "n_ranks": [len(results)],
            "source_path": [first["source_path"]],
            "source_hash": [_run_hash(run.digests, run.multi_rank, run.steps_from)],
            "source_bytes": [sum(r["source"]["source_bytes"] for r in results)],
            "clock_offset_ns": [first["clock_offset_ns"]],
            "ingested_at": [datetime.now(timezone.utc)],
            "traceq_version": [__version__],
            "n_events": [sum(r["source"]["n_events"] for r in results)],
            "events_by_kind": [json.dumps(dict(sorted(by_kind.items())))],
            "n_steps": [sum(r["source"]["n_steps"] for r in results)],
            "step_rule": [first["step_rule"]],
            "start_ns": [min(starts) if starts else None],
            "end_ns": [max(ends) if ends else None],
            "warnings": [json.dumps(all_warnings)],
        }
    )


def _duplicate_row(path: Path, existing: dict[str, Any]) -> dict[str, Any]:
    return {
        "path": as_text(path),
        "status": "duplicate",
        "run_id": existing["run_id"],
        "name": existing["name"],
        "events": existing["n_events"],
        "steps": existing["n_steps"],
        "summary": f"already stored as {existing['name']} ({existing['run_id']}); not ingested again",
        "warnings": "[]",
    }


def pick_runs(store: Store, base_ref: str | None = None, new_ref: str | None = None) -> tuple[str, str]:
    """The run ids of BASE and NEW: as given (run ids, names or trace files, ingested first); NEW alone:
    BASE is the run ingested just before it; neither: the two runs ingested last, BASE the older (by
    ``ingested_at``). Paddle summary text is compared only with summary text (it has no timeline)."""
    base_ref, new_ref = picked_refs(store, base_ref, new_ref, lambda ref: run_id_of(ref, store))
    base_id, new_id = run_id_of(base_ref, store), run_id_of(new_ref, store)
    comparable(store, (base_ref, base_id), (new_ref, new_id))
    return base_id, new_id


def run_id_of(ref: str | os.PathLike[str], store: Store) -> str:
    """A run id from a run id, a run name, or a trace file (ingested first if it is not stored yet): what
    the reports and comparisons of the API and the command take (steps chosen at report time:
    :func:`runs_to_report`)."""
    ref = os.fspath(ref)
    try:
        return store.resolve(ref)
    except StoreError:
        path = Path(ref)
        if not path.exists():
            if looks_like_a_file(ref):
                raise InputError(ref, "no such file") from None
            raise
    return ingest([path], store=store)["run_id"][0]


@contextlib.contextmanager
def runs_to_report(store: Store, refs: list[str], steps_from: str | None) -> Iterator[tuple[Store, list[str]]]:
    """The store and run ids a report reads for ``refs`` (run ids, names or trace files): without
    ``steps_from`` the stored runs (a file not stored is ingested, :func:`run_id_of`); with it, the runs
    read again with those steps (:func:`restepped`)."""
    if steps_from is None:
        yield store, [run_id_of(ref, store) for ref in refs]
        return
    with restepped(store, refs, steps_from) as chosen:
        yield chosen


def pick_refs(store: Store, base_ref: str | None, new_ref: str | None, steps_from: str | None) -> list[str]:
    """BASE and NEW of a comparison (:func:`pick_runs`); with ``steps_from`` as references, nothing ingested."""
    if steps_from is None:
        return list(pick_runs(store, base_ref, new_ref))
    return list(picked_refs(store, base_ref, new_ref, lambda ref: stored_id(store, ref)))


@contextlib.contextmanager
def restepped(store: Store, refs: list[str], steps_from: str) -> Iterator[tuple[Store, list[str]]]:
    """A scratch store holding ``refs`` (run ids, names or trace files) read again with the steps
    ``steps_from`` names, and their run ids there, in the order given; each stored run keeps its name.
    ``store`` is only read."""
    sources = [_source(store, ref) for ref in refs]
    with tempfile.TemporaryDirectory(prefix="traceq-steps-") as tmp:
        scratch = Store(Path(tmp) / "store")
        ids = [ingest([path], store=scratch, name=name, steps_from=steps_from)["run_id"][0] for path, name in sources]
        yield scratch, ids


def _source(store: Store, ref: str) -> tuple[Path, str | None]:
    """The file ``ref`` was read from (a stored one-file run's, or the file itself) and the run's name."""
    run_id = stored_id(store, ref)
    if run_id is None:
        return Path(ref), None
    name = store.catalog().filter(pl.col("run_id") == run_id)["name"][0]
    return _source_of(store, run_id), name


def _source_of(store: Store, run_id: str) -> Path:
    """The file a stored one-file run was read from (to read it again with other steps)."""
    row = store.catalog().filter(pl.col("run_id") == run_id).row(0, named=True)
    path = Path(row["source_path"] or "")
    if (row["n_ranks"] or 1) > 1:
        raise StoreError(f"{row['name']}: a run of {row['n_ranks']} ranks; ingest its files again with --steps-from")
    if not path.is_file():
        raise StoreError(f"{row['name']}: its file {path} is gone; ingest the trace again with --steps-from")
    return path
