"""Cut the planted traces the tests use down to three profiler steps.

Each trace keeps ProfilerStep#3-#5 (of #2-#6) the way ``sample_traces/trim_trace.py`` cuts steps, and
also the GPU work launched before them that was still running after they began, without its launch: as
in a profile that began at step #3, a GPU-bound run's first window then starts when that backlog is done
(``_windows``) instead of waiting for GPU work the cut left out.

Usage: python scripts/trim_planted.py TRACES_DIR OUT_DIR   (every RUN.json.gz -> RUN_3steps.json.gz)
``scripts/clean_manifest.py`` then writes the manifest with the runs' clean step times.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST, STEPS = 3, 3
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def trimmer() -> Callable[[Path, Path], None]:
    """A function that cuts one chrome trace (src -> dst) to steps FIRST..FIRST+STEPS-1."""
    spec = importlib.util.spec_from_file_location("trim_trace", ROOT / "sample_traces" / "trim_trace.py")
    assert spec is not None and spec.loader is not None
    trim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trim)
    trim_keep = trim._keep

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
            if not k and e.get("cat") in GPU_CATS:
                t = launched.get((e.get("args") or {}).get("correlation"))
                k = (t is None or t < lo) and e["ts"] + e.get("dur", 0) > lo
            out.append(k)
        return out

    trim._keep = keep

    def cut(src: Path, dst: Path) -> None:
        trim.main(str(src), str(dst), FIRST, STEPS)

    return cut


def main(traces: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cut = trimmer()
    for src in sorted(traces.glob("*.json.gz")):
        dst = out / f"{src.name[: -len('.json.gz')]}_{STEPS}steps.json.gz"
        cut(src, dst)
        print(f"{dst.name}: {dst.stat().st_size / 1e6:.2f} MB", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
