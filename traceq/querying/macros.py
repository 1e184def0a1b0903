"""The SQL macros every connection defines: facts that several query files name, each written out from
its one definition in Python (a query file never spells them itself).

Facts of the model:

- ``is_profiler_step(name)``: whether a range's name is a profiler step's (:data:`STEP_NAME`);
- ``gpu_work_kinds()``: the event kinds of GPU work, a list (:data:`GPU_WORK_KINDS`);
- ``is_gpu_work(kind)``: whether ``kind`` is one of them.

Facts of the idle causes (the query files name the causes; which of them hold the host is written here):

- ``holds_host(cause)``: whether an idle cause holds the host (:data:`HOLDS_HOST`): its call blocks the
  thread, so a gap that begins in it is that cause's whole and its pieces are charged to the call;
- ``holds_host_inner(cause)``: whether it is one of those charged to the innermost such call (a
  synchronising or allocating runtime call, and the op that made it: :data:`HOLDS_HOST_INNER`);
- ``holds_host_outer(cause)``: whether it is one of those charged to the outermost (a search, a
  data-loading range: :data:`HOLDS_HOST_OUTER`).

DuckDB expands a macro where it is used, so ``WHERE is_gpu_work(kind)`` reaches the Parquet scan as the
same ``kind IN (...)`` filter as the list written out, and a query plans as it would with the list.
"""

from __future__ import annotations

from traceq.model.step_names import STEP_NAME
from traceq.schema import GPU_WORK_KINDS


def sql_string(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


#: Idle causes that hold the host whose call is the innermost one of the cause at an instant.
HOLDS_HOST_INNER = ("host_sync", "allocator")
#: Idle causes that hold the host whose call is the outermost one of the cause at an instant.
HOLDS_HOST_OUTER = ("algorithm_search", "input_pipeline")
#: The idle causes that hold the host.
HOLDS_HOST = HOLDS_HOST_INNER + HOLDS_HOST_OUTER


def _sql_list(items: tuple[str, ...]) -> str:
    return ", ".join(map(sql_string, items))


#: The statements that create the macros, in order. Stored metrics are fingerprinted with this file's
#: text as well as the query files' (:func:`traceq.querying.files.metric_fingerprint`): a change here
#: makes reports compute them again. The model's facts are also the store's as ingested: a change to
#: them is a change of the store's format (:data:`traceq.store.FORMAT_VERSION`).
MACROS: tuple[str, ...] = (
    f"CREATE MACRO is_profiler_step(name) AS regexp_matches(name, {sql_string(STEP_NAME)})",
    f"CREATE MACRO gpu_work_kinds() AS [{_sql_list(GPU_WORK_KINDS)}]",
    "CREATE MACRO is_gpu_work(kind) AS list_contains(gpu_work_kinds(), kind)",
    f"CREATE MACRO holds_host(cause) AS list_contains([{_sql_list(HOLDS_HOST)}], cause)",
    f"CREATE MACRO holds_host_inner(cause) AS cause IN ({_sql_list(HOLDS_HOST_INNER)})",
    f"CREATE MACRO holds_host_outer(cause) AS cause IN ({_sql_list(HOLDS_HOST_OUTER)})",
)
#: The macros' names (a connection for a statement that names none of them defines none: 1 ms).
NAMES = frozenset(statement.split()[2].split("(")[0] for statement in MACROS)
