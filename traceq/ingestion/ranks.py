"""Which rank each trace file of a multi-rank run is.

In order of preference: the rank each file declares (Kineto's ``distributedInfo.rank``), a rank number
in each file name (``rank3``, ``rank-3``, ``worker_3``, ``gpu3``), the order of the files. A source is
used only when it gives every file a rank and no two files the same one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

_RANK_IN_NAME = re.compile(r"(?i)(?<![a-z])(?:rank|worker|proc|gpu|device)[-_.]?(\d+)")
_NUMBER = re.compile(r"(\d+)")


def rank_in_name(path: Path) -> int | None:
    """The rank number a file name carries, if any."""
    found = _RANK_IN_NAME.findall(path.name)
    return int(found[-1]) if found else None


def natural_key(path: Path) -> list[object]:
    """Sort key that orders ``rank2`` before ``rank10``."""
    return [int(p) if p.isdigit() else p for p in _NUMBER.split(path.name)]


def assign_ranks(paths: Sequence[Path], declared: Sequence[int | None]) -> tuple[list[int], str, list[str]]:
    """Ranks for ``paths`` (in the given order), where they came from, and warnings about rejected sources."""
    warnings: list[str] = []
    for source, ranks in (("distributedInfo", list(declared)), ("file_name", [rank_in_name(p) for p in paths])):
        if all(r is not None for r in ranks):
            if len(set(ranks)) == len(ranks):
                return [int(r) for r in ranks], source, warnings  # type: ignore[arg-type]
            warnings.append(f"{source} ranks are not distinct ({_short(ranks)}); not used")
        elif any(r is not None for r in ranks):
            warnings.append(f"{source} gives a rank for only some files; not used")
    return list(range(len(paths))), "file_order", warnings


def _short(ranks: Sequence[int | None]) -> str:
    text = ", ".join(str(r) for r in ranks[:8])
    return text + (", ..." if len(ranks) > 8 else "")
