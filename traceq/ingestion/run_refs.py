"""Which run a reference names: a run id, a unique run id prefix, a run name or a trace file; the run
ingested last; BASE and NEW of a comparison. Read from the store's catalog only (its rows, without Polars
where the store has their copies), never loading the readers: a trace file that is not stored is named as
such (None), and ingested by the caller (:func:`traceq.ingestion.ingest.run_id_of`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from traceq.errors import InputError, StoreError
from traceq.schema import has_timeline
from traceq.store import Store


def latest_run(store: Store) -> str:
    """The run id of the run ingested last."""
    latest = store.latest(1)
    if not latest:
        raise StoreError(f"the store {store.root} holds no runs; ingest a trace first (traceq ingest FILE)")
    return latest[0]


def picked_refs(
    store: Store, base_ref: str | None, new_ref: str | None, stored: Callable[[str], str | None]
) -> tuple[str, str]:
    """BASE and NEW as :func:`traceq.ingestion.ingest.pick_runs` picks them, as references (run ids, names or
    files); ``stored``: the run id of a reference in ``store`` (None: a file not stored, whose BASE is the
    run ingested last)."""
    if new_ref is None and base_ref is not None:
        raise StoreError("a comparison with a BASE needs its NEW too")
    if new_ref is None:
        latest = store.latest(2)
        if len(latest) < 2:
            held = f"{len(latest)} run" if latest else "no runs"
            more = "another trace" if latest else "two traces"
            raise StoreError(f"the store holds {held}; --compare needs two (ingest {more})")
        return latest[0], latest[1]
    if base_ref is None:
        new_id = stored(new_ref)
        base_ref = store.before(new_id) if new_id is not None else next(iter(store.latest(1)), None)
        if base_ref is None:
            raise StoreError(f"{new_ref}: the store's first run; no run was ingested before it (name a BASE too)")
    return base_ref, new_ref


def comparable(store: Store, base: tuple[str, str], new: tuple[str, str]) -> None:
    """Refuses to compare Paddle summary text with a trace (it has no timeline): ``base`` and ``new`` are
    each a reference as given and its run id."""
    (base_ref, base_id), (new_ref, new_id) = base, new
    rows = store.catalog_rows()
    summaries = [r["run_id"] for r in rows if r["run_id"] in (base_id, new_id) and not has_timeline(r)]
    if len(summaries) == 1:
        which = ("BASE", base_ref or base_id) if summaries[0] == base_id else ("NEW", new_ref or new_id)
        raise StoreError(
            f"{which[1]}: {which[0]} is Paddle summary text and the other run a trace; a comparison takes two "
            "traces or two summaries"
        )


def stored_ids(store: Store, refs: list[str]) -> list[str] | None:
    """The run ids ``refs`` name where each names a stored run; None where one does not (a trace file to
    ingest, or no run: :func:`traceq.ingestion.ingest.run_id_of` says which)."""
    try:
        return [store.resolve(ref) for ref in refs]
    except StoreError:
        return None


def stored_id(store: Store, ref: str) -> str | None:
    """The run id ``ref`` names in ``store``, or None where it is a trace file that is not stored."""
    try:
        return store.resolve(ref)
    except StoreError:
        if Path(ref).is_file():
            return None
        if looks_like_a_file(ref):
            raise InputError(ref, "no such file") from None
        raise


#: Endings of trace files: a reference ending so that is neither stored nor on disk is a missing file.
_TRACE_ENDINGS = (".json", ".gz", ".sqlite", ".txt")


def looks_like_a_file(ref: str) -> bool:
    """Whether a run reference is written like a file path (a folder in it, or a trace file's ending)."""
    return "/" in ref or os.sep in ref or ref.lower().endswith(_TRACE_ENDINGS)
