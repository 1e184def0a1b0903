"""Build a bigger chrome trace from a real one by replicating its steps in time.

Copy k of every non-metadata event is shifted by k times the trace's span (plus a 1 ms gap), and its
ids are made unique: ``ProfilerStep#N`` becomes ``ProfilerStep#(N + k * steps)``, and the correlation,
``External id`` and flow ids are offset by k times their maximum, so every kernel keeps its own launch.
The result is what a longer profile of the same job would look like. Written as gzip JSON, one copy at
a time (memory holds the source's events once).

Usage: python benchmarks/replicate_trace.py SOURCE.json.gz OUT.json.gz --copies K
"""

from __future__ import annotations

import argparse
import gzip
import re
from pathlib import Path
from typing import Any

import msgspec

_STEP = re.compile(r"^(Profiler|Profile)Step#(\d+)$")
_ID_ARGS = ("correlation", "External id", "correlation id", "Ev Idx")


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        doc = msgspec.json.decode(f.read())
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def replicate(source: Path, out: Path, copies: int) -> int:
    """Write ``copies`` time-shifted copies of ``source``'s events to ``out``; return the event count."""
    doc = _load(source)
    events = doc.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    timed = [e for e in body if isinstance(e.get("ts"), int | float)]
    start = min(float(e["ts"]) for e in timed)
    end = max(float(e["ts"]) + float(e.get("dur") or 0) for e in timed)
    shift = end - start + 1000.0
    steps = [int(m.group(2)) for e in body if (m := _STEP.match(str(e.get("name", ""))))]
    step_span = (max(steps) - min(steps) + 1) if steps else 0
    max_id = {k: 0 for k in _ID_ARGS}
    max_flow = 0
    for e in body:
        args = e.get("args") or {}
        for k in _ID_ARGS:
            if isinstance(args.get(k), int):
                max_id[k] = max(max_id[k], args[k])
        if isinstance(e.get("id"), int):
            max_flow = max(max_flow, e["id"])
    encoder = msgspec.json.Encoder()
    written = 0
    with gzip.open(out, "wb", compresslevel=1) as f:
        head = encoder.encode(doc)[:-1]  # the metadata keys, without the closing brace
        f.write(head + (b"," if len(head) > 1 else b"") + b'"traceEvents":[')
        f.write(encoder.encode(meta)[1:-1])
        for k in range(copies):
            chunk = [_shifted(e, k, shift, step_span, max_id, max_flow) for e in body]
            if meta or k:
                f.write(b",")
            f.write(encoder.encode(chunk)[1:-1])
            written += len(chunk)
        f.write(b"]}")
    return written + len(meta)


def _shifted(e: dict[str, Any], k: int, shift: float, step_span: int, max_id: dict[str, int], max_flow: int) -> Any:
    if k == 0:
        return e
    c = dict(e)
    if isinstance(c.get("ts"), int | float):
        c["ts"] = c["ts"] + k * shift
    m = _STEP.match(str(c.get("name", "")))
    if m and step_span:
        c["name"] = f"{m.group(1)}Step#{int(m.group(2)) + k * step_span}"
    if isinstance(c.get("id"), int):
        c["id"] = c["id"] + k * (max_flow + 1)
    args = c.get("args")
    if isinstance(args, dict):
        fixed = dict(args)
        for key in _ID_ARGS:
            if isinstance(fixed.get(key), int) and fixed[key] >= 0:
                fixed[key] = fixed[key] + k * (max_id[key] + 1)
        c["args"] = fixed
    return c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("source", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--copies", type=int, required=True)
    a = ap.parse_args()
    n = replicate(a.source, a.out, a.copies)
    print(f"wrote {a.out}: {n:,} events, {a.out.stat().st_size / 1e6:.1f} MB gzip")


if __name__ == "__main__":
    main()
