"""Step times without the profiler, measured so that they can be trusted, then the traces, in a separate pass.

torch.profiler leaves CUPTI attached after it ends, so a step timed in a process that has already profiled
runs slower (30-50 % on launch-bound runs), and launch-bound runs vary 10-25 % from one host to another
and from round to round. The protocol therefore:

1. times every run in a fresh process that never starts a profiler (``time`` below): five warm-up steps,
   then ``--steps`` steps back to back (the GPU drained before and after) and the same number one by one;
   Runs named in ``--warm`` are first timed once each, kept as ``warmup`` records and not as rounds (the
   first process on a host fills CUDA's on-disk kernel cache: cudnn_var_fp16 took 951 ms, then 404, 338);
2. repeats that for ``--rounds`` rounds (at least 3), the runs' order reversed every other round, so each
   pair's two modes alternate which goes first; every round is kept;
3. only then records each run's trace, again each in a fresh process (``profile``), and, with ``--nsys``,
   captures under Nsight Systems.

The truth of a run is the median of its rounds; the rounds' spread is kept beside it.

Usage (on a CUDA machine with PyTorch; run names are ``gen_planted_traces.py``'s):
  python3 measure_clean.py protocol --runs A,B,... --rounds 3 --out DIR [--machine LABEL] [--budget S]
  python3 measure_clean.py time RUN [--steps N]          # one timing, printed as a JSON line
  python3 measure_clean.py profile RUN --out DIR         # one trace (gzipped chrome JSON) in DIR
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def host() -> dict:
    """What identifies the host a measurement was made on (its CPU sets a launch-bound run's pace)."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "node": platform.node()}


def time_run(name: str, steps: int) -> dict:
    """Time one run in this process, which must never have started a profiler."""
    sys.path.insert(0, str(HERE))
    import gen_planted_traces as gen  # imports torch; starts no profiler

    cfg = gen.RUNS[name]
    steps = cfg.get("steps", steps)
    tr = gen.Trainer(cfg)
    for _ in range(5):
        tr.step()
    step_ms, each = gen.time_steps(tr, steps)
    return {"run": name, "steps_timed": steps, "step_ms": round(step_ms, 3),
            "step_ms_each_median": round(statistics.median(each), 3)}  # fmt: skip


def profile_run(name: str, out: str, prof_steps: int) -> dict:
    """Record one run's trace in this fresh process (its timing before the profile is clean too)."""
    sys.path.insert(0, str(HERE))
    import gen_planted_traces as gen

    rec = gen.run(name, out, steps=20, prof_steps=prof_steps, nsys=False)
    rec["step_ms_before_profile"] = rec.pop("step_ms")
    return rec


def child(args: list[str], timeout: float) -> dict:
    """Run this script's subcommand in a fresh process; its last stdout line is the JSON record."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True,
                           timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1][:300]}
    rec = json.loads(lines[-1])
    rec["process_s"] = round(time.perf_counter() - t0, 1)
    return rec


def protocol(a: argparse.Namespace) -> None:
    runs = [r for r in a.runs.split(",") if r]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    meta = {"machine": a.machine, **host()}
    log = out / "clean_rounds.jsonl"
    for name in [r for r in a.warm.split(",") if r]:  # fills on-disk caches (CUDA's kernel cache) once
        rec = {"run": name, "warmup": True, **child(["time", name, "--steps", "3"], 240), **meta}
        with log.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)
    for rnd in range(1, a.rounds + 1):
        order = runs if rnd % 2 else runs[::-1]
        for pos, name in enumerate(order):
            left = a.budget - (time.time() - start)
            if left < 30:
                print(f"round {rnd}: out of time before {name}", flush=True)
                break
            rec = {"run": name, "round": rnd, "position": pos, **child(["time", name, "--steps", str(a.steps)],
                                                                        min(left, 240)), **meta}  # fmt: skip
            with log.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)
    for name in [r for r in a.profile.split(",") if r] if a.profile else []:
        left = a.budget - (time.time() - start)
        if left < 45:
            print(f"profile: out of time before {name}", flush=True)
            break
        rec = {"run": name, **child(["profile", name, "--out", str(out / "traces")], min(left, 240)), **meta}
        with (out / "profiled.jsonl").open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("protocol")
    p.add_argument("--runs", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--out", required=True)
    p.add_argument("--machine", default="")
    p.add_argument("--budget", type=float, default=1e9, help="seconds for the whole protocol")
    p.add_argument("--profile", default="", help="runs to profile after every round (fresh processes)")
    p.add_argument("--warm", default="", help="runs timed once before the rounds, kept as warm-up records: the "
                   "first process on a host fills CUDA's on-disk kernel cache (cudnn_var_fp16: 951 ms, then 404)")
    t = sub.add_parser("time")
    t.add_argument("run")
    t.add_argument("--steps", type=int, default=30)
    pr = sub.add_parser("profile")
    pr.add_argument("run")
    pr.add_argument("--out", required=True)
    pr.add_argument("--prof-steps", type=int, default=5)
    a = ap.parse_args()
    if a.cmd == "protocol":
        if a.rounds < 3:
            ap.error("--rounds: a step time without the profiler takes at least 3 rounds")
        protocol(a)
    elif a.cmd == "time":
        print(json.dumps(time_run(a.run, a.steps)), flush=True)
    else:
        os.makedirs(a.out, exist_ok=True)
        print(json.dumps(profile_run(a.run, a.out, a.prof_steps)), flush=True)


if __name__ == "__main__":
    main()
