"""How many jobs this process may run at once."""

from __future__ import annotations

import os


def default_jobs() -> int:
    """All cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
