"""The optional C parts: loaded where they were built at install, unless ``TRACEQ_NATIVE=0``.

Each has a Python path that gives the same tables (the reference it is tested against), so a missing
or disabled C part only costs speed. ``TRACEQ_NATIVE=0`` runs the Python paths (comparisons, bisecting).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load(module: str) -> ModuleType | None:
    """The C extension ``module``, or None where it was not built or ``TRACEQ_NATIVE=0``."""
    if os.environ.get("TRACEQ_NATIVE") == "0":
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
