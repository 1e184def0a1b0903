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
3. records each run's trace halfway through the rounds, again each in a fresh process (``profile``), so
   that a host whose speed drifts over the rounds is timed on both sides of the traces (traces recorded
   first on one lease were followed by rounds that slowed 1.3-1.8x); ``clean_on_gpu.sh`` then captures
   under Nsight Systems.

The truth of a run is the median of its rounds; the rounds' spread is kept beside it. A pair's truth is
the median over rounds of one mode's time over the other's in that round (the two timed next to each
other), which a drifting host moves less than the ratio of the two medians.

Run names are ``gen_planted_traces.py``'s, or ``conformer_MODE_bBATCH`` for the Conformer of the shared
Kineto traces, built by the generator that made them (``CONFORMER_TOOL``, default
``../shared/tools/gen_gpu_traces.py``). Each record carries the host's one-minute load average.

Usage (on a CUDA machine with PyTorch):
  python3 measure_clean.py protocol --runs A,B,... --rounds 3 --out DIR [--machine LABEL] [--budget S]
  python3 measure_clean.py time RUN [--steps N]          # one timing, printed as a JSON line
  python3 measure_clean.py profile RUN --out DIR         # one trace (gzipped chrome JSON) in DIR
  python3 measure_clean.py capture RUN [--ops [--no-shapes]] [--user-ranges]  # NVTX ranges, for an outside nsys
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFORMER = re.compile(r"conformer_(fp32|fp16|bf16)_b(\d+)")
CONFORMER_LAYERS = 6  # as the shared Kineto traces


def conformer_tool() -> types.ModuleType:
    """The generator of the shared Conformer traces, imported from ``CONFORMER_TOOL``."""
    path = os.environ.get("CONFORMER_TOOL", str(HERE.parent.parent / "shared" / "tools" / "gen_gpu_traces.py"))
    spec = importlib.util.spec_from_file_location("gen_gpu_traces", path)
    assert spec is not None and spec.loader is not None, path
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.torch.backends.cudnn.benchmark = True  # as its main() sets it
    return tool


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


def load1() -> float | None:
    """The host's one-minute load average (other work slows a launch-bound run)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def time_run(name: str, steps: int) -> dict:
    """Time one run in this process, which must never have started a profiler."""
    if m := CONFORMER.fullmatch(name):
        r = conformer_tool().run(m[1], int(m[2]), CONFORMER_LAYERS, "", steps, 0)  # 0: no profiler
        return {"run": name, "steps_timed": steps, "step_ms": r["step_ms"], "step_ms_each_median": None}
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
    if m := CONFORMER.fullmatch(name):
        os.makedirs(out, exist_ok=True)
        t0 = time.perf_counter()
        r = conformer_tool().run(m[1], int(m[2]), CONFORMER_LAYERS, out, 20, prof_steps)
        return {"run": name, "model": "conformer", "mode": m[1], "batch": int(m[2]), "trace": r["trace"],
                "prof_steps": prof_steps, "with_stack": False, "record_shapes": False, "json_bytes": r["json_bytes"],
                "step_ms_before_profile": r["step_ms"], "profiled_wall_ms_per_step": None,
                "process_wall_s": round(time.perf_counter() - t0, 1)}  # fmt: skip
    sys.path.insert(0, str(HERE))
    import gen_planted_traces as gen

    rec = gen.run(name, out, steps=20, prof_steps=prof_steps, nsys=False)
    rec["step_ms_before_profile"] = rec.pop("step_ms")
    return rec


def capture_run(name: str, steps: int, ops: bool, shapes: bool = True, user_ranges: bool = False) -> dict:
    """Run ``name`` for an outside ``nsys profile``: five warm-up steps, then ``steps`` steps, each inside
    an NVTX range ``train_step N`` as users name theirs; with ``ops``, PyTorch's NVTX op ranges too
    (``emit_nvtx(record_shapes=True)``, as the shared captures were made; ``shapes=False``: without their
    shapes, as the planted captures were); with ``user_ranges``, a user's NVTX range ``backward`` around
    each backward pass too (users mark their phases so; the training loop's thread waits in it while
    autograd's thread runs the backward). Never starts torch.profiler."""
    if m := CONFORMER.fullmatch(name):
        tool = conformer_tool()
        torch = tool.torch
        torch.manual_seed(0)
        model = tool.Conformer(layers=CONFORMER_LAYERS).to("cuda")
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        scaler = torch.amp.GradScaler("cuda") if m[1] == "fp16" else None
        batch = tool.make_batch(int(m[2]), "cuda")

        def step() -> None:
            tool.train_step(model, opt, scaler, batch, m[1])
    else:
        sys.path.insert(0, str(HERE))
        import gen_planted_traces as gen

        torch = gen.torch
        step = gen.Trainer(gen.RUNS[name]).step
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    if user_ranges:
        backward = torch.Tensor.backward

        def marked(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            torch.cuda.nvtx.range_push("backward")
            try:
                return backward(self, *args, **kwargs)
            finally:
                torch.cuda.nvtx.range_pop()

        torch.Tensor.backward = marked
    nvtx = torch.autograd.profiler.emit_nvtx(record_shapes=shapes) if ops else contextlib.nullcontext()
    t0 = time.perf_counter()
    with nvtx:
        for i in range(steps):
            torch.cuda.nvtx.range_push(f"train_step {i + 1}")
            step()
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    kind = f" and PyTorch's op ranges {'with' if shapes else 'without'} shapes" if ops else " only"
    kind += ", a user's range `backward` around each backward pass" if user_ranges else ""
    return {"run": name, "nvtx": "train_step ranges" + kind,
            "steps": steps, "captured_ms_per_step": round((time.perf_counter() - t0) / steps * 1e3, 3)}  # fmt: skip


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
    rec["load1_after"] = load1()
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
    profiles = [r for r in a.profile.split(",") if r]
    middle = a.first_round + a.rounds // 2  # the traces are recorded before this round
    for rnd in range(a.first_round, a.first_round + a.rounds):
        if rnd == middle:
            profile_all(profiles, out, a.budget - (time.time() - start), meta)
        order = runs if rnd % 2 else runs[::-1]
        for pos, name in enumerate(order):
            left = a.budget - (time.time() - start) - (60 * len(profiles) if rnd < middle else 0)
            if left < 30:
                print(f"round {rnd}: out of time before {name}", flush=True)
                break
            rec = {"run": name, "round": rnd, "position": pos, **child(["time", name, "--steps", str(a.steps)],
                                                                        min(left, 240)), **meta}  # fmt: skip
            with log.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)


def profile_all(profiles: list[str], out: Path, budget: float, meta: dict) -> None:
    """Record each run's trace, each in a fresh process, between the rounds: a host that drifts over the
    rounds (one lease's launch-bound steps slowed 1.3-1.8x over nine minutes) then drifts on both sides
    of the traces, not only after them."""
    start = time.time()
    for name in profiles:
        left = budget - (time.time() - start)
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
    p.add_argument(
        "--first-round",
        type=int,
        default=1,
        help="the number of the first round: rounds taken after "
        "the profiles (as well as before) continue the numbering",
    )
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--out", required=True)
    p.add_argument("--machine", default="")
    p.add_argument("--budget", type=float, default=1e9, help="seconds for the whole protocol")
    p.add_argument("--profile", default="", help="runs to profile halfway through the rounds (fresh processes)")
    p.add_argument(
        "--warm",
        default="",
        help="runs timed once before the rounds, kept as warm-up records: the "
        "first process on a host fills CUDA's on-disk kernel cache (cudnn_var_fp16: 951 ms, then 404)",
    )
    t = sub.add_parser("time")
    t.add_argument("run")
    t.add_argument("--steps", type=int, default=30)
    pr = sub.add_parser("profile")
    pr.add_argument("run")
    pr.add_argument("--out", required=True)
    pr.add_argument("--prof-steps", type=int, default=5)
    c = sub.add_parser("capture")
    c.add_argument("run")
    c.add_argument("--steps", type=int, default=8)
    c.add_argument("--ops", action="store_true", help="PyTorch's NVTX op ranges too (emit_nvtx with shapes)")
    c.add_argument("--no-shapes", action="store_true", help="with --ops: the op ranges without their shapes")
    c.add_argument("--user-ranges", action="store_true", help="a user's NVTX range `backward` around each backward")
    a = ap.parse_args()
    if a.cmd == "protocol":
        if a.rounds < 3:
            ap.error("--rounds: a step time without the profiler takes at least 3 rounds")
        protocol(a)
    elif a.cmd == "time":
        print(json.dumps(time_run(a.run, a.steps)), flush=True)
    elif a.cmd == "capture":
        print(json.dumps(capture_run(a.run, a.steps, a.ops, not a.no_shapes, a.user_ranges)), flush=True)
    else:
        os.makedirs(a.out, exist_ok=True)
        print(json.dumps(profile_run(a.run, a.out, a.prof_steps)), flush=True)


if __name__ == "__main__":
    main()
