"""Every query joins rows by their keys where it has keys: no query's plan compares every pair of rows of
a join that has an equality (DuckDB 1, which Python 3.10 installs, did so for a LEFT JOIN whose ON held a
condition on one side alone: a report of 1.2 M events took 215 s there instead of 5 s)."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.conftest import SAMPLES, Ingested
from traceq.querying.engine import Session
from traceq.querying.files import dependency_order, query_names, query_text

#: DuckDB's operators that compare every pair of rows of a join (its plans' names, DuckDB 1 and 2)
PAIRWISE = {"NESTED_LOOP_JOIN", "BLOCKWISE_NL_JOIN"}


def _pairwise_joins(node: dict[str, Any]) -> list[str]:
    """The conditions of the pairwise joins in a plan's tree whose condition holds an equality of columns."""
    found = []
    if node.get("name", "").strip() in PAIRWISE:
        condition = json.dumps(node.get("extra_info", {}))
        if re.search(r"\w = \w", condition):  # (a column against a column, not against a literal)
            found.append(condition)
    for child in node.get("children", []):
        found += _pairwise_joins(child)
    return found


def test_no_query_compares_every_pair_of_rows_of_a_join_with_keys(ingested: Ingested) -> None:
    store = ingested.store(SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz")
    looped = {}
    with Session(store, own_queries=True, use_stored=False) as session:
        for name in sorted(query_names()):
            session.make([n for n, _ in dependency_order(name) if n != name])
            ((_, plan),) = session.con.execute("EXPLAIN (FORMAT JSON) " + query_text(name)).fetchall()
            joins = [c for tree in json.loads(plan) for c in _pairwise_joins(tree)]
            if joins:
                looped[name] = joins
    assert not looped
