"""``traceq export``: runs out of traceq, as a Perfetto trace (one run, or a comparison's two) or an SQLite file.

One session over the runs serves both the analysis (the run's report, or the comparison, whose findings
become marked ranges in the trace) and the export, so each metric is computed once.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from traceq.errors import TraceqError

if TYPE_CHECKING:
    from traceq.export.perfetto import PerfettoExport
    from traceq.export.sqlite import SqliteExport
    from traceq.store import Store


class Target(str, Enum):
    """What ``traceq export --to`` writes."""

    perfetto = "perfetto"
    sqlite = "sqlite"


def export(
    store: Store,
    run_ids: Sequence[str],
    to: Target | str,
    path: str | Path,
    compare_runs: bool = False,
    force: bool = False,
) -> PerfettoExport | SqliteExport:
    """Write ``run_ids`` of ``store`` to ``path``.

    ``perfetto``: one run with its report's findings, or with ``compare_runs`` BASE and NEW (``run_ids``
    in that order) aligned on their first step, BASE with its report's findings and NEW with the
    comparison's. ``sqlite``: the runs (every run of the store when ``run_ids`` is empty) with every metric.

    ``path`` passes :func:`traceq._utils.outputs.check_output`: never inside the store, a special file or a stored
    run's trace; an existing file only if traceq wrote it (an earlier export) or with ``force``. The
    result's ``replaced`` says what an existing file was.
    """
    from traceq.analysis.compare import compare
    from traceq.analysis.report import run_report
    from traceq.export.perfetto import write_perfetto
    from traceq.export.sqlite import write_sqlite
    from traceq.querying.engine import Session

    target, path = Target(to), Path(path)
    ids = list(dict.fromkeys(run_ids))
    if target is Target.perfetto and len(ids) != (2 if compare_runs else 1):
        raise TraceqError("a Perfetto export takes one RUN, or --compare BASE NEW (two different runs)")
    if not path.parent.is_dir():
        raise TraceqError(f"{path}: no such directory {path.parent}")
    if not ids and store.catalog().is_empty():  # damaged runs are left out before any metric is made
        damaged = len(store.damaged())
        left_out = f" ({damaged} damaged or unreadable, left out)" if damaged else ""
        raise TraceqError(f"{store.root}: no run to export{left_out}")
    from traceq._utils.outputs import check_output
    from traceq.export.perfetto import is_perfetto_export
    from traceq.export.sqlite import check_outputs

    if target is Target.sqlite:  # checked by the writers; here before the analysis, which takes a while
        check_outputs(path, store, force)
    else:
        check_output(path, store, force=force, made_by_traceq=is_perfetto_export)
    try:
        if target is Target.sqlite:
            return write_sqlite(store, path, run_ids=ids or None, force=force)
        with Session(store, ids, own_queries=True) as session:
            if compare_runs:
                result = compare(ids[0], ids[1], store, session=session, lanes=False)  # findings only
                findings = {ids[0]: result.base.findings, ids[1]: result.findings}
            else:
                findings = {ids[0]: run_report(ids[0], store, session, lanes=False).findings}
            return write_perfetto(session, ids, path, findings=findings, force=force)
    except OSError as e:
        raise TraceqError(f"{path}: {e.strerror or e}") from None
