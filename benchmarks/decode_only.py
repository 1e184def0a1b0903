"""Benchmark: decoding alone, traceq's C decoder against parse-only references, on the same bytes.

The trace is decompressed into memory first and cut into the 16 MB bodies of complete events the
reader hands to its decoder, so only decoding is timed (no gunzip, model or Parquet). Lines:

- traceq C decoder: JSON bytes to typed Arrow columns (what ingest uses);
- traceq Python path: the msgspec reference decoding the same bodies into the same columns;
- simdjson parse only (``pysimdjson``, run in ``--peer-python`` where it is installed): builds its
  document and touches nothing, the physical reference for a JSON scan on this machine;
- msgspec untyped decode to Python objects (parse only, no columns).

Usage: python benchmarks/decode_only.py [TRACE] [--peer-python PYTHON] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from traceq.readers.chrome import decoder

DEFAULT = Path(__file__).resolve().parents[2] / "shared/traces/hta/df_index_resolver/df_index_resolver.json.gz"

_SIMDJSON = """
import json, sys, time
import simdjson
bodies = [open(p, "rb").read() for p in sys.argv[1:]]
parser = simdjson.Parser()
best = None
for _ in range(3):
    t = time.perf_counter()
    for b in bodies:
        doc = parser.parse(b"[" + b + b"]")
        del doc
    best = min(best or 1e9, time.perf_counter() - t)
print(json.dumps({"seconds": best}))
"""


def bodies_of(path: Path, chunk: int = decoder.CHUNK) -> list[bytes]:
    """The event array cut into bodies of about ``chunk`` bytes ending at event boundaries."""
    with gzip.open(path) if path.name.endswith(".gz") else path.open("rb") as f:
        text = f.read()
    start = text.index(b"[", text.index(b'"traceEvents"')) + 1 if text.lstrip()[:1] == b"{" else 1
    end = text.rindex(b"]")
    out, pos = [], start
    boundary = re.compile(rb"\}\s*,\s*(?=\{)")
    while pos < end:
        m = boundary.search(text, min(pos + chunk, end)) if pos + chunk < end else None
        if m is None:
            out.append(text[pos:end].strip())
            break
        out.append(text[pos : m.start() + 1])
        pos = m.end()
    return out


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def decode_all(bodies: list[bytes], native: bool) -> None:
    body_decoder = decoder.body_decoder(native)
    for body in bodies:
        body_decoder._decode_events(body)
    body_decoder.chunks.finish()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--peer-python", default=sys.executable, help="a Python with pysimdjson installed")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    bodies = bodies_of(a.trace)
    mb = sum(len(b) for b in bodies) / 1e6
    print(f"{a.trace.name}: {mb:.1f} MB of events in {len(bodies)} bodies; best of {a.repeat} runs each\n")
    rows = []
    if decoder.native_available():
        rows.append(("traceq C decoder (to Arrow columns)", best_of(a.repeat, lambda: decode_all(bodies, True))))
    rows.append(("traceq Python path (msgspec, to columns)", best_of(a.repeat, lambda: decode_all(bodies, False))))
    any_decoder = msgspec.json.Decoder()
    rows.append(
        (
            "msgspec untyped parse (to objects)",
            best_of(a.repeat, lambda: [any_decoder.decode(b"[" + b + b"]") for b in bodies]),
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, b in enumerate(bodies):
            files.append(Path(tmp) / f"{i}.json")
            files[-1].write_bytes(b)
        proc = subprocess.run([a.peer_python, "-c", _SIMDJSON, *map(str, files)], capture_output=True, text=True)
        if proc.returncode == 0:
            rows.append(("simdjson parse only (pysimdjson)", json.loads(proc.stdout)["seconds"]))
        else:
            lines = proc.stderr.strip().splitlines()
            print(f"simdjson: not runnable with {a.peer_python}: {lines[-1] if lines else proc.returncode}")
    print(f"{'decoder':<44}{'s':>8}{'MB/s':>9}")
    for label, seconds in rows:
        print(f"{label:<44}{seconds:>8.3f}{mb / seconds:>9.0f}")


if __name__ == "__main__":
    main()
