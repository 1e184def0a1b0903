"""A third-party module imported when first used, not when its user is imported."""

from __future__ import annotations

import importlib
from typing import Any


class OnFirstUse:
    """Stands for the module ``name`` until an attribute of it is read, then imports it: the commands that
    never touch Polars or DuckDB (listing runs, resolving a run's name) do not pay for their import
    (each several times Python's own start-up)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)
