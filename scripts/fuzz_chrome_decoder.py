"""Fuzz the C chrome-trace decoder under AddressSanitizer and UBSan.

Builds ``traceq/readers/chrome/_scan.c`` with ``-fsanitize=address,undefined`` into a temporary folder,
then, for a number of seconds, feeds it runs of real events (cut at event boundaries) with a few bytes
changed, inserted or removed. Every body the C decoder accepts must decode to exactly what the msgspec
reference path gives, and the reference must accept it too; a memory error stops the run with ASan's
report. The test suite runs the same kind of check (without sanitizers) on 3,000 bodies.

Usage: python scripts/fuzz_chrome_decoder.py [--seconds 120] [--seed 1]
(needs gcc with libasan; re-runs itself with the sanitizer runtime preloaded)
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import random
import re
import runpy
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "traceq/readers/chrome/_scan.c"
TRACES = [
    ROOT / "sample_traces/kineto_conformer_fp16_b4_2steps.json.gz",
    ROOT / "sample_traces/paddlefmt_conformer_fp16_b64_2steps.json.gz",
    ROOT / "sample_traces/paddle331_cpu_fp32_noshapes.paddle_trace.json.gz",
]
_ALPHABET = b'"\\{}[],:0123456789eE.-+ntfu \x00\xff\xc3\x80'
_TOKENS = [b"\\u", b"\\ud800", b"\\udc00", b'"\\', b"1e999", b"-0", b"null", b"[[[[", b'{"ph":"X"}', b"\xf0\x9f\x98"]


def build(out_dir: Path) -> Path:
    """The scanner built with the sanitizers (any report aborts: none is only printed), with its column
    header written from ``columns.py`` as ``setup.py`` writes it."""
    header = runpy.run_path(str(ROOT / "traceq/readers/chrome/columns.py"))["c_header"]()
    (out_dir / "_scan_columns.h").write_text(header)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    target = out_dir / f"_scan{suffix}"
    flags = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
             "-shared", "-fPIC", "-std=c11"]  # fmt: skip
    includes = [f"-I{sysconfig.get_paths()['include']}", f"-I{out_dir}"]
    subprocess.run(["gcc", *flags, *includes, str(SOURCE), "-o", str(target)], check=True)
    return target


def event_runs() -> list[list[bytes]]:
    runs = []
    for path in TRACES:
        with gzip.open(path) as f:
            text = f.read()
        start = text.index(b"[", text.index(b'"traceEvents"')) + 1
        runs.append(re.split(rb"(?<=\})\s*,\s*(?=\{)", text[start : start + 400_000])[:-1])
    return runs


def mutate(rng: random.Random, runs: list[list[bytes]]) -> bytes:
    events = rng.choice(runs)
    k = rng.randrange(len(events) - 10)
    body = bytearray((b",\n" if rng.random() < 0.5 else b",").join(events[k : k + rng.randint(1, 8)]))
    if rng.random() < 0.1:
        body = body[: rng.randint(0, len(body))]
    for _ in range(rng.randint(0, 3)):
        if not body:
            break
        i, op = rng.randrange(len(body)), rng.random()
        if op < 0.3:
            body[i] = rng.randrange(256)
        elif op < 0.5:
            body[i:i] = bytes(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 4)))
        elif op < 0.7:
            del body[i : i + rng.randint(1, 20)]
        elif op < 0.85:
            body[i:i] = rng.choice(_TOKENS)
        else:
            j = rng.randrange(len(body))
            body[i:i] = body[j : j + rng.randint(1, 200)]
    return bytes(body)


def campaign(module_path: Path, seconds: float, seed: int) -> None:
    from polars.testing import assert_frame_equal

    from traceq.readers.chrome import decoder

    spec = importlib.util.spec_from_file_location("_scan", module_path)
    assert spec is not None and spec.loader is not None
    native = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native)
    decoder._scan = native
    rng, runs = random.Random(seed), event_runs()
    n = accepted = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        body = mutate(rng, runs)
        n += 1
        if native.decode(body) is None:
            continue
        accepted += 1
        got = decoder.body_decoder(True, "fuzz")
        got._try_decode(body)
        ref = decoder.body_decoder(False, "fuzz")
        if not ref._try_decode(body):
            sys.exit(f"the C decoder accepted what the reference refuses: {body[:300]!r}")
        got.chunks.finish()
        ref.chunks.finish()
        if len(ref.chunks):
            assert_frame_equal(got.chunks.concat(), ref.chunks.concat())
        assert got.metadata_events == ref.metadata_events and got.skipped == ref.skipped
    print(f"{n:,} bodies, {accepted:,} accepted by the C decoder and equal to the reference; no sanitizer report")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--module", type=Path, help=argparse.SUPPRESS)  # set when re-run under the sanitizers
    a = ap.parse_args()
    if a.module is not None:
        campaign(a.module, a.seconds, a.seed)
        return
    with tempfile.TemporaryDirectory(prefix="traceq-fuzz-") as tmp:
        module = build(Path(tmp))
        runtime = [
            subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
            for lib in ("libasan.so", "libubsan.so")
        ]
        env = {**os.environ, "LD_PRELOAD": ":".join(runtime), "ASAN_OPTIONS": "detect_leaks=0", "PYTHONPATH": str(ROOT)}
        args = ["--seconds", str(a.seconds), "--seed", str(a.seed), "--module", str(module)]
        sys.exit(subprocess.run([sys.executable, __file__, *args], env=env).returncode)


if __name__ == "__main__":
    main()
