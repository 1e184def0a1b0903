"""The comparison's "Largest per-op changes": ordered by how much each op changed, not by how large it is.
The per-op CPU times are computed from the raw traces (inclusive time of each op name per profiler step)."""

from __future__ import annotations

import collections
import gzip
import json
import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from traceq import compare

STEP = re.compile(r"^ProfilerStep#\d+")
FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"


def _cpu_ms_per_step(path: Path) -> dict[str, float]:
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    steps = [
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "user_annotation" and STEP.match(e["name"])
    ]
    total: collections.Counter[str] = collections.Counter()
    for e in events:
        if e.get("cat") == "cpu_op" and any(lo <= e["ts"] < hi for lo, hi in steps):
            total[e["name"]] += e["dur"] / 1e3
    return {name: ms / len(steps) for name, ms in total.items()}


def test_largest_per_op_changes_come_first(tmp_path: Path) -> None:
    base, new = _cpu_ms_per_step(FP32), _cpu_ms_per_step(FP16)
    change = {name: new.get(name, 0.0) - base.get(name, 0.0) for name in base.keys() | new.keys()}
    result = compare(str(FP32), str(FP16), tmp_path / "s")
    deltas = result.op_deltas
    size = [max(abs(c), abs(g)) for c, g in zip(deltas["cpu_delta_ms"], deltas["gpu_delta_ms"], strict=True)]
    assert size == sorted(size, reverse=True)
    shown = deltas.head(10)
    for name in sorted(change, key=lambda n: -abs(change[n]))[:6]:  # the six largest CPU changes are shown
        row = shown.filter(name=name)
        assert row.height == 1, name
        assert row["cpu_delta_ms"][0] == pytest.approx(change[name], abs=1e-3)
    # ToCopyBackward0 (AMP only, +3.7 ms) comes before ops that are larger but changed less
    to_copy = deltas["name"].to_list().index("ToCopyBackward0")
    larger = [n for n in base if base[n] > new.get("ToCopyBackward0", 0.0) and abs(change[n]) < 1.0]
    assert larger and all(deltas["name"].to_list().index(n) > to_copy for n in larger)
