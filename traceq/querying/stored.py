"""Metric results stored with the runs at ingest: which metrics, where their files are, whether they are current.

A report of a large run otherwise recomputes every metric from every event (seconds for millions of
events); with the results stored, ``report`` and ``report --compare`` read small tables. They are
written at ingest by :mod:`traceq.ingestion.metrics` (the same queries of ``queries/``, run over the
rank's tables) and read here: they are used only when every rank of every run in a session has them
and they were made by the current query files (a fingerprint of the text of those each metric is made
from); otherwise the session computes the metric from the events. Layout::

    STORE/runs/run_id=<id>/rank=<r>/metrics/<query>.parquet
    STORE/runs/run_id=<id>/rank=<r>/metrics/fingerprint.txt
"""

from __future__ import annotations

from pathlib import Path

#: The metric queries a report and a comparison read, stored per rank at ingest (``gpu_gap_buckets`` too,
#: though made from the stored ``gpu_gaps`` in milliseconds: stored, a report of one rank reads every
#: result from its files and needs no DuckDB). ``rank_balance`` is across ranks, so it is computed from the
#: stored ``gpu_busy`` and ``launch_bound`` when needed.
SUMMARY: tuple[str, ...] = (
    "gpu_busy",
    "gpu_gaps",
    "gpu_gap_buckets",
    "launch_bound",
    "precision_coverage",
    "cast_overhead",
    "gap_cpu_activity",
    "op_summary",
    "gpu_time",
)
#: The diagnosis a report reads: idle time by cause and call site, the host calls and searches behind it,
#: the analysis windows and the idle pieces the HTML page's timeline draws (stored for the largest runs
#: only: see :data:`traceq.ingestion.metrics.DIAGNOSIS_MIN_EVENTS`).
DIAGNOSIS: tuple[str, ...] = (
    "idle_causes",
    "idle_sites",
    "host_calls",
    "search_gpu_time",
    "_search_calls",
    "_windows",
    "_idle_pieces",
)
#: Every metric that may be stored.
CACHED: tuple[str, ...] = SUMMARY + DIAGNOSIS
#: The folder of a rank's stored results, and the file naming the query files that made them.
FOLDER = "metrics"
FINGERPRINT = "fingerprint.txt"


def stamp_text(fingerprints: dict[str, str]) -> str:
    """The text of a rank's :data:`FINGERPRINT` file for its stored metrics: a line per metric, its name and
    its fingerprint (:func:`~traceq.querying.files.metric_fingerprint`)."""
    return "".join(f"{name} {value}\n" for name, value in fingerprints.items())


def _stamps(path: Path) -> dict[str, str]:
    """The fingerprints a rank's :data:`FINGERPRINT` file gives, by metric (none where it is missing; a
    line of another form, such as the one hash of every query file that earlier versions wrote, gives
    none)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split(" ", 1) for line in lines if line.count(" ") == 1)


def stored_files(runs_dir: Path | None, runs: list[str] | None, name: str, fingerprint: str) -> list[Path] | None:
    """The stored results of ``name`` for every rank of ``runs`` (under a store's ``runs_dir``), or None
    when any rank lacks them or has results made by other query files (another ``fingerprint``: the
    metric's :func:`~traceq.querying.files.metric_fingerprint`)."""
    if name not in CACHED or runs is None or runs_dir is None:
        return None
    files = []
    for run_id in runs:
        rank_dirs = sorted((runs_dir / f"run_id={run_id}").glob("rank=*"))
        if not rank_dirs:
            return None
        for rank_dir in rank_dirs:
            path = rank_dir / FOLDER / f"{name}.parquet"
            if not path.is_file() or _stamps(rank_dir / FOLDER / FINGERPRINT).get(name) != fingerprint:
                return None
            files.append(path)
    return files
