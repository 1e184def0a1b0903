"""The replay's acceptance checks on traces with step times measured without the profiler: which run of
each AMP-vs-FP32 pair is faster (verdict without the profiler against the measured change), and the saving
each what-if predicts against the saving measured when the fix was applied for real.

Usage: python scripts/replay_acceptance.py [--planted-store DIR] [--planted DIR] [--shared DIR]
(the planted store holds /work/planted's traces; the shared Conformer traces are ingested into a temporary
store). Prints two Markdown tables.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_replay import measured_runs

import traceq
from traceq.analysis.replay.api import Replayer
from traceq.analysis.replay.compare import compare_replayers
from traceq.query.engine import Session
from traceq.store import Store

#: AMP-vs-FP32 pairs, BASE (fp32) -> NEW (fp16).
PAIRS = [
    ("control_fp32", "control_fp16"),
    ("enc_fp32", "enc_fp16"),
    ("base8_fp32", "base8_fp16"),
    ("resnet50_b64_fp32", "resnet50_b64_fp16"),
    ("resnet18_b4_fp32", "resnet18_b4_fp16"),
    ("bert_b4_fp32", "bert_b4_fp16"),
    ("conformer_fp32_b4", "conformer_fp16_b4"),
    ("conformer_fp32_b64", "conformer_fp16_b64"),
    ("conformer_fp32_b4_shapes", "conformer_fp16_b4_shapes"),
    ("base128_fp32", "base128_fp16"),
    ("enc_b128_fp32", "enc_b128_fp16"),
    ("sync_fp32", "sync_fp16"),
    ("cudnn_var_fp32", "cudnn_var_fp16"),
]
#: Fixes applied for real: the run with the cause, its fixed twin (same lease), the what-if that models it.
FIXES = [
    ("input8_fp16", "workers8_fp16", "input_pipeline"),
    ("input_fp16", "workers_fp16", "input_pipeline"),
    ("cudnn_var_fp16", "cudnn_var_nobench_fp16", "algorithm_search"),
    ("sync_b128_fp32", "enc_b128_fp32", "host_sync"),
    ("sync128_fp32", "base128_fp32", "host_sync"),
    ("sync_b128_fp16", "enc_b128_fp16", "host_sync"),
    ("sync128_fp16", "base128_fp16", "host_sync"),
    ("sync8_fp16", "base8_fp16", "host_sync"),
    ("sync_fp16", "enc_fp16", "host_sync"),
    ("sync_fp32", "enc_fp32", "host_sync"),
    ("enc_fp16", "half_fp16", "cast_overhead"),
    ("base8_fp16", "half8_fp16", "cast_overhead"),
    ("alloc8_fp16", "base8_fp16", "allocator"),
    ("alloc_fp16", "enc_fp16", "allocator"),
    ("alloc128_fp32_c5", "base128_fp32_c5", "allocator"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--planted-store", default="/work/planted_store", help="a store of the planted traces")
    ap.add_argument("--planted", default="/work/planted")
    ap.add_argument("--shared", default="/work/shared")
    a = ap.parse_args()
    runs = measured_runs(Path(a.planted), Path(a.shared))
    conformer = tempfile.mkdtemp(prefix="replay-conformer-")
    files = sorted(str(p) for p in (Path(a.shared) / "traces/kineto").glob("conformer_*.json.gz"))
    traceq.ingest(files, store=conformer)
    stores = {"planted": Store(a.planted_store), "conformer": Store(conformer)}
    loaded: dict[str, Replayer] = {}

    def replayer(name: str) -> Replayer:
        if name not in loaded:
            store = stores[runs[name]["source"]]
            run_id = store.resolve(name)
            with Session(store, [run_id], use_stored=False, own_queries=True) as s:
                loaded[name] = Replayer.load(s, run_id)
        return loaded[name]

    print("| BASE -> NEW | measured change | traced | without the profiler [band] | flips | host ratio, scaled "
          "| direction |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    right = 0
    for base, new in PAIRS:
        v = compare_replayers(replayer(base), replayer(new))
        measured = (runs[new]["step_ms"] / runs[base]["step_ms"] - 1) * 100
        ok = (measured > 0) == (v.change_pct > 0)
        right += ok
        band = f"[{v.change_low:+.1f}, {v.change_high:+.1f}]" + (" (uncertain)" if v.uncertain else "")
        ratio = f"{v.host_ratio:.2f}" + (f", {v.scaled.upper()}" if v.scaled else "") if v.host_ratio else ""
        print(f"| {base} -> {new} | {measured:+.1f}% | {v.traced_change_pct:+.1f}% | {v.change_pct:+.1f}% {band} | "
              f"{'yes' if v.flips else ''} | {ratio} | {'right' if ok else 'WRONG'} |")  # fmt: skip
    print(f"\n{right} of {len(PAIRS)} directions right\n")
    print("| fix | run -> fixed run | predicted saving ms [band] | measured (step_ms) | measured (one-by-one) "
          "| error |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for run, fixed, cause in FIXES:
        row = replayer(run).what_if([cause]).row(0, named=True)
        measured = runs[run]["step_ms"] - runs[fixed]["step_ms"]
        each_a, each_b = runs[run].get("step_ms_each_median"), runs[fixed].get("step_ms_each_median")
        each = each_a - each_b if each_a and each_b else None
        error = (row["saving_ms"] / measured - 1) * 100 if measured else float("nan")
        each_error = f" ({(row['saving_ms'] / each - 1) * 100:+.0f}%)" if each else ""
        print(f"| {cause} | {run} -> {fixed} | {row['saving_ms']:.2f} [{row['saving_low']:.2f}, "
              f"{row['saving_high']:.2f}] | {measured:.2f} | {'' if each is None else f'{each:.2f}'} | "
              f"{error:+.1f}%{each_error} |")  # fmt: skip


if __name__ == "__main__":
    main()
