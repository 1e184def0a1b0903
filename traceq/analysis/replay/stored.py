"""The step estimated without the profiler, stored at ingest with a one-file run's diagnosis and read back
by its reports.

A report leads with that estimate (:meth:`~traceq.analysis.replay.replayer.Replayer.unprofiled`) and
splits it by cause with the scale the replay gave each idle cause
(:func:`~traceq.analysis.replay.explain.unprofiled_idle_scale`). Both depend on the run's own rows
only, so where ingest stores the diagnosis the replay reads, it replays the run once in the session that
made it (:func:`~traceq.analysis.replay.explain.store_estimate`, which the Python API and the command hand
to ingest) and writes them beside the stored metrics; a report then reads two small files instead of loading
the run's calls and kernels and replaying them. Layout::

    STORE/runs/run_id=<id>/rank=<r>/metrics/unprofiled.json           its numbers, notes and idle scale
    STORE/runs/run_id=<id>/rank=<r>/metrics/unprofiled_steps.parquet  its ``per_step`` frame

They are used only where made by the current query files and analysis code (:func:`made_by`), in a
session that uses stored metrics; otherwise the report replays the run.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from traceq.analysis.replay.estimates import Estimate
from traceq.querying.engine import Session
from traceq.querying.files import fingerprint
from traceq.querying.stored import FOLDER
from traceq.store import write_parquet

if TYPE_CHECKING:  # importlib.resources.abc is Python 3.11's; 3.10 has it as importlib.abc only
    from importlib.abc import Traversable

#: The files of the stored estimate in a rank's metrics folder.
NUMBERS, STEPS = "unprofiled.json", "unprofiled_steps.parquet"
#: The estimate's fields stored as numbers (the others: ``run_id``, the reader's; ``per_step``, ``notes``).
_NUMBERS = ("traced_ms", "step_ms", "low_ms", "high_ms", "width", "host_scale")


@cache
def made_by() -> str:
    """A hash of what makes the estimate: the query files (:func:`~traceq.querying.files.fingerprint`)
    and the source of every module of :mod:`traceq.analysis` (a stored estimate made by other code is not
    used)."""
    digest = hashlib.sha256(fingerprint().encode())

    def walk(folder: Traversable, prefix: str) -> None:
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            if entry.is_dir() and entry.name != "__pycache__":
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.endswith(".py"):
                digest.update(f"{prefix}{entry.name}".encode() + b"\0" + entry.read_bytes() + b"\0")

    walk(resources.files("traceq.analysis"), "")
    return digest.hexdigest()


def write_estimate(folder: Path, estimate: Estimate, scale: dict[str, float] | None) -> None:
    """Write a run's ``estimate`` without the profiler and the ``scale`` of each idle cause (None: not
    split) into a rank's metrics ``folder`` being written, the numbers last."""
    write_parquet(estimate.per_step, folder / STEPS)
    numbers = {k: getattr(estimate, k) for k in _NUMBERS}
    doc = {"made_by": made_by(), **numbers, "notes": estimate.notes, "idle_scale": scale}
    (folder / NUMBERS).write_text(json.dumps(doc) + "\n")


def estimate_folder(runs_dir: Path, run_id: str) -> Path | None:
    """The metrics folder that may hold run ``run_id``'s stored estimate (under a store's ``runs_dir``): its
    rank's, where the run has one rank; None where it has several (each rank is not the run) or none."""
    ranks = list((runs_dir / f"run_id={run_id}").glob("rank=*"))
    return ranks[0] / FOLDER if len(ranks) == 1 else None


def has_estimate(runs_dir: Path, run_id: str) -> bool:
    """Whether run ``run_id`` stored its estimate at ingest (by whatever code: see :func:`stored_estimate`)."""
    folder = estimate_folder(runs_dir, run_id)
    return folder is not None and (folder / NUMBERS).is_file()


def stored_estimate(session: Session, run_id: str) -> tuple[Estimate, dict[str, float] | None] | None:
    """The estimate of run ``run_id`` stored at ingest and the scale of each idle cause (None: its
    estimate is not split), or None where the run has none (several ranks, too few events, made by other
    code) or ``session`` computes every metric from the events."""
    if not session.use_stored or session.store is None:
        return None
    folder = estimate_folder(session.store.runs_dir, run_id)
    if folder is None:
        return None
    try:
        doc = json.loads((folder / NUMBERS).read_text())
    except (OSError, ValueError):  # none stored
        return None
    if doc.get("made_by") != made_by():
        return None
    with (folder / STEPS).open("rb") as f:  # a file, not a path: the store's path is no pattern
        per_step = pl.read_parquet(f)
    estimate = Estimate(run_id=run_id, per_step=per_step, notes=doc["notes"], **{k: doc[k] for k in _NUMBERS})
    return estimate, doc["idle_scale"]
