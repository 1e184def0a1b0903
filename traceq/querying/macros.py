"""The SQL macros every connection defines: facts that several query files name, each written once here (a
query file never spells them itself).

Facts of the model, each written out from its one definition in Python:

- ``is_profiler_step(name)``: whether a range's name is a profiler step's (:data:`STEP_NAME`);
- ``gpu_work_kinds()``: the event kinds of GPU work, a list (:data:`GPU_WORK_KINDS`);
- ``is_gpu_work(kind)``: whether ``kind`` is one of them.

Facts of the idle causes (the query files name the causes; which of them hold the host is written here,
in SQL like the query files):

- ``holds_host(cause)``: whether an idle cause holds the host: its call blocks the thread, so a gap that
  begins in it is that cause's whole and its pieces are charged to the call;
- ``holds_host_inner(cause)``: whether it is one of those charged to the innermost such call (host_sync,
  allocator: a synchronising or allocating runtime call, and the op that made it);
- ``holds_host_outer(cause)``: whether it is one of those charged to the outermost (algorithm_search,
  input_pipeline: a search, a data-loading range).

DuckDB expands a macro where it is used, so ``WHERE is_gpu_work(kind)`` reaches the Parquet scan as the
same ``kind IN (...)`` filter as the list written out, and a query plans as it would with the list.
"""

from __future__ import annotations

from traceq.model.step_names import STEP_NAME
from traceq.schema import GPU_WORK_KINDS


def sql_string(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


#: The statements that create the macros, in order. Stored metrics are fingerprinted with this file's
#: text as well as the query files' (:func:`traceq.querying.files.metric_fingerprint`): a change here
#: makes reports compute them again. The model's facts are also the store's as ingested: a change to
#: them is a change of the store's format (:data:`traceq.store.FORMAT_VERSION`).
MACROS: tuple[str, ...] = (
    f"CREATE MACRO is_profiler_step(name) AS regexp_matches(name, {sql_string(STEP_NAME)})",
    f"CREATE MACRO gpu_work_kinds() AS [{', '.join(sql_string(k) for k in GPU_WORK_KINDS)}]",
    "CREATE MACRO is_gpu_work(kind) AS list_contains(gpu_work_kinds(), kind)",
    # (the idle causes are the query files' words, SQL like them: _call_causes.sql names each call's)
    "CREATE MACRO holds_host_inner(cause) AS cause IN ('host_sync', 'allocator')",
    "CREATE MACRO holds_host_outer(cause) AS cause IN ('algorithm_search', 'input_pipeline')",
    "CREATE MACRO holds_host(cause) AS holds_host_inner(cause) OR holds_host_outer(cause)",
)
#: The macros' names (a connection for a statement that names none of them defines none: 1 ms).
NAMES = frozenset(statement.split()[2].split("(")[0] for statement in MACROS)
