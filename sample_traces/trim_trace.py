"""Cut a real chrome trace down to a few profiler steps (how the bundled samples were made).

Keeps every event that starts inside the chosen steps' window, the GPU work launched from it, the flow
and metadata events, and the file's header. Paddle-layout files (one event per line) are cut line by
line so their exact layout (unescaped names, ``[x us]`` suffixes, trailing ``{}``) is preserved.

Usage: python trim_trace.py IN.json[.gz] OUT.json.gz FIRST_STEP NUM_STEPS
"""

from __future__ import annotations

import gzip
import json
import re
import sys

STEP = re.compile(r"^Profiler?Step#(\d+)")


def _window(events: list[dict], first: int, num: int) -> tuple[float, float]:
    steps = {}
    for e in events:
        m = STEP.match(str(e.get("name", "")))
        if m and e.get("ph") == "X" and e.get("cat") in ("user_annotation", "ProfileStep"):
            steps[int(m.group(1))] = (e["ts"], e["ts"] + e["dur"])
    chosen = [steps[s] for s in range(first, first + num)]
    return chosen[0][0], chosen[-1][1]


def _keep(events: list[dict], lo: float, hi: float) -> list[bool]:
    corr_keys = ("correlation", "correlation id")
    host = set()
    for e in events:
        a = e.get("args") or {}
        if e.get("cat") in ("cuda_runtime", "cuda_driver", "CudaRuntime") and lo <= e["ts"] < hi:
            host.update(a[k] for k in corr_keys if k in a)
    keep = []
    for e in events:
        a = e.get("args") or {}
        ph = e.get("ph")
        if ph == "M" or not e:
            keep.append(True)
        elif ph in ("s", "f"):
            keep.append(e.get("id") in host or (e.get("cat") == "fwdbwd" and lo <= e["ts"] < hi))
        elif e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"):
            keep.append(any(a.get(k) in host for k in corr_keys))
        else:
            keep.append("ts" in e and lo <= e["ts"] < hi)
    return keep


def main(src: str, dst: str, first: int, num: int) -> None:
    with gzip.open(src, "rt") if src.endswith(".gz") else open(src) as f:
        text = f.read()
    doc = json.loads(text)
    events = doc["traceEvents"]
    lo, hi = _window(events, first, num)
    keep = _keep(events, lo, hi)
    if '(C++)"' in text:  # Paddle layout: one event per line, keep lines verbatim
        lines = text.split("\n")
        start = next(i for i, line in enumerate(lines) if '"traceEvents"' in line) + 1
        body = [line for line in lines[start:] if line.strip().startswith("{")]
        assert len(body) == len(events), "expected one event per line"
        end = start + len(body)
        kept = [line for line, k in zip(body, keep, strict=True) if k]
        out = "\n".join(lines[:start] + kept + lines[end:])
    else:
        doc["traceEvents"] = [e for e, k in zip(events, keep, strict=True) if k]
        out = (
            "{\n"
            + ",\n".join(
                f"  {json.dumps(k)}: "
                + (
                    "[\n" + ",\n".join("  " + json.dumps(e) for e in v) + "\n  ]"
                    if k == "traceEvents"
                    else json.dumps(v)
                )
                for k, v in doc.items()
            )
            + "\n}\n"
        )
    json.loads(out)
    with gzip.open(dst, "wt", compresslevel=9) as f:
        f.write(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
