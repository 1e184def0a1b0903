"""The optional C parts: loaded where they were built at install, unless ``TRACEQ_NATIVE=0``.

Each has a Python path that gives the same tables (the reference it is tested against), so a missing
or disabled C part only costs speed. ``TRACEQ_NATIVE=0`` runs the Python paths (comparisons, bisecting).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

#: The C chrome-trace decoder (:mod:`traceq.readers.chrome.decoder`'s fast path).
DECODER = "traceq.readers.chrome._scan"
#: The C nesting walk and climb (:mod:`traceq.model.nesting`'s fast path).
NESTING = "traceq.model._nest_scan"
#: The C visit of the replay (:mod:`traceq.analysis.replay.engine`'s fast path).
REPLAY = "traceq.analysis.replay._replay_walk"
#: Each C part by the name ``traceq version`` gives it.
PARTS = {"chrome decoder": DECODER, "nesting": NESTING, "replay": REPLAY}

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds the ``traceq`` package


def load(module: str) -> ModuleType | None:
    """The C extension ``module``, or None where it was not built or ``TRACEQ_NATIVE=0``.

    Loaded from its file without importing the packages above it (their ``__init__`` modules import the
    readers and Polars, which ``traceq version`` does not need); registered under its full name, so a later
    import gives the same module."""
    if os.environ.get("TRACEQ_NATIVE") == "0":
        return None
    if module in sys.modules:
        return sys.modules[module]
    folder = _PACKAGE_ROOT.joinpath(*module.split(".")[:-1])
    spec = importlib.machinery.PathFinder.find_spec(module, [str(folder)])
    if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        return None
    try:
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
    except ImportError:  # built for another interpreter, or a library it needs is missing
        return None
    sys.modules[module] = loaded
    return loaded
