"""Calibrate the replay's profiler-cost model on traces whose step times were measured without the profiler.

For every run with a measured step time (``step_ms`` of the planted traces' manifest and of the shared
Conformer traces' runs.json), the script replays the trace without the profiler's cost and finds, by
bisection, the ``alpha`` (share of each host transition's typical length that is profiler cost) that
reproduces the measured step time; for traces with Python stacks, the ``beta`` (pure-Python slowdown)
that does so at the fitted ``alpha``. The model's constants are the medians over *clean* runs: whose
measurement is consistent (back-to-back mean and one-by-one median within 6%, where both exist) and
sensitive to the model (traced step at least 15% above the measured one). Each run is then predicted
with the constants fitted on the other machines' clean runs only (leave one machine out), and the table
gives the error against both measurements.

Usage: python scripts/calibrate_replay.py [--planted-store DIR] [--shared DIR] [--out FILE.jsonl]
(the Conformer traces are ingested into a temporary store unless --conformer-store names one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import traceq
from traceq.analysis.replay.api import Replayer
from traceq.analysis.replay.engine import replay
from traceq.analysis.replay.overhead import OverheadModel, overhead_scenario
from traceq.query.engine import Session
from traceq.store import Store


def measured_runs(planted: Path, shared: Path) -> dict[str, dict]:
    """Run name -> settings and measured times (chrome traces only)."""
    out: dict[str, dict] = {}
    manifest = json.loads((planted / "manifest.json").read_text())["traces"]
    for file, v in manifest.items():
        if file.endswith(".json.gz"):
            out[file[: -len(".json.gz")]] = {**v, "source": "planted"}
    runs = shared / "traces" / "kineto" / "runs.json"
    if runs.exists():
        for v in json.loads(runs.read_text())["runs"]:
            name = v["trace"][: -len(".json.gz")]
            out[name] = {**v, "model": "conformer", "machine": "conformer", "source": "conformer"}
    return out


def solve(f, target: float, lo: float, hi: float, iters: int = 22) -> float | None:
    """The x in [lo, hi] where the decreasing ``f(x)`` meets ``target`` (None if it does not)."""
    if f(lo) <= target:
        return lo
    if f(hi) > target:
        return None
    for _ in range(iters):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--planted-store", default="/work/planted_store", help="a store of the planted traces")
    ap.add_argument("--planted", default="/work/planted")
    ap.add_argument("--shared", default="/work/shared")
    ap.add_argument("--conformer-store", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    runs = measured_runs(Path(a.planted), Path(a.shared))
    conf_store = a.conformer_store
    if conf_store is None and any(v["source"] == "conformer" for v in runs.values()):
        conf_store = tempfile.mkdtemp(prefix="replay-conformer-")
        files = sorted(str(p) for p in (Path(a.shared) / "traces" / "kineto").glob("conformer_*.json.gz"))
        traceq.ingest(files, store=conf_store)
    stores = {"planted": Store(a.planted_store), "conformer": Store(conf_store) if conf_store else None}
    default = OverheadModel()
    rows = []
    replayers: dict[str, Replayer] = {}
    for name, v in runs.items():
        store = stores[v["source"]]
        run_id = store.resolve(name)
        with Session(store, [run_id], use_stored=False) as s:
            r = Replayer.load(s, run_id)
        replayers[name] = r
        traced = r.traced().step_ms
        meas, each = v["step_ms"], v.get("step_ms_each_median")

        def at(alpha: float, beta: float, r: Replayer = r) -> float:
            return replay(r.graph, overhead_scenario(r.graph, OverheadModel(alpha, beta))).step_ms

        stacks = r.timeline.stacks
        beta = 0.0 if stacks else default.beta
        alpha = solve(lambda x, at=at, beta=beta: at(x, beta), meas, 0.0, 4.0)
        rows.append(
            {
                "run": name,
                "machine": v.get("machine"),
                "model": v.get("model"),
                "mode": v.get("mode"),
                "batch": v.get("batch"),
                "stacks": stacks,
                "measured_ms": meas,
                "each_median_ms": each,
                "traced_ms": round(traced, 3),
                "alpha_req": alpha,
                "clean": (each is None or abs(meas - each) / meas < 0.06) and traced / meas > 1.15,
            }
        )
        print(f"{name}: alpha_req {alpha}", file=sys.stderr, flush=True)
    clean = [r for r in rows if r["clean"] and not r["stacks"] and r["alpha_req"] is not None]
    alphas = sorted(r["alpha_req"] for r in clean)
    q = statistics.quantiles(alphas, n=4)
    print(f"alpha: median {statistics.median(alphas):.3f}, quartiles {q[0]:.3f} {q[2]:.3f} over {len(alphas)} runs")
    for row in rows:  # beta for traces with stacks, at the alpha of the other machines
        if row["stacks"]:
            others = [r["alpha_req"] for r in clean if r["machine"] != row["machine"]]
            al = statistics.median(others)
            rp = replayers[row["run"]]
            row["beta_req"] = solve(
                lambda b, rp=rp, al=al: replay(rp.graph, overhead_scenario(rp.graph, OverheadModel(al, b))).step_ms,
                row["measured_ms"],
                0.0,
                0.95,
            )
    betas = sorted(r["beta_req"] for r in rows if r["stacks"] and r["clean"] and r.get("beta_req") is not None)
    if betas:
        print(f"beta: median {statistics.median(betas):.3f} over {len(betas)} runs: {[round(b, 2) for b in betas]}")
    for row in rows:  # leave one machine out
        others = [r["alpha_req"] for r in clean if r["machine"] != row["machine"]]
        other_b = [
            r["beta_req"]
            for r in rows
            if r["stacks"] and r["clean"] and r.get("beta_req") is not None and r["machine"] != row["machine"]
        ]
        model = OverheadModel(statistics.median(others), statistics.median(other_b) if other_b else default.beta)
        rp = replayers[row["run"]]
        est = replay(rp.graph, overhead_scenario(rp.graph, model)).step_ms
        row["alpha_loo"], row["beta_loo"] = round(model.alpha, 3), round(model.beta, 3)
        row["estimate_ms"] = round(est, 3)
        row["error_pct"] = round((est / row["measured_ms"] - 1) * 100, 1)
        if row["each_median_ms"]:
            row["error_each_pct"] = round((est / row["each_median_ms"] - 1) * 100, 1)
        print(json.dumps(row))
    if a.out:
        Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
