"""dtype conversions per profiler step counted from a raw Kineto trace with the standard library alone: the
independent reference for ``cast_overhead``'s counts."""

from __future__ import annotations

import bisect
import re
from pathlib import Path

from tests.conftest import raw_trace

STEP = re.compile(r"^ProfilerStep#(\d+)")


def raw_conversions(path: Path) -> dict[int, int]:
    """Per step: the ``aten::_to_copy`` calls that are not device copies, and the ``aten::copy_`` calls
    between two recorded dtypes outside any ``aten::_to_copy``. A device copy is an ``aten::_to_copy`` inside
    which a memory copy was launched (the runtime call whose correlation a ``gpu_memcpy`` carries) with no
    ``aten::copy_`` between two dtypes inside it: ``.cpu()``, ``x.to('cuda')``."""
    events = [e for e in raw_trace(path)["traceEvents"] if e.get("ph") == "X"]
    steps = [
        (int(STEP.match(e["name"]).group(1)), e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and STEP.match(e["name"])
    ]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    to_copy = [e for e in ops if e["name"] == "aten::_to_copy"]
    converting = [
        e for e in ops if e["name"] == "aten::copy_" and len({x for x in e["args"].get("Input type", []) if x}) > 1
    ]
    copied = {e["args"].get("correlation") for e in events if e.get("cat") == "gpu_memcpy"}
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") in copied]

    def starts_by_thread(rows: list[dict]) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for e in rows:
            out.setdefault(e["tid"], []).append(e["ts"])
        return {tid: sorted(ts) for tid, ts in out.items()}

    launch_ts, converting_ts = starts_by_thread(launches), starts_by_thread(converting)

    def any_inside(starts: dict[int, list[float]], op: dict) -> bool:
        ts = starts.get(op["tid"], [])
        i = bisect.bisect_left(ts, op["ts"])
        return i < len(ts) and ts[i] < op["ts"] + op["dur"]

    def inside_to_copy(c: dict) -> bool:
        end = c["ts"] + c["dur"]
        return any(t["tid"] == c["tid"] and t["ts"] <= c["ts"] and end <= t["ts"] + t["dur"] for t in to_copy)

    casts = [t for t in to_copy if not any_inside(launch_ts, t) or any_inside(converting_ts, t)]
    starts = [t["ts"] for t in casts] + [c["ts"] for c in converting if not inside_to_copy(c)]
    return {n: sum(lo <= t < hi for t in starts) for n, lo, hi in steps}
