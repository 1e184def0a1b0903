"""The SQL macros every connection defines: facts of the model that the query files name, each written
out from its one definition in Python (a query file never spells them itself).

- ``is_profiler_step(name)``: whether a range's name is a profiler step's (:data:`STEP_NAME`);
- ``gpu_work_kinds()``: the event kinds of GPU work, a list (:data:`GPU_WORK_KINDS`);
- ``is_gpu_work(kind)``: whether ``kind`` is one of them. DuckDB expands a macro where it is used, so
  ``WHERE is_gpu_work(kind)`` reaches the Parquet scan as the same ``kind IN (...)`` filter as the list
  written out.
"""

from __future__ import annotations

from traceq.model.step_names import STEP_NAME
from traceq.schema import GPU_WORK_KINDS


def sql_string(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


#: The statements that create the macros, in order. Stored metrics are fingerprinted by the query files
#: alone: these facts are the model's, which a store holds as ingested (a change to them is a change of
#: the store's format, :data:`traceq.store.FORMAT_VERSION`).
MACROS: tuple[str, ...] = (
    f"CREATE MACRO is_profiler_step(name) AS regexp_matches(name, {sql_string(STEP_NAME)})",
    f"CREATE MACRO gpu_work_kinds() AS [{', '.join(sql_string(k) for k in GPU_WORK_KINDS)}]",
    "CREATE MACRO is_gpu_work(kind) AS list_contains(gpu_work_kinds(), kind)",
)
#: The macros' names (a connection for a statement that names none of them defines none: 1 ms).
NAMES = frozenset(statement.split()[2].split("(")[0] for statement in MACROS)
