"""Write ``sample_traces/planted/manifest.json`` from the clean protocol's records (``measure_clean.py``).

Every run the tests use gets ``step_ms``: the median of its clean rounds (each timed in a fresh process
that never started a profiler, modes alternating), ``step_ms_rounds``: every round, ``measured_on``: the
host the rounds were timed on, and ``traced_on``: the host its trace was recorded on. A run whose trace
and rounds come from different hosts is marked ``same_host: false``: launch-bound runs differ 10-25 %
between hosts, so the tests and the calibration use such a run's time only in ratios with the run it is
compared with on the same host.

Usage: python scripts/clean_manifest.py CLEAN_ROUNDS.jsonl PROFILED.jsonl [--old OLD_MANIFEST] OUT_DIR
(the traces in OUT_DIR named RUN_3steps.json.gz or nsys_RUN_*steps.sqlite.gz; the old manifest supplies
the settings and host of traces recorded earlier.)
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

NOTE = (
    "step_ms: median of step_ms_rounds, each round timed in a fresh process that never started a profiler "
    "(5 warm-up steps, then steps_timed steps back to back), runs alternating order between rounds "
    "(scripts/measure_clean.py); measured_on / traced_on: the GPU machine lease of the rounds and of the trace; "
    "step_ms_before_profile: the same run timed in the fresh process that then recorded its trace"
)


def run_of(trace: str) -> str:
    """The generator's run name of a committed trace file."""
    name = re.sub(r"_\d+steps\.(json|sqlite)\.gz$", "", trace)
    return name.removeprefix("nsys_")


def conformer_settings(run: str) -> dict | None:
    """The settings of a run of the shared Conformer generator (``conformer_MODE_bBATCH``)."""
    m = re.fullmatch(r"conformer_(fp32|fp16|bf16)_b(\d+)", run)
    return {"model": "conformer", "mode": m[1], "batch": int(m[2]), "layers": 6} if m else None


def generator_settings() -> dict[str, dict]:
    """``gen_planted_traces.RUNS`` read without importing it (it needs PyTorch)."""
    tree = ast.parse((Path(__file__).parent / "gen_planted_traces.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "RUNS":
            assert isinstance(node.value, ast.Dict)
            return {
                ast.literal_eval(k): {kw.arg: ast.literal_eval(kw.value) for kw in v.keywords}
                for k, v in zip(node.value.keys, node.value.values, strict=True)
                if k is not None and isinstance(v, ast.Call)
            }
    raise SystemExit("gen_planted_traces.py: no RUNS")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds")
    ap.add_argument("profiled")
    ap.add_argument("out")
    ap.add_argument("--old", default=None)
    ap.add_argument("--lease-note", default="", help="what this lease's rounds showed, kept in the manifest")
    ap.add_argument("--measured-only", default="half_fp16,alloc_fp16,sync_fp16,enc_b128_fp16,sync_b128_fp16")
    a = ap.parse_args()
    rounds: dict[str, list[dict]] = defaultdict(list)
    for line in Path(a.rounds).read_text().splitlines():
        rec = json.loads(line)
        if "step_ms" in rec and not rec.get("warmup"):  # a warm-up process fills caches: not a round
            rounds[rec["run"]].append(rec)
    profiled = {}
    for line in Path(a.profiled).read_text().splitlines():
        rec = json.loads(line)
        profiled[rec["run"]] = rec
    old = json.loads(Path(a.old).read_text()) if a.old else {"traces": {}, "captures": {}}
    old_by_run = {run_of(k): v for k, v in {**old["traces"], **old.get("captures", {})}.items()}
    gen = generator_settings()
    gen |= {run: c for run in rounds if (c := conformer_settings(run))}

    def clean(run: str) -> dict:
        rs = sorted(rounds[run], key=lambda r: r["round"])
        ms = [r["step_ms"] for r in rs]
        return {
            "step_ms": round(statistics.median(ms), 3),
            "step_ms_rounds": ms,
            "round_numbers": [r["round"] for r in rs],
            "step_ms_each_median_rounds": [r.get("step_ms_each_median") for r in rs],
            "steps_timed": rs[0]["steps_timed"],
            "measured_on": rs[0]["machine"],
            "host_cpu": rs[0]["cpu"],
        }

    out = Path(a.out)
    traces, captures = {}, {}
    for path in sorted(out.glob("*.gz")):
        run = run_of(path.name)
        if run not in rounds:
            raise SystemExit(f"{path.name}: no clean rounds for run {run!r}")
        if run in profiled and path.name.endswith(".json.gz"):
            p = profiled[run]
            entry = dict(gen[run])
            entry |= {"traced_on": rounds[run][0]["machine"], "prof_steps": p["prof_steps"],
                      "with_stack": p["with_stack"], "profiled_wall_ms_per_step": p["profiled_wall_ms_per_step"],
                      "step_ms_before_profile": p["step_ms_before_profile"]}  # fmt: skip
        else:
            o = old["traces"].get(path.name) or old.get("captures", {}).get(path.name) or old_by_run[run]
            entry = dict(gen[run]) | {"traced_on": o["machine"]}
            for k in ("cut", "steps_kept", "nsys_step_ms"):
                if k in o:
                    entry[k] = o[k]
        entry |= clean(run)
        entry["same_host"] = entry["traced_on"] == entry["measured_on"]
        (captures if path.name in old.get("captures", {}) else traces)[path.name] = entry
    only = {}
    for run in [r for r in a.measured_only.split(",") if r]:
        only[run] = dict(gen[run]) | clean(run)
    doc = {
        "gpu": "NVIDIA H200",
        "torch": "2.11.0+cu130",
        "note": NOTE,
        **({"lease_note": a.lease_note} if a.lease_note else {}),
        "traces": traces,
        "captures": captures,
        "measured_only": only,
    }
    (out / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(traces)} traces, {len(captures)} captures, {len(only)} measured-only runs")


if __name__ == "__main__":
    main()
