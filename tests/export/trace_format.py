"""A checker of Chrome Trace Event Format JSON as Perfetto's JSON importer reads it.

Written from the format's documentation (the Trace Event Format document: phases, required keys, flow
events, metadata) and from what Perfetto documents and its importer does with such a file: it reads
``ts``/``dur`` as microseconds digit by digit into whole nanoseconds, drops events with a negative time,
takes pids and tids as unsigned 32-bit integers, refuses a top-level array value in an event and raw
control characters in its strings, needs ``args`` of a counter to be an object of numbers, binds a flow's
``s`` to the slice enclosing it and an ``f`` with ``bp: "e"`` to the slice enclosing it, and requires
``X`` slices on one thread to nest (overlapping ones are out of spec).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

#: Phases this checker knows (those traceq writes, and the duration and async ones of the format).
PHASES = {"X", "B", "E", "i", "I", "C", "M", "s", "t", "f", "b", "e", "n"}
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_U32 = 1 << 32


@dataclass
class TraceCheck:
    """What :func:`check_trace` found."""

    #: problems that make the importer refuse or drop something, as text
    errors: list[str] = field(default_factory=list)
    #: per (pid, tid): X slices that overlap a slice they do not nest in
    overlaps: Counter[tuple[int, int]] = field(default_factory=Counter)
    phases: Counter[str] = field(default_factory=Counter)
    flows: int = 0
    process_names: dict[int, str] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)

    def error(self, text: str) -> None:
        if len(self.errors) < 50:
            self.errors.append(text)


def _ns(value: Any) -> int | None:
    """A ``ts``/``dur`` value (parsed with Decimal floats) as whole ns, or None if not a number with at
    most three decimals."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return None
    scaled = Decimal(value) * 1000
    return int(scaled) if scaled == scaled.to_integral_value() else None


def check_trace(doc: Any) -> TraceCheck:
    """Check a parsed trace (``json.loads(text, parse_float=Decimal)``)."""
    out = TraceCheck()
    if isinstance(doc, list):
        events = doc
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events = doc["traceEvents"]
        unit = doc.get("displayTimeUnit")
        if unit is not None and unit not in ("ms", "ns"):
            out.error(f"displayTimeUnit {unit!r} is neither 'ms' nor 'ns'")
    else:
        out.error("not a trace: neither an array of events nor an object with a traceEvents array")
        return out
    slices: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    flow_ends: dict[tuple[Any, Any, Any], list[tuple[str, int, int, int]]] = defaultdict(list)
    used: set[tuple[int, int]] = set()
    for k, e in enumerate(events):
        where = f"event {k}"
        if not isinstance(e, dict):
            out.error(f"{where}: not an object")
            continue
        ph = e.get("ph")
        out.phases[str(ph)] += 1
        if ph not in PHASES:
            out.error(f"{where}: unknown phase {ph!r}")
            continue
        for key, value in e.items():
            if isinstance(value, list):
                out.error(f"{where}: top-level key {key!r} holds an array (Perfetto's tokenizer refuses it)")
            if isinstance(value, str) and _CONTROL.search(value):
                out.error(f"{where}: control character in {key!r}")
        for key in ("pid", "tid"):
            if key in e and (isinstance(e[key], bool) or not isinstance(e[key], int) or not 0 <= e[key] < _U32):
                out.error(f"{where}: {key} {e[key]!r} is not an integer in [0, 2**32)")
        if "name" in e and not isinstance(e["name"], str):
            out.error(f"{where}: name is not a string")
        if "cat" in e and not isinstance(e["cat"], str):
            out.error(f"{where}: cat is not a string")
        if "args" in e and not isinstance(e["args"], dict):
            out.error(f"{where}: args is not an object")
        if ph == "M":
            _check_metadata(e, where, out)
            continue
        ts = _ns(e.get("ts"))
        if ts is None:
            out.error(f"{where}: ts {e.get('ts')!r} is not a number of microseconds with at most 3 decimals")
            continue
        if ts < 0:
            out.error(f"{where}: negative ts (Perfetto drops it)")
        if "pid" not in e:
            out.error(f"{where}: no pid")
            continue
        track = (e["pid"], e.get("tid", e["pid"]))
        if ph == "X":
            dur = _ns(e.get("dur"))
            if dur is None or dur < 0:
                out.error(f"{where}: X event without a duration >= 0")
                continue
            slices[track].append((ts, dur))
            used.add(track)
        elif ph in ("i", "I"):
            if e.get("s", "t") not in ("t", "p", "g"):
                out.error(f"{where}: instant scope {e.get('s')!r}")
            if e.get("s", "t") == "t":
                used.add(track)
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args:
                out.error(f"{where}: counter without args")
            elif not all(isinstance(v, int | Decimal) and not isinstance(v, bool) for v in args.values()):
                out.error(f"{where}: counter args are not all numbers")
        elif ph in ("s", "t", "f"):
            if "id" not in e or isinstance(e["id"], bool) or not isinstance(e["id"], int | str):
                out.error(f"{where}: flow event without an id")
                continue
            if ph == "f" and e.get("bp", "e") != "e":
                out.error(f"{where}: flow end binds to the next slice (bp {e.get('bp')!r}); traceq binds enclosing")
            flow_ends[(e.get("cat"), e.get("name"), e["id"])].append((ph, ts, *track))
    for track, spans in slices.items():
        out.overlaps[track] += _misnested(spans)
    out.overlaps = +out.overlaps
    _check_flows(flow_ends, slices, out)
    for pid, _ in sorted(used):
        if pid not in out.process_names:
            out.error(f"pid {pid} has no process_name")
            break
    for track in sorted(used):
        if track not in out.thread_names:
            out.error(f"thread {track} has no thread_name")
            break
    return out


def _check_metadata(e: dict[str, Any], where: str, out: TraceCheck) -> None:
    name, args = e.get("name"), e.get("args")
    if name not in METADATA:
        out.error(f"{where}: unknown metadata {name!r}")
        return
    if not isinstance(args, dict) or "pid" not in e:
        out.error(f"{where}: metadata without pid or args")
        return
    if name in ("process_name", "thread_name") and not isinstance(args.get("name"), str):
        out.error(f"{where}: {name} without a string args.name")
    index = args.get("sort_index")
    if name.endswith("sort_index") and (isinstance(index, bool) or not isinstance(index, int)):
        out.error(f"{where}: {name} without an integer args.sort_index")
    if name == "process_name" and isinstance(args.get("name"), str):
        out.process_names[e["pid"]] = args["name"]
    if name == "thread_name" and isinstance(args.get("name"), str):
        out.thread_names[(e["pid"], e.get("tid", e["pid"]))] = args["name"]


def _misnested(spans: list[tuple[int, int]]) -> int:
    """Slices (ts, dur) of one track that start inside another and end after it."""
    bad, stack = 0, []
    for ts, dur in sorted(spans, key=lambda s: (s[0], -s[1])):
        while stack and stack[-1] <= ts:
            stack.pop()
        end = ts + dur
        if stack and end > stack[-1]:
            bad += 1
            continue
        stack.append(end)
    return bad


def _check_flows(
    ends: dict[tuple[Any, Any, Any], list[tuple[str, int, int, int]]],
    slices: dict[tuple[int, int], list[tuple[int, int]]],
    out: TraceCheck,
) -> None:
    index = {track: sorted(spans) for track, spans in slices.items()}
    for key, points in ends.items():
        phases = sorted(p[0] for p in points)
        if phases != ["f", "s"]:
            out.error(f"flow {key}: {phases} instead of one s and one f")
            continue
        out.flows += 1
        for ph, ts, pid, tid in points:
            if not _enclosed(index.get((pid, tid), []), ts):
                out.error(f"flow {key}: its {ph} at {ts} ns is inside no slice of thread {(pid, tid)}")


def _enclosed(spans: list[tuple[int, int]], ts: int) -> bool:
    import bisect

    k = bisect.bisect_right(spans, (ts, 1 << 62))
    return any(start <= ts < start + max(dur, 1) for start, dur in spans[max(0, k - 64) : k])
