"""An op's GPU time has one definition in every format: the GPU work launched by the op or beneath it, summed
over its calls (a call nested in a call of the same name counts in both, as its CPU time does), labelled
"incl." in the text formats and drawn so in the HTML page; its coverage columns are over the same kernels.
The expected time is computed from the raw trace: each GPU event's launch call (by correlation id) inside
each ``aten::linear`` call on its thread."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, run_cli

FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
STEP = re.compile(r"^ProfilerStep#\d+")


def _gpu_ms_per_step(path: Path, op: str) -> float:
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    steps = [
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "user_annotation" and STEP.match(e["name"])
    ]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] == op]
    calls = [e for e in ops if any(lo <= e["ts"] < hi for lo, hi in steps)]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    total = 0.0
    for g in events:
        if g.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        launch = launches.get(g.get("args", {}).get("correlation"))
        if launch is not None:
            inside = sum(1 for c in calls if c["tid"] == launch["tid"] and c["ts"] <= launch["ts"] < c["ts"] + c["dur"])
            total += g["dur"] * inside
    return total / 1e3 / len(steps)


def test_an_op_s_gpu_time_is_its_inclusive_time_in_every_format(tmp_path: Path) -> None:
    want = _gpu_ms_per_step(FP16, "aten::linear")
    assert want > 0.1  # aten::linear launches nothing itself: its GEMMs come from aten::addmm beneath it
    store = str(tmp_path / "s")
    assert run_cli("ingest", str(FP16), "--store", store).returncode == 0
    md = run_cli("report", "kineto_conformer_fp16_b4_2steps", "--store", store, "--format", "markdown").stdout
    header = next(line for line in md.splitlines() if line.startswith("| name | calls/step |"))
    row = next(line for line in md.splitlines() if line.startswith("| aten::linear |"))
    cells = dict(zip(header.strip("|").split("|"), row.strip("|").split("|"), strict=True))
    cells = {k.strip(): v.strip() for k, v in cells.items()}
    assert float(cells["gpu ms/step (incl.)"]) == pytest.approx(want, abs=5e-4)
    for coverage in ("fp16 coverage (incl.)", "tensor-core coverage (incl.)"):
        assert 0 <= float(cells[coverage]) <= 1  # over the kernels beneath it, not empty
    name = "kineto_conformer_fp16_b4_2steps"
    report = json.loads(run_cli("report", name, "--store", store, "--format", "json").stdout)
    op = next(o for o in report["ops"] if o["name"] == "aten::linear")
    assert op["gpu_incl_ns_per_step"] / 1e6 == pytest.approx(want, abs=1e-6)
    assert op["fp16_coverage"] is not None
    page = run_cli("report", "kineto_conformer_fp16_b4_2steps", "--store", store, "--format", "html").stdout
    drawn = page.split("GPU time each op caused")[1].split("</svg>")[0]
    assert re.search(r"aten::linear</text><rect [^>]*/><text [^>]*>" + re.escape(f"{want:.2f} ms"), drawn)
