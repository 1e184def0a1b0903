"""Cut the planted traces the replay tests use down to three profiler steps, with their measured step times.

Each trace keeps ProfilerStep#3-#5 (of #2-#6) the way ``sample_traces/trim_trace.py`` cuts steps, and
also the GPU work launched before them that was still running after they began, without its launch: as
in a profile that began at step #3, a GPU-bound run's first window then starts when that backlog is done
(``_windows``) instead of waiting for GPU work the cut left out. ``manifest.json`` beside them copies each
run's settings and its step times measured without the profiler from the planted traces' manifest (and
the measured times of fixes the tests compare with, under ``measured_only``).

Usage: python scripts/trim_planted.py [PLANTED_DIR] [OUT_DIR]
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The runs the tests replay: AMP pairs (launch-bound, GPU-bound, a real CNN) and planted causes with their fixes.
RUNS = [
    "enc_fp32", "enc_fp16", "control_fp32", "control_fp16", "resnet18_b4_fp32", "resnet18_b4_fp16",
    "input8_fp16", "workers8_fp16", "sync128_fp32", "base128_fp32", "cudnn_var_fp16", "cudnn_var_nobench_fp16",
    "base128_fp32_c5", "alloc128_fp32_c5",
]  # fmt: skip
#: Fixes whose measured step times the tests compare with, without their traces.
MEASURED_ONLY = ["half_fp16"]
FIRST, STEPS = 3, 3


def main(planted: Path, out: Path) -> None:
    spec = importlib.util.spec_from_file_location("trim_trace", ROOT / "sample_traces" / "trim_trace.py")
    assert spec is not None and spec.loader is not None
    trim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trim)
    manifest = json.loads((planted / "manifest.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    kept = {}
    gpu_cats = ("kernel", "gpu_memcpy", "gpu_memset")

    def keep(events: list[dict], lo: float, hi: float) -> list[bool]:
        """trim_trace's choice, and the GPU work launched before the steps that was still running in them."""
        kept = trim_keep(events, lo, hi)
        launched = {
            (e.get("args") or {}).get("correlation"): e["ts"]
            for e in events
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "ts" in e
        }
        out = []
        for e, k in zip(events, kept, strict=True):
            if not k and e.get("cat") in gpu_cats:
                t = launched.get((e.get("args") or {}).get("correlation"))
                k = (t is None or t < lo) and e["ts"] + e.get("dur", 0) > lo
            out.append(k)
        return out

    trim_keep = trim._keep
    trim._keep = keep
    for run in RUNS:
        dst = out / f"{run}_{STEPS}steps.json.gz"
        trim.main(str(planted / f"{run}.json.gz"), str(dst), FIRST, STEPS)
        kept[dst.name] = {**manifest["traces"][f"{run}.json.gz"], "trimmed_from": f"{run}.json.gz",
                          "steps_kept": f"ProfilerStep#{FIRST}-#{FIRST + STEPS - 1}"}  # fmt: skip
        print(f"{dst.name}: {dst.stat().st_size / 1e6:.2f} MB")
    header = {k: v for k, v in manifest.items() if k != "traces"}
    fields = ("model", "mode", "batch", "cause", "machine", "step_ms", "step_ms_each_median", "steps_timed")
    only = {
        run: {k: manifest["traces"][f"{run}.json.gz"][k] for k in fields if k in manifest["traces"][f"{run}.json.gz"]}
        for run in MEASURED_ONLY
    }
    doc = {**header, "traces": kept, "measured_only": only}
    (out / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(Path(args[0] if args else "/work/planted"), Path(args[1] if len(args) > 1 else ROOT / "sample_traces/planted"))
