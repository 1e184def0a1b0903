"""Make real multi-rank torch.profiler traces: DDP training of the Conformer on N GPUs, FP32 vs FP16 AMP.

Runs on a machine with N GPUs, one process per GPU (torchrun). The model and training step come from
the single-GPU trace generator (``--tools``: the folder holding ``gen_gpu_traces.py``). One rank can be
made a straggler: it sleeps ``--straggle-ms`` before each step (as a slow data loader would), so the
other ranks wait for it in the gradient all-reduce. Each rank writes ``ddp_<mode>_rank<r>.json.gz``
(Kineto fills ``distributedInfo`` with the rank) and rank 0 writes ``ddp_runs.json`` with the
unprofiled step times.

Usage: torchrun --nproc_per_node=2 scripts/gen_ddp_traces.py --tools DIR --out DIR
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import shutil
import time
from pathlib import Path

import torch
import torch.distributed as dist


def load_generator(tools: str):
    spec = importlib.util.spec_from_file_location("gen_gpu_traces", Path(tools) / "gen_gpu_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--frames", type=int, default=400)
    ap.add_argument("--modes", default="fp32,fp16")
    ap.add_argument("--straggler", type=int, default=1, help="rank that sleeps before each step (-1: none)")
    ap.add_argument("--straggle-ms", type=float, default=15.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--prof-steps", type=int, default=3)
    a = ap.parse_args()
    gen = load_generator(a.tools)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    torch.backends.cudnn.benchmark = True
    os.makedirs(a.out, exist_ok=True)
    runs = []
    for mode in a.modes.split(","):
        torch.manual_seed(0)
        model = gen.Conformer(layers=a.layers).cuda()
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
        opt = torch.optim.Adam(ddp.parameters(), lr=1e-4)
        scaler = torch.amp.GradScaler("cuda") if mode == "fp16" else None
        batch = gen.make_batch(a.batch, "cuda", frames=a.frames)

        def step() -> None:
            if rank == a.straggler:
                time.sleep(a.straggle_ms / 1e3)
            gen.train_step(ddp, opt, scaler, batch, mode)  # noqa: B023

        for _ in range(5):
            step()
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
        step_ms = (time.perf_counter() - t0) / a.steps * 1e3
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        sched = torch.profiler.schedule(wait=1, warmup=1, active=a.prof_steps)
        with torch.profiler.profile(activities=acts, schedule=sched) as prof:
            for _ in range(2 + a.prof_steps):
                step()
                prof.step()
        path = Path(a.out) / f"ddp_{mode}_rank{rank}.json"
        prof.export_chrome_trace(str(path))
        with open(path, "rb") as f, gzip.open(str(path) + ".gz", "wb", compresslevel=6) as g:
            shutil.copyfileobj(f, g)
        path.unlink()
        runs.append({"mode": mode, "rank": rank, "step_ms": round(step_ms, 3)})
        dist.barrier()
    gathered = [None] * world
    dist.all_gather_object(gathered, runs)
    if rank == 0:
        info = {
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0),
            "world_size": world,
            "layers": a.layers,
            "batch_per_rank": a.batch,
            "frames": a.frames,
            "straggler_rank": a.straggler,
            "straggle_ms": a.straggle_ms,
            "runs": [r for rs in gathered for r in rs],
        }
        (Path(a.out) / "ddp_runs.json").write_text(json.dumps(info, indent=1) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
