"""What a one-file run stores with its metrics besides them: the contract between ingest and the step it is
given (:class:`WholeRunStep`), in a module of its own so that the analysis that provides the step imports
none of ingest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from traceq.querying.engine import Session


@dataclass(frozen=True)
class WholeRunStep:
    """A step stored with the metrics of a rank that is a whole run (a one-file run) whose diagnosis is
    stored, and with GPU kernels. The Python API passes the step estimated without the profiler
    (:data:`traceq.analysis.replay.explain.ESTIMATE_STEP`); ingest itself knows no analysis. Both are
    module-level functions: the step travels to the ingest's workers by name."""

    #: given the session that made the metrics, the rank's metrics folder, the run's flavour, its events by
    #: kind, and where to name its stage in the ingest's progress (once it knows it has work to do)
    run: Callable[[Session, Path, str, dict[str, int], Callable[[str], None]], None]
    #: given the run's flavour and events by kind: the memory the step will take, bytes (None: it will not
    #: run), a share of which the metrics before it may take (see ``metrics_memory_limit``, :mod:`.metrics`)
    memory: Callable[[str, dict[str, int]], int | None]
